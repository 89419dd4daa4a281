// `poprun generate`: sampling text from a checkpoint. See generate.h.
#include "runner/generate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <vector>

#include "base/error.h"
#include "base/output_file.h"
#include "config/yaml/load.h"
#include "runner/agreement.h"
#include "runner/checkpoint.h"
#include "runner/config_match.h"
#include "runner/outputs.h"
#include "runner/run_dir.h"
#include "runner/run_setup.h"

namespace popkit::runner {
namespace {

namespace fs = std::filesystem;

constexpr int kExitOk = 0;
constexpr int kExitInvalid = 2;

[[noreturn]] void refuse(const std::string& message) {
  throw AgreedError(message, true, kExitInvalid);
}

// The checkpoint file and its config: a run folder's config.yaml and newest checkpoint,
// or a checkpoint file and the config.yaml beside it.
struct Source {
  std::string checkpoint, config;
};

Source source_of(const std::string& given) {
  std::error_code ec;
  if (given.empty()) refuse("no checkpoint: give a checkpoint file or a run folder");
  if (!fs::exists(given, ec)) refuse(fmt::format("{}: no such checkpoint or run folder", given));
  Source s;
  if (fs::is_directory(given, ec)) {
    const auto newest = newest_checkpoint(given);
    if (!newest)
      refuse(fmt::format(
          "{}: holds no checkpoint (checkpoint-step<N>.safetensors): give a run folder of "
          "poprun train, or a checkpoint in one",
          given));
    s.checkpoint = newest->string();
    s.config = (fs::path(given) / kConfigFileName).string();
  } else {
    s.checkpoint = given;
    s.config = (fs::path(given).parent_path() / kConfigFileName).string();
  }
  if (!fs::exists(s.config, ec))
    refuse(fmt::format(
        "{}: no {} beside it, to give the model it is a checkpoint of (poprun train writes "
        "one in each run folder)",
        s.checkpoint, kConfigFileName));
  return s;
}

// The evaluation plan of one window at a time: one sample a micro-batch is all that
// generation feeds, so the plan's other rows would be computed for nothing.
config::Config generation_config(config::Config config) {
  config.eval.micro_batch_size = 1;
  return config;
}

// A uniform draw in [0, 1) from the generator's top 53 bits: the same on every
// standard library, unlike std::uniform_real_distribution.
double uniform(std::mt19937_64& generator) {
  return static_cast<double>(generator() >> 11) * 0x1.0p-53;
}

}  // namespace

engine::Dataset generation_window(std::span<const std::uint8_t> context, std::int64_t positions) {
  const auto n = std::min<std::int64_t>(static_cast<std::int64_t>(context.size()), positions);
  engine::Dataset d;
  d.name = "prompt";
  d.n = 1;
  d.rows = positions;
  d.cols = 1;
  d.label_width = positions;
  d.images.assign(static_cast<std::size_t>(positions), 0);
  d.labels.assign(static_cast<std::size_t>(positions), 0);
  std::copy(context.end() - n, context.end(), d.images.begin());
  return d;
}

std::uint8_t sample_byte(std::span<const float> logits, double temperature, double u) {
  if (logits.empty()) throw Error("generate: no logits to sample from");
  const auto largest = std::max_element(logits.begin(), logits.end());
  if (temperature == 0.0) return static_cast<std::uint8_t>(largest - logits.begin());
  // softmax(logits / T) in double, shifted by the largest logit so that exp cannot
  // overflow; the byte is the first whose cumulative probability passes u.
  std::vector<double> weights(logits.size());
  double total = 0.0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    weights[i] = std::exp((static_cast<double>(logits[i]) - *largest) / temperature);
    total += weights[i];
  }
  double cumulative = 0.0;
  const double target = u * total;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    cumulative += weights[i];
    if (target < cumulative) return static_cast<std::uint8_t>(i);
  }
  return static_cast<std::uint8_t>(largest - logits.begin());  // rounding at u near 1
}

std::string generate_bytes(engine::Engine& engine, std::string_view prompt, std::int64_t tokens,
                           const Sampling& sampling) {
  const planner::Plan& plan = engine.plan();
  const std::int64_t positions = plan.positions;
  const std::int64_t classes = plan.n_classes;
  std::vector<std::uint8_t> text(prompt.begin(), prompt.end());
  std::mt19937_64 generator(sampling.seed);
  std::string out;
  for (std::int64_t k = 0; k < tokens; ++k) {
    const engine::Dataset window = generation_window(text, positions);
    const std::vector<float> logits = engine.evaluation_logits(window);
    const std::int64_t last =
        std::min<std::int64_t>(static_cast<std::int64_t>(text.size()), positions) - 1;
    const std::span<const float> row(logits.data() + last * classes,
                                     static_cast<std::size_t>(classes));
    const double u = sampling.temperature == 0.0 ? 0.0 : uniform(generator);
    const std::uint8_t next = sample_byte(row, sampling.temperature, u);
    text.push_back(next);
    out.push_back(static_cast<char>(next));
  }
  return out;
}

std::string escape_bytes(std::string_view bytes) {
  std::string out;
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n' || c == '\t' || (b >= 0x20 && b < 0x7f))
      out.push_back(c);
    else
      out += fmt::format("\\x{:02x}", b);
  }
  return out;
}

namespace {

std::string generate_from(const GenerateCommand& command, const Source& source,
                          const config::Config& config) {
  if (config.data.dataset != config::Dataset::kText)
    refuse(
        fmt::format("{}: a checkpoint of a model that does not read text ({} is not a text config: "
                    "data.dataset must be text)",
                    source.checkpoint, source.config));
  if (command.prompt.empty()) refuse("--prompt: empty; give at least one byte of text to continue");
  std::error_code ec;
  if (fs::is_directory(command.output, ec))
    refuse(fmt::format("-o/--output: {} is a folder; give a file to write the text to",
                       command.output));
  if (!command.output.empty()) check_run_file_path(command.output);
  planner::Plan planned = plan_of(generation_config(config), planner::Program::kEval);
  const LoadedCheckpoint ckpt = read_checkpoint(source.checkpoint, planned, Restore::kWeights);
  check_eval_config(ckpt, source.checkpoint, config);
  engine::Engine engine(std::move(planned), engine_options(config, command.n_threads));
  engine.initialize();
  restore_checkpoint(engine, ckpt, source.checkpoint, Restore::kWeights);
  return generate_bytes(engine, command.prompt, command.tokens, command.sampling);
}

}  // namespace

int run_generate_command(const GenerateCommand& command, std::ostream& out, std::ostream& err) {
  if (engine::process_world().size() > 1)
    refuse("generate runs in one process; it is not a command for mpirun");
  const Source source = source_of(command.checkpoint);
  const auto config = config::load_config_reporting(source.config, {}, err);
  if (!config) return kExitInvalid;
  SetupAgreement agreement(engine::process_world());
  std::string continuation;
  try {
    continuation = generate_from(command, source, *config);
  } catch (const AgreedError&) {
    throw;
  } catch (...) {
    agreement.fail();
  }
  if (!command.output.empty()) {
    AtomicFile file(command.output, TemporaryName::kSuffix);
    file.write(command.prompt.data(), command.prompt.size());
    file.write(continuation.data(), continuation.size());
    file.commit();
  }
  out << escape_bytes(command.prompt) << escape_bytes(continuation) << '\n';
  return kExitOk;
}

}  // namespace popkit::runner
