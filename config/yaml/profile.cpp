// Reading device profile files, and the search for built-in ones (profile.h).
#include "config/yaml/profile.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "base/error.h"
#include "base/input_file.h"
#include "base/suggest.h"
#include "base/units.h"
#include "config/yaml/yaml_tree.h"

namespace popkit::config {
namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kMaxProfileBytes = 1 << 20;
constexpr std::array<std::string_view, 5> kOtherKeys{"name", "description", "tiles", "memory",
                                                     "fitted"};

// Every key path a profile file may hold: the parameters, the other top-level keys, and
// the sections between ("compute", "compute.gemm", "links", ...).
struct KeySet {
  std::set<std::string> leaves, sections;
  KeySet() {
    for (const auto k : kOtherKeys) leaves.emplace(k);
    for (const auto& p : profile_parameters()) {
      leaves.emplace(p.key);
      for (std::size_t dot = p.key.find('.'); dot != std::string_view::npos;
           dot = p.key.find('.', dot + 1))
        sections.emplace(p.key.substr(0, dot));
    }
  }
  // The keys directly under `section` ("" = the top level), for "did you mean".
  std::vector<std::string> children(const std::string& section) const {
    std::vector<std::string> out;
    const std::string prefix = section.empty() ? "" : section + ".";
    auto add = [&](const std::string& k) {
      if (k.rfind(prefix, 0) != 0) return;
      const std::string rest = k.substr(prefix.size());
      if (rest.find('.') == std::string::npos) out.push_back(rest);
    };
    for (const auto& k : leaves) add(k);
    for (const auto& k : sections) add(k);
    return out;
  }
};

class Reader {
 public:
  Reader(const std::string& filename, std::vector<Diagnostic>& out) : file_(filename), out_(out) {}

  DeviceProfile read(const YamlNode& root, const std::string& default_name) {
    DeviceProfile p;
    p.name = default_name;
    if (root.kind != NodeKind::kMap) {
      error(root.location, fmt::format("a device profile is a mapping (name, tiles, memory, "
                                       "compute, links, overheads), got {}",
                                       describe(root)));
      return p;
    }
    walk(root, "");
    for (const auto& [key, node] : values_) assign(p, key, *node);
    const Location top{file_, 1, 1};
    auto need = [&](std::string_view key) {
      if (values_.count(std::string(key)) == 0)
        error(top, fmt::format("{}: required key is missing", key));
    };
    need("tiles");
    need("memory");
    for (const auto& param : profile_parameters())
      if (param.required) need(param.key);
    for (std::size_t i = 0; i < p.fitted.size(); ++i)
      if (find_profile_parameter(p.fitted[i].key) == nullptr) {
        std::vector<std::string> keys;
        for (const auto& param : profile_parameters()) keys.emplace_back(param.key);
        error(fitted_at_[i], fmt::format("fitted: '{}' is not a parameter of a profile{}",
                                         p.fitted[i].key, did_you_mean(p.fitted[i].key, keys)));
      }
    return p;
  }

 private:
  void error(const Location& at, std::string message) {
    out_.push_back({Severity::kError, at.file, at.line, at.column, std::move(message)});
  }

  // Collects the leaves of the tree by dotted key path; unknown and duplicate keys are
  // errors at the key.
  void walk(const YamlNode& map, const std::string& section) {
    for (const auto& [k, v] : map.pairs) {
      if (k->kind != NodeKind::kScalar) {
        error(k->location, fmt::format("keys must be names, got {}", describe(*k)));
        continue;
      }
      const std::string path = section.empty() ? k->value : section + "." + k->value;
      if (keys_.sections.count(path) != 0) {
        if (v->kind != NodeKind::kMap) {
          error(v->location, fmt::format("{}: expected a mapping, got {}", path, describe(*v)));
          continue;
        }
        walk(*v, path);
        continue;
      }
      if (keys_.leaves.count(path) == 0) {
        const auto known = keys_.children(section);
        const std::string hint = did_you_mean(k->value, known);
        error(k->location,
              fmt::format(
                  "{}unknown key '{}'{}", section.empty() ? "" : section + ": ", k->value,
                  hint.empty() ? fmt::format(" (known keys: {})", fmt::join(known, ", ")) : hint));
        continue;
      }
      if (const auto first = values_.find(path); first != values_.end()) {
        error(k->location, fmt::format("{}: duplicate key; it is already set at line {}", path,
                                       first->second->location.line));
        continue;
      }
      values_.emplace(path, v.get());
    }
  }

  static bool number(const YamlNode& v, double& x) {
    const auto [end, ec] = std::from_chars(v.value.data(), v.value.data() + v.value.size(), x);
    return v.kind == NodeKind::kScalar && v.plain && !v.value.empty() && ec == std::errc() &&
           end == v.value.data() + v.value.size() && std::isfinite(x);
  }

  void assign(DeviceProfile& p, const std::string& key, const YamlNode& v) {
    if (key == "name" || key == "description") {
      if (v.kind != NodeKind::kScalar) {
        error(v.location, fmt::format("{}: expected a string, got {}", key, describe(v)));
        return;
      }
      (key == "name" ? p.name : p.description) = v.value;
      return;
    }
    if (key == "tiles") {
      std::int64_t n = 0;
      const auto [end, ec] = std::from_chars(v.value.data(), v.value.data() + v.value.size(), n);
      if (v.kind != NodeKind::kScalar || !v.plain || ec != std::errc() ||
          end != v.value.data() + v.value.size() || n < 1) {
        error(v.location, fmt::format("tiles: expected an integer >= 1, got {}", describe(v)));
        return;
      }
      p.tiles = n;
      return;
    }
    if (key == "memory") {
      std::string why;
      const auto bytes = v.kind == NodeKind::kScalar ? parse_bytes(v.value, why) : std::nullopt;
      if (!bytes || *bytes == 0) {
        error(v.location, fmt::format("memory: expected a size in bytes > 0, e.g. 900MiB, got {}{}",
                                      describe(v), why.empty() ? "" : " (" + why + ")"));
        return;
      }
      p.memory_bytes = *bytes;
      return;
    }
    if (key == "fitted") {
      if (v.kind != NodeKind::kMap) {
        error(v.location, fmt::format("fitted: expected a mapping of parameter keys to their "
                                      "priors, got {}",
                                      describe(v)));
        return;
      }
      for (const auto& [k, item] : v.pairs) {
        double prior = 0.0;
        if (k->kind != NodeKind::kScalar || !number(*item, prior) || !(prior > 0)) {
          error(item->location, fmt::format("fitted: expected a parameter key and its prior "
                                            "(a number > 0), got {}",
                                            describe(*item)));
          continue;
        }
        p.fitted.push_back({k->value, prior});
        fitted_at_.push_back(k->location);
      }
      return;
    }
    const ProfileParameter* param = find_profile_parameter(key);
    POPKIT_ASSERT(param != nullptr);
    double x = 0.0;
    if (!number(v, x)) {
      error(v.location, fmt::format("{}: expected a number, got {}", key, describe(v)));
      return;
    }
    if (key.ends_with("shared_by") && (x < 1 || x != std::floor(x))) {
      error(v.location, fmt::format("{}: must be a whole number >= 1, got {}", key, v.value));
      return;
    }
    if (key.ends_with("host_threads") && x != std::floor(x)) {
      error(v.location, fmt::format("{}: must be a whole number >= 0, got {}", key, v.value));
      return;
    }
    const bool efficiency = key.ends_with("efficiency");
    if ((param->positive && x <= 0) || (!param->positive && x < 0) || (efficiency && x > 1)) {
      error(v.location,
            fmt::format("{}: must be {}{}, got {}", key, param->positive ? "> 0" : ">= 0",
                        efficiency ? " and at most 1" : "", v.value));
      return;
    }
    param->of(p) = x;
  }

  std::string file_;
  std::vector<Diagnostic>& out_;
  KeySet keys_;
  std::map<std::string, const YamlNode*> values_;
  std::vector<Location> fitted_at_;
};

std::string executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

}  // namespace

std::string profile_to_yaml(const DeviceProfile& p, const std::vector<std::string>& header) {
  std::string out;
  for (const auto& line : header) out += line.empty() ? "#\n" : "# " + line + "\n";
  out += fmt::format("name: {}\n", p.name);
  if (!p.description.empty()) out += fmt::format("description: {}\n", p.description);
  out += fmt::format("tiles: {}\n", p.tiles);
  out += fmt::format("memory: {}\n", p.memory_bytes % (1 << 20) == 0
                                         ? fmt::format("{}MiB", p.memory_bytes >> 20)
                                         : fmt::format("{}", p.memory_bytes));
  // Sections open as the keys' prefixes change: compute, compute.gemm, links, ...
  std::vector<std::string> open;
  for (const auto& param : profile_parameters()) {
    // A CPU's keys: a device's profile stays as it was written before CPUs had them.
    const bool cpu_key = param.member == &DeviceProfile::host_threads ||
                         param.member == &DeviceProfile::barrier_seconds ||
                         param.member == &DeviceProfile::pool_run_seconds ||
                         param.member == &DeviceProfile::accumulate_seconds ||
                         param.member == &DeviceProfile::gemm_small_rows ||
                         param.member == &DeviceProfile::gemm_small_rows_efficiency ||
                         param.member == &DeviceProfile::gemm_spread_efficiency ||
                         param.key.starts_with("caches.");
    if (cpu_key && !p.is_cpu()) continue;
    auto parts = std::vector<std::string>{};
    for (std::size_t at = 0;;) {
      const std::size_t dot = param.key.find('.', at);
      parts.emplace_back(param.key.substr(at, dot - at));
      if (dot == std::string_view::npos) break;
      at = dot + 1;
    }
    std::size_t same = 0;
    while (same < open.size() && same + 1 < parts.size() && open[same] == parts[same]) ++same;
    open.resize(same);
    for (std::size_t i = same; i + 1 < parts.size(); ++i) {
      out += fmt::format("{:{}}{}:\n", "", 2 * i, parts[i]);
      open.push_back(parts[i]);
    }
    const bool fitted = std::any_of(p.fitted.begin(), p.fitted.end(),
                                    [&](const auto& f) { return f.key == param.key; });
    out += fmt::format("{:{}}{}: {:.6g}  # {}{}\n", "", 2 * (parts.size() - 1), parts.back(),
                       param.of(p), param.what, fitted ? " (fitted)" : "");
  }
  if (!p.fitted.empty()) {
    out += "fitted:  # parameter: the prior the fit starts from and pulls towards\n";
    for (const auto& f : p.fitted) out += fmt::format("  {}: {:.6g}\n", f.key, f.prior);
  }
  return out;
}

ProfileLoad load_profile_string(std::string_view text, const std::string& filename,
                                const std::string& name) {
  ProfileLoad result;
  result.sources[filename] = std::string(text);
  const YamlNodePtr root = parse_yaml(text, filename, result.diagnostics);
  if (!root) return result;
  DeviceProfile p = Reader(filename, result.diagnostics).read(*root, name);
  p.source = filename;
  if (!has_errors(result.diagnostics)) result.profile = std::move(p);
  return result;
}

ProfileLoad load_profile_file(const std::string& path) {
  std::string text;
  try {
    InputFile file = open_input_file(path, "give the path of a device profile (YAML)");
    text = file.read_all(kMaxProfileBytes, "device profile");
  } catch (const Error& e) {
    ProfileLoad result;
    const std::string what = e.what();
    result.diagnostics.push_back(
        {Severity::kError, path, 0, 0,
         what.substr(what.rfind(path + ": ", 0) == 0 ? path.size() + 2 : 0)});
    return result;
  }
  return load_profile_string(text, path, fs::path(path).stem().string());
}

std::vector<std::string> profile_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("POPKIT_PROFILE_PATH"); env != nullptr) {
    const std::string_view all(env);
    std::size_t at = 0;
    while (at <= all.size()) {
      std::size_t end = all.find(':', at);
      if (end == std::string_view::npos) end = all.size();
      if (end > at) dirs.emplace_back(all.substr(at, end - at));
      at = end + 1;
    }
  }
  if (const std::string exe = executable_dir(); !exe.empty())
    dirs.push_back((fs::path(exe) / ".." / "share" / "popkit" / "profiles").lexically_normal());
  dirs.emplace_back(POPKIT_PROFILES_SOURCE_DIR);
  return dirs;
}

std::vector<std::string> builtin_profile_names() {
  std::set<std::string> names;
  for (const auto& dir : profile_dirs()) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().extension() == ".yaml") names.insert(it->path().stem().string());
  }
  return {names.begin(), names.end()};
}

namespace {

bool has_profile_extension(std::string_view spec) {
  return spec.ends_with(".yaml") || spec.ends_with(".yml") || spec.ends_with(".json");
}

}  // namespace

bool is_profile_path(std::string_view spec) {
  return spec.find('/') != std::string_view::npos || has_profile_extension(spec);
}

ProfileLoad resolve_profile(const std::string& spec, const std::string& base_dir,
                            const Location& where) {
  if (is_profile_path(spec)) {
    // A file that is not a profile's is not read: its errors would show its lines (a
    // config could name any file the user can read, and a log would show it).
    if (!has_profile_extension(spec)) {
      ProfileLoad refused;
      refused.diagnostics.push_back(
          {Severity::kError, where.file, where.line, where.column,
           fmt::format("device.profile: '{}' is not a profile file: a profile file's name ends "
                       "in .yaml, .yml or .json (or give a built-in profile's name); it was not "
                       "read",
                       spec)});
      return refused;
    }
    const fs::path p(spec);
    return load_profile_file(p.is_absolute() || base_dir.empty()
                                 ? spec
                                 : (fs::path(base_dir) / p).lexically_normal().string());
  }
  for (const auto& dir : profile_dirs()) {
    const fs::path file = fs::path(dir) / (spec + ".yaml");
    std::error_code ec;
    if (fs::is_regular_file(file, ec)) return load_profile_file(file.string());
  }
  ProfileLoad result;
  const auto known = builtin_profile_names();
  result.diagnostics.push_back(
      {Severity::kError, where.file, where.line, where.column,
       fmt::format("device.profile: unknown device profile '{}'{} (known: {}; or give a "
                   "profile file's path)",
                   spec, did_you_mean(spec, known),
                   known.empty() ? fmt::format("none found in {}", fmt::join(profile_dirs(), ", "))
                                 : fmt::format("{}", fmt::join(known, ", ")))});
  return result;
}

}  // namespace popkit::config
