// Checkpoint metadata: written from the run's state, read back with range checks.
#include "runner/checkpoint_metadata.h"

#include <fmt/format.h>

#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "base/error.h"

namespace popkit::runner {
namespace {

class Reader {
 public:
  Reader(const std::map<std::string, std::string>& m, const std::string& name)
      : m_(m), name_(name) {}

  const std::string& text(const std::string& key) const {
    const auto it = m_.find(key);
    if (it == m_.end()) throw Error("{}: checkpoint metadata has no '{}'", name_, key);
    return it->second;
  }

  // A decimal integer in [lo, hi]; `why` (may be empty) says where the range comes from.
  std::int64_t integer(const std::string& key, std::int64_t lo, std::int64_t hi,
                       const std::string& why = "") const {
    const std::int64_t value = parse_int(key);
    if (value < lo || value > hi) out_of_range(key, value, lo, hi, why);
    return value;
  }

  std::int64_t parse_int(const std::string& key) const {
    const std::string& s = text(key);
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec == std::errc::result_out_of_range)
      throw Error("{}: checkpoint metadata '{}' is {}, beyond 64 bits", name_, key, s);
    if (ec != std::errc() || end != s.data() + s.size())
      throw Error("{}: checkpoint metadata '{}' is '{}', not an integer", name_, key, s);
    return value;
  }

  [[noreturn]] void out_of_range(const std::string& key, std::int64_t value, std::int64_t lo,
                                 std::int64_t hi, const std::string& why) const {
    throw Error("{}: checkpoint metadata '{}' is {}, out of range {} to {}{}", name_, key, value,
                lo, hi, why.empty() ? "" : " (" + why + ")");
  }

  [[noreturn]] void wrong(const std::string& key, const std::string& what) const {
    throw Error("{}: checkpoint metadata '{}' is {}", name_, key, what);
  }

 private:
  const std::map<std::string, std::string>& m_;
  const std::string& name_;
};

bool is_hex(std::string_view s) {
  for (const char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

void put_checkpoint_metadata(std::map<std::string, std::string>& m, const CheckpointMetadata& md) {
  const CheckpointState& s = md.state;
  m["format"] = kCheckpointFormat;
  m["format_version"] = std::to_string(kCheckpointVersion);
  m["config_name"] = s.config_name;
  m["config_hash"] = s.config_hash;
  if (!s.config.empty()) m["config"] = s.config;
  m["step"] = std::to_string(s.step);
  m["epoch"] = std::to_string(s.data.epoch);
  m["data_position"] = std::to_string(s.data.position);
  m["shuffle"] = s.shuffle ? "true" : "false";
  m["shuffle_seed"] = std::to_string(s.shuffle_seed);
  m["shuffle_rng"] = kShuffleRng;
  m["global_batch_size"] = std::to_string(s.global_batch_size);
  m["n_train"] = std::to_string(s.n_train);
  m["replication_factor"] = std::to_string(md.copies.replication_factor);
  m["n_groups"] = std::to_string(md.copies.n_groups);
  m["copies"] = md.copies.kind;
  m["n_copies"] = std::to_string(md.copies.n_copies);
}

void check_format_version(const std::map<std::string, std::string>& metadata,
                          const std::string& name) {
  const Reader r(metadata, name);
  if (const std::int64_t version = r.parse_int("format_version"); version > kCheckpointVersion)
    throw Error("{}: checkpoint format version {} is newer than this build reads ({})", name,
                version, kCheckpointVersion);
  r.integer("format_version", 1, kCheckpointVersion);
}

CheckpointMetadata parse_checkpoint_metadata(const std::map<std::string, std::string>& metadata,
                                             const std::string& name) {
  check_format_version(metadata, name);
  const Reader r(metadata, name);

  CheckpointMetadata out;
  CheckpointState& s = out.state;
  // Where training stands. The trainer keeps every position canonical (data_order.h:
  // advance, and resume under another batch size), so a checkpoint holds
  //   global_batch_size <= n_train,  0 <= data_position <= n_train - global_batch_size,
  // and each epoch begun (epoch 1, 2, ...) and a position inside an epoch took a step:
  //   step >= epoch + (data_position > 0).
  s.step = r.integer("step", 0, kMaxMetadataCount);
  s.n_train = r.integer("n_train", 1, kMaxMetadataCount);
  s.global_batch_size =
      r.integer("global_batch_size", 1, s.n_train, "n_train: a global batch fits in an epoch");
  s.data.position =
      s.step == 0 ? r.integer("data_position", 0, 0, "step 0: no sample consumed yet")
                  : r.integer("data_position", 0, s.n_train - s.global_batch_size,
                              fmt::format("n_train {} - global_batch_size {}: a position leaves "
                                          "room for a global batch",
                                          s.n_train, s.global_batch_size));
  s.data.epoch =
      r.integer("epoch", 0, s.step - (s.data.position > 0 ? 1 : 0),
                fmt::format("step {} at data_position {}: each epoch begun, and a position "
                            "inside one, is reached by a step",
                            s.step, s.data.position));

  // The data order: a shuffle (or none) this build reproduces.
  const std::string& shuffle = r.text("shuffle");
  if (shuffle != "true" && shuffle != "false")
    r.wrong("shuffle", fmt::format("'{}', not true or false", shuffle));
  s.shuffle = shuffle == "true";
  const std::string& seed = r.text("shuffle_seed");
  const auto [end, ec] = std::from_chars(seed.data(), seed.data() + seed.size(), s.shuffle_seed);
  if (ec != std::errc() || end != seed.data() + seed.size())
    r.wrong("shuffle_seed", fmt::format("'{}', not an integer from 0 to {}", seed,
                                        std::numeric_limits<std::uint64_t>::max()));
  if (const std::string& rng = r.text("shuffle_rng"); rng != kShuffleRng)
    r.wrong("shuffle_rng", fmt::format("'{}', but this build shuffles with '{}': the data order "
                                       "would differ",
                                       rng, kShuffleRng));

  // The run: its config, and the copies of each variable.
  s.config_name = r.text("config_name");
  s.config_hash = r.text("config_hash");
  if (s.config_hash.size() != 16 || !is_hex(s.config_hash))
    r.wrong("config_hash", fmt::format("'{}', not 16 hex digits", s.config_hash));
  if (const auto it = metadata.find("config"); it != metadata.end()) {
    const auto parsed = nlohmann::json::parse(it->second, nullptr, false);
    if (!parsed.is_object()) r.wrong("config", "not the JSON object of a config");
    s.config = it->second;
  }
  CheckpointCopies& c = out.copies;
  c.replication_factor = r.integer("replication_factor", 1, kMaxMetadataCount);
  c.n_groups = r.parse_int("n_groups");
  if (c.n_groups < 1 || c.replication_factor % c.n_groups != 0)
    r.wrong("n_groups", fmt::format("{}, not a divisor of replication_factor {}", c.n_groups,
                                    c.replication_factor));
  c.kind = r.text("copies");
  std::int64_t n_copies = 0;
  if (c.kind == "one")
    n_copies = 1;
  else if (c.kind == "group")
    n_copies = c.n_groups;
  else if (c.kind == "replica")
    n_copies = c.replication_factor;
  else
    r.wrong("copies", fmt::format("'{}', not one, group or replica", c.kind));
  c.n_copies = r.parse_int("n_copies");
  if (c.n_copies != n_copies)
    r.wrong("n_copies", fmt::format("{}, but copies '{}' means {}", c.n_copies, c.kind, n_copies));
  return out;
}

}  // namespace popkit::runner
