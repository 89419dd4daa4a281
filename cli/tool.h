// What the three front-ends share: the --version flag from the one version source,
// a table of subcommands (help and dispatch come from the same table), the flags every
// verb has (-q/--quiet), "did you mean" for unknown flags and verbs, and the mapping of
// outcomes to exit codes: 0 success, 1 failure at run time, 2 invalid input, 130
// stopped by SIGINT/SIGTERM.
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <new>
#include <streambuf>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/input_file.h"
#include "base/output_file.h"
#include "base/suggest.h"
#include "config/run_folder.h"
#include "config/yaml/load.h"
#include "popkit/version.h"

namespace popkit::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitInvalid = 2;

inline std::string version_line(const std::string& tool) {
  return fmt::format("{} {} (git {}, {})", tool, kVersion, kGitRevision, kBuildType);
}

inline constexpr int kExitInterrupted = 130;  // 128 + SIGINT, as shells report it

// Where a user reads on: under each tool's description in --help and the man pages.
inline std::string docs_help() {
  return "Documentation: README.md and docs/ in popkit's source tree (docs/concepts.md "
         "first; installed in share/doc/popkit), and man popplan, poprun, popreport.";
}

// The exit codes every tool shares, then what they mean for this tool's verbs.
inline std::string exit_code_help(const std::string& tool_codes) {
  return "Exit codes: 0 success, 1 failure at run time, 2 invalid input, 130 stopped by "
         "SIGINT or SIGTERM. " +
         tool_codes;
}

// The kind of number an option takes, for its check's words.
enum class Number { kWhole, kReal };

// Why `text` is not a number of `kind` ("'abc' is not a whole number"), or "".
inline std::string number_problem(const std::string& text, Number kind) {
  if (kind == Number::kWhole) {
    std::int64_t v = 0;
    return CLI::detail::lexical_cast(text, v) ? "" : "'" + text + "' is not a whole number";
  }
  double v = 0;
  return CLI::detail::lexical_cast(text, v) && std::isfinite(v) ? ""
                                                                : "'" + text + "' is not a number";
}

// A number option's check, in words ("--steps: must be > 0, got 0", "--factor: 'abc' is
// not a whole number"), where CLI11's own say "Could not convert" or name a range up to
// 1.8e308. `min`: the least value taken; `strict`: min itself is not.
inline CLI::Validator number_at_least(Number kind, double min, bool strict) {
  const std::string bound = fmt::format("{} {}", strict ? ">" : ">=", min);
  return CLI::Validator(
      [kind, min, strict, bound](std::string& text) -> std::string {
        if (std::string why = number_problem(text, kind); !why.empty()) return why;
        double v = 0;
        CLI::detail::lexical_cast(text, v);
        return (strict ? v > min : v >= min) ? "" : "must be " + bound + ", got " + text;
      },
      bound);
}
inline CLI::Validator positive(Number kind = Number::kWhole) {
  return number_at_least(kind, 0, true);
}
inline CLI::Validator non_negative(Number kind = Number::kWhole) {
  return number_at_least(kind, 0, false);
}
inline CLI::Validator whole_number() {
  return CLI::Validator([](std::string& text) { return number_problem(text, Number::kWhole); }, "");
}

// -o/--output FILE wherever a verb writes a file, the same in every tool. --out (poprun's
// first spelling) and a verb's own older spelling (`older`, e.g. popplan tune's --write)
// still work, left out of --help so that it shows one way.
// An option naming a FILE the verb writes, checked before the verb does any work: its
// folder must exist and the path must not be a folder ("--output: 'no/such/x.yaml': the
// folder 'no/such' does not exist", exit 2). `flag` names it in that message (CLI11's own
// name for a hidden spelling is empty). The verbs write the file themselves.
inline CLI::Option* add_output_file(CLI::App* app, const std::string& names, std::string& file,
                                    const std::string& help, const std::string& flag) {
  return app->add_option_function<std::string>(
      names,
      [&file, flag](const std::string& path) {
        if (std::string why = output_path_problem(path); !why.empty())
          throw CLI::ValidationError(flag, why);
        file = path;
      },
      help);
}

// --chart FILE.svg: an output file (add_output_file) named .svg, the one format the tools
// draw; another name is refused (exit 2) rather than filled with SVG the name belies.
inline CLI::Option* add_chart_file(CLI::App* app, std::string& file, const std::string& help) {
  return app->add_option_function<std::string>(
      "--chart",
      [&file](const std::string& path) {
        std::string why = output_path_problem(path);
        std::string extension = std::filesystem::path(path).extension().string();
        std::transform(extension.begin(), extension.end(), extension.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        if (why.empty() && extension != ".svg")
          why = fmt::format("{}: charts are drawn as SVG: name the file .svg", path);
        if (!why.empty()) throw CLI::ValidationError("--chart", why);
        file = path;
      },
      help);
}

// Where -o FILE goes: into a folder that must exist (checked as add_output_file does), or
// a run folder the verb creates (poprun train and eval).
enum class OutputFolder { kMustExist, kCreated };

inline void add_output_option(CLI::App* app, std::string& file, const std::string& help,
                              const std::string& older = "",
                              OutputFolder folder = OutputFolder::kMustExist) {
  const auto add = [&](const std::string& names, const std::string& flag) {
    return folder == OutputFolder::kMustExist ? add_output_file(app, names, file, help, flag)
                                              : app->add_option(names, file, help);
  };
  add("-o,--output", "--output");
  add("--out", "--out")->group("");
  if (!older.empty()) add(older, older)->group("");
}

// "popplan plan: error: unknown flag '--fromat'; did you mean '--format'?", one line per
// argument in the order the user typed them (CLI11's own message lists them reversed
// and suggests nothing). Unknown verbs get the same treatment against the verb table.
inline std::string unknown_arguments_message(const CLI::App& app,
                                             const std::vector<std::string>& extras) {
  std::vector<std::string> flags;
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& n : o->get_lnames()) flags.push_back("--" + n);
    for (const std::string& n : o->get_snames()) flags.push_back("-" + n);
  }
  std::vector<std::string> verbs;
  for (const CLI::App* sub : app.get_subcommands({})) verbs.push_back(sub->get_name());
  std::string where = app.get_name();
  for (const CLI::App* p = app.get_parent(); p; p = p->get_parent())
    where = p->get_name() + " " + where;
  std::string out;
  bool named_verbs = false;
  for (const std::string& arg : extras) {
    if (arg.size() > 1 && arg[0] == '-') {
      const std::string flag = arg.substr(0, arg.find('='));
      out +=
          fmt::format("{}: error: unknown flag '{}'{}\n", where, flag, did_you_mean(flag, flags));
    } else if (!verbs.empty() && !named_verbs) {
      const std::string hint = did_you_mean(arg, verbs);
      std::string known;
      for (const std::string& v : verbs) known += (known.empty() ? "" : ", ") + v;
      out += fmt::format("{}: error: unknown verb '{}'{}\n", where, arg,
                         hint.empty() ? " (verbs: " + known + ")" : hint);
      named_verbs = true;  // what follows an unknown verb is its arguments
    } else if (!named_verbs) {
      out += fmt::format("{}: error: unexpected argument '{}'\n", where, arg);
    }
  }
  return out + fmt::format("Run '{} --help' for more information.\n", where);
}

// A FILE argument that cannot be read is the tool's error, as gcc says "gcc: error: x.c:
// No such file": "popplan plan: error: x.yaml: no such file"; what is wrong inside a file
// keeps the compiler form, file:line:column: error:. False after saying so (exit 2).
inline bool input_readable(const std::string& where, const std::string& path) {
  const std::string why = input_file_problem(path);
  if (why.empty()) return true;
  std::cerr << fmt::format("{}: error: {}: {}\n", where, path, why);
  return false;
}

// A config given on the command line: a config file, or a run folder or its run file
// (config/run_folder.h) standing for the folder's config.yaml.
inline bool config_readable(const std::string& where, const std::string& path) {
  const std::string file = config::config_file_of(path);
  if (!input_readable(where, file)) return false;
  if (const std::string why = config::config_name_problem(file); !why.empty()) {
    std::cerr << fmt::format("{}: error: {}: {}\n", where, file, why);
    return false;
  }
  return true;
}

// A stream buffer that takes everything and keeps nothing: std::cout under --quiet, so
// verbs print as usual and still see a good stream.
class NullBuffer final : public std::streambuf {
 protected:
  int overflow(int c) override { return c == traits_type::eof() ? 0 : c; }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

class Tool {
 public:
  // `exit_codes`: what the codes mean for this tool's verbs, for the --help footer.
  Tool(std::string name, const std::string& description, const std::string& exit_codes)
      : name_(std::move(name)), app_(description + "\n" + docs_help(), name_) {
    app_.set_version_flag("--version", version_line(name_));
    app_.footer(exit_code_help(exit_codes));
    app_.require_subcommand(0, 1);
  }

  CLI::App& app() { return app_; }

  // Adds a line to --version, computed when asked (poprun: the kernel level).
  void add_version_detail(std::function<std::string()> detail) {
    app_.set_version_flag("--version", [name = name_, detail = std::move(detail)] {
      return version_line(name) + "\n" + detail();
    });
  }
  const std::string& name() const { return name_; }
  // "popplan plan": the tool and the verb given, what every error starts with; the tool
  // alone before a verb is parsed.
  [[nodiscard]] std::string where() const {
    for (const auto& verb : verbs_)
      if (verb.first->parsed()) return name_ + " " + verb.first->get_name();
    return name_;
  }

  // poprun under mpirun: `prefix` goes before every error message ("rank 1: "), `before`
  // runs before a failure is printed and `after` after it, with the exit code (it ends
  // every rank).
  void on_failure(std::function<std::string()> prefix, std::function<void(int)> after,
                  std::function<void()> before) {
    error_prefix_ = std::move(prefix);
    after_failure_ = std::move(after);
    before_failure_ = std::move(before);
  }

  // Adds a verb; `run` is called after parsing when the verb was given and returns the
  // exit code.
  // Every verb takes -q/--quiet: nothing on stdout and no progress; warnings and errors
  // still go to stderr, and the exit code tells the outcome.
  CLI::App* add(const std::string& verb, const std::string& description, std::function<int()> run) {
    CLI::App* sub = app_.add_subcommand(verb, description);
    sub->add_flag("-q,--quiet", quiet_,
                  "print nothing but warnings and errors (on stderr); the exit code tells the "
                  "outcome");
    verbs_.emplace_back(sub, std::move(run));
    return sub;
  }

  [[nodiscard]] bool quiet() const { return quiet_; }
  // The command line after the tool's name, as main() received it.
  [[nodiscard]] const std::vector<std::string>& arguments() const { return arguments_; }

  int main(int argc, char** argv) {
    arguments_.assign(argv + std::min(argc, 1), argv + argc);
    try {
      app_.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
      return app_.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
      return app_.exit(e);
    } catch (const CLI::CallForVersion& e) {
      return app_.exit(e);
    } catch (const CLI::ExtrasError& e) {
      // The app that was left with arguments: a verb's, or the tool's (an unknown verb).
      const CLI::App* at = &app_;
      for (const auto& verb : verbs_)
        if (verb.first->parsed() && verb.first->remaining_size() > 0) at = verb.first;
      std::cerr << unknown_arguments_message(*at, at->remaining());
      return kExitInvalid;
    } catch (const CLI::ParseError& e) {
      // CLI11's message, prefixed like every error with the tool (and the verb).
      std::cerr << where() << ": error: " << e.what() << "\nRun '" << where()
                << " --help' for more information.\n";
      return kExitInvalid;
    }
    NullBuffer discard;
    std::streambuf* const stdout_buffer = std::cout.rdbuf();
    if (quiet_) std::cout.rdbuf(&discard);
    struct Restore {
      std::streambuf* buffer;
      ~Restore() { std::cout.rdbuf(buffer); }
    } restore{stdout_buffer};
    for (auto& [sub, run] : verbs_) {
      if (!sub->parsed()) continue;
      try {
        return run();
      } catch (const AgreedError& e) {  // every rank knows; one prints
        if (e.print()) std::cerr << where() << ": error: " << e.what() << '\n';
        return e.exit_code();
      } catch (const std::bad_alloc&) {
        if (before_failure_) before_failure_();
        // The last resort: poprun estimates the host memory a run needs and refuses
        // it up front (planner/host_memory.h), so this is an estimate that fell short.
        std::cerr << where() << ": error: " << prefix()
                  << "out of host memory: an allocation failed (std::bad_alloc); "
                     "make the run smaller (datasets, model, replication.factor) or use a "
                     "machine with more memory\n";
        return failed(kExitFailure);
      } catch (const std::exception& e) {  // popkit::Error among them
        if (before_failure_) before_failure_();
        std::cerr << where() << ": error: " << prefix() << e.what() << '\n';
        return failed(kExitFailure);
      }
    }
    std::cout << app_.help();
    return verbs_.empty() ? kExitOk : kExitInvalid;
  }

 private:
  std::string prefix() const { return error_prefix_ ? error_prefix_() : std::string(); }
  int failed(int code) {
    std::cerr.flush();
    if (after_failure_) after_failure_(code);
    return code;
  }

  std::function<std::string()> error_prefix_;
  std::function<void(int)> after_failure_;
  std::function<void()> before_failure_;
  std::string name_;
  CLI::App app_;
  std::vector<std::pair<CLI::App*, std::function<int()>>> verbs_;
  bool quiet_ = false;
  std::vector<std::string> arguments_;
};

}  // namespace popkit::cli
