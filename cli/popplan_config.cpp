// popplan validate and popplan schema: check configs (all diagnostics, text or JSON)
// and print the config's JSON Schema. Exit codes: 0 valid, 2 invalid.
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/output_file.h"
#include "cli/verbs.h"
#include "config/yaml/load.h"
#include "config/yaml/schema.h"

namespace popkit::cli {
namespace {

struct ValidateOptions {
  std::string format = "text";
  std::vector<std::string> overrides;
  std::vector<std::string> files;
};

// Text: the diagnostics of each file, then "FILE: valid" or "FILE: invalid (N errors)".
// JSON: {"files": [{"file", "valid", "report": {"diagnostics", "errors", "warnings"}}],
// "valid": bool}.
int run_validate(const ValidateOptions& options) {
  const bool json = options.format == "json";
  bool all_valid = true;
  if (json) std::cout << "{\"files\": [";
  for (std::size_t i = 0; i < options.files.size(); ++i) {
    const std::string& file = options.files[i];
    const auto result = config::load_config_file(file, options.overrides);
    all_valid = all_valid && result.ok();
    if (json) {
      std::cout << (i ? ", " : "") << "{\"file\": " << config::json_quote(file)
                << ", \"valid\": " << (result.ok() ? "true" : "false") << ", \"report\": ";
      config::print_diagnostics(std::cout, result.diagnostics, result.sources,
                                config::DiagnosticFormat::kJson);
      std::cout << "}";
      continue;
    }
    config::print_diagnostics(std::cout, result.diagnostics, result.sources);
    std::size_t n_errors = 0;
    std::size_t n_warnings = 0;
    for (const auto& d : result.diagnostics) {
      n_errors += d.severity == config::Severity::kError ? 1 : 0;
      n_warnings += d.severity == config::Severity::kWarning ? 1 : 0;
    }
    if (result.ok()) {
      std::cout << fmt::format(
          "{}: valid{}\n", file,
          n_warnings ? fmt::format(" ({} warning{})", n_warnings, n_warnings == 1 ? "" : "s") : "");
    } else {
      std::cout << fmt::format("{}: invalid ({} error{})\n", file, n_errors,
                               n_errors == 1 ? "" : "s");
    }
  }
  if (json) std::cout << fmt::format("], \"valid\": {}}}\n", all_valid ? "true" : "false");
  return all_valid ? kExitOk : kExitInvalid;
}

}  // namespace

void add_config_verbs(Tool& tool) {
  auto options = std::make_shared<ValidateOptions>();
  CLI::App* validate =
      tool.add("validate",
               "Check configs: every error and warning with file:line:column; exit 0 when all are "
               "valid, 2 when any is invalid (warnings do not fail)",
               [options] { return run_validate(*options); });
  validate->add_option("--format", options->format, "Diagnostics as text or json")
      ->check(CLI::IsMember({"text", "json"}));
  validate
      ->add_option("--set", options->overrides,
                   "Override a key after loading, typed as YAML: --set "
                   "training.micro_batch_size=4 (repeatable)")
      ->allow_extra_args(false)
      ->take_all();
  validate->add_option("FILES", options->files, "Config files (YAML)")->required();

  auto schema_file = std::make_shared<std::string>();
  CLI::App* schema =
      tool.add("schema", "Print the JSON Schema (2020-12) of the config, or write it to -o FILE",
               [schema_file] {
                 if (schema_file->empty()) {
                   std::cout << config::config_schema_json();
                   return kExitOk;
                 }
                 const std::string_view text = config::config_schema_json();
                 AtomicFile file(*schema_file, TemporaryName::kHiddenPerProcess);
                 file.write(text.data(), text.size());
                 file.commit();
                 return kExitOk;
               });
  add_output_option(schema, *schema_file, "write the schema to FILE instead of stdout");
}

}  // namespace popkit::cli
