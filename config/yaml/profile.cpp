// Reading device profile files, and the search for built-in ones (profile.h).
#include "config/yaml/profile.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
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
constexpr std::array<std::string_view, 3> kOtherKeys{"name", "description", "fitted"};

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

// A plain scalar as a number: a decimal, or YAML's .inf and .nan (signed or not), which
// the parameters' bounds then refuse by name; one too large or small for a double is NaN,
// refused the same way.
std::optional<double> number(const YamlNode& v) {
  if (v.kind != NodeKind::kScalar || !v.plain || v.value.empty()) return std::nullopt;
  std::string special = v.value;
  const bool negative = special.front() == '-';
  if (negative || special.front() == '+') special.erase(0, 1);
  std::transform(special.begin(), special.end(), special.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (special == ".inf") return negative ? -HUGE_VAL : HUGE_VAL;
  if (special == ".nan") return std::nan("");
  double x = 0.0;
  const char* end = v.value.data() + v.value.size();
  const auto [at, ec] = std::from_chars(v.value.data(), end, x);
  if (at != end || (ec != std::errc() && ec != std::errc::result_out_of_range)) return std::nullopt;
  return ec == std::errc() ? x : std::nan("");
}

class Reader {
 public:
  Reader(const std::string& filename, std::vector<Diagnostic>& out) : file_(filename), out_(out) {}

  DeviceProfile read(const YamlNode& root, const std::string& default_name) {
    DeviceProfile p;
    p.name = default_name;
    if (root.kind != NodeKind::kMap) {
      // Not quoted: a file that is no mapping may be no profile at all (a password file).
      out_.push_back({Severity::kError, file_, 0, 0,
                      fmt::format("a device profile is a mapping (name, tiles, memory, compute, "
                                  "links, overheads); this file's text is {}, not shown",
                                  root.kind == NodeKind::kSequence ? "a sequence"
                                  : root.kind == NodeKind::kNull   ? "empty"
                                                                   : "a scalar")});
      return p;
    }
    walk(root, "");
    for (const auto& [key, node] : values_) assign(p, key, *node);
    const Location top{file_, 1, 1};
    for (const auto& param : profile_parameters())
      if (param.required && values_.count(std::string(param.key)) == 0)
        error(top, fmt::format("{}: required key is missing", param.key));
    check_fitted(p);
    check_together(p);
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

  void assign(DeviceProfile& p, const std::string& key, const YamlNode& v) {
    if (key == "name" || key == "description") {
      if (v.kind != NodeKind::kScalar) {
        error(v.location, fmt::format("{}: expected a string, got {}", key, describe(v)));
        return;
      }
      (key == "name" ? p.name : p.description) = v.value;
      return;
    }
    if (key == "fitted") return assign_fitted(p, v);
    const ProfileParameter* param = find_profile_parameter(key);
    POPKIT_ASSERT(param != nullptr);
    std::optional<std::uint64_t> bytes;
    std::optional<double> x;
    if (param->size != nullptr) {
      std::string why;
      if (v.kind == NodeKind::kScalar) bytes = parse_bytes(v.value, why);
      if (!bytes)
        error(v.location, fmt::format("{}: expected a size in bytes, e.g. 900MiB, got {}{}", key,
                                      describe(v), why.empty() ? "" : " (" + why + ")"));
      else
        x = static_cast<double>(*bytes);
    } else if (x = number(v); !x) {
      error(v.location, fmt::format("{}: expected a number, got {}", key, describe(v)));
    }
    if (x && !param->allows(*x)) {
      error(v.location, fmt::format("{}: must be {}, got {}", key, param->range(), v.value));
      x.reset();
    }
    if (!x) {
      refused_.insert(key);
      return;
    }
    if (param->size != nullptr)
      p.*param->size = *bytes;
    else if (param->count != nullptr)
      p.*param->count = static_cast<std::int64_t>(*x);
    else
      param->set(p, *x);
  }

  void assign_fitted(DeviceProfile& p, const YamlNode& v) {
    if (v.kind != NodeKind::kMap) {
      error(v.location, fmt::format("fitted: expected a mapping of parameter keys to their "
                                    "priors, got {}",
                                    describe(v)));
      return;
    }
    for (const auto& [k, item] : v.pairs) {
      const std::optional<double> prior = number(*item);
      if (k->kind != NodeKind::kScalar || !prior || !std::isfinite(*prior) || !(*prior > 0)) {
        error(item->location, fmt::format("fitted: expected a parameter key and its prior "
                                          "(a number > 0), got {}",
                                          describe(*item)));
        continue;
      }
      p.fitted.push_back({k->value, *prior});
      fitted_at_.push_back(k->location);
    }
  }

  // Each fitted key names a parameter calibration fits (a number that need not be whole).
  void check_fitted(const DeviceProfile& p) {
    for (std::size_t i = 0; i < p.fitted.size(); ++i) {
      const std::string& key = p.fitted[i].key;
      const ProfileParameter* param = find_profile_parameter(key);
      if (param == nullptr) {
        std::vector<std::string> keys;
        for (const auto& q : profile_parameters())
          if (q.fittable()) keys.emplace_back(q.key);
        error(fitted_at_[i], fmt::format("fitted: '{}' is not a parameter of a profile{}", key,
                                         did_you_mean(key, keys)));
      } else if (!param->fittable()) {
        error(fitted_at_[i], fmt::format("fitted: '{}' is not a parameter calibration fits "
                                         "(it fits numbers that need not be whole, not tiles, "
                                         "memory or counts)",
                                         key));
      }
    }
  }

  // Whether the file gives `key` a value other than 0 (a value refused above counts, so
  // that its partners are not reported too).
  bool is_set(const DeviceProfile& p, std::string_view key) const {
    const auto given = values_.find(std::string(key));
    if (given == values_.end()) return false;
    return refused_.count(given->first) != 0 || find_profile_parameter(key)->of(p) != 0.0;
  }

  // The table's cross-field columns, for each parameter set: the kinds of profile it
  // applies to, its partners, and the parameter it may not be below.
  void check_together(const DeviceProfile& p) {
    const bool kind_known = refused_.count("compute.host_threads") == 0;
    std::set<std::string_view> reported;  // partners already named as missing
    for (const auto& param : profile_parameters()) {
      const std::string key(param.key);
      if (!is_set(p, key) || refused_.count(key) != 0) continue;
      const YamlNode& v = *values_.at(key);
      if (kind_known && !param.applies_to(p.is_cpu())) {
        error(v.location,
              param.kinds == ProfileKinds::kCpu
                  ? fmt::format("{}: only a CPU's profile (one with compute.host_threads) has "
                                "this parameter; this one is a device's",
                                key)
                  : fmt::format("{}: only a device's profile has this parameter; "
                                "compute.host_threads makes this one a CPU's",
                                key));
        continue;
      }
      std::vector<std::string> missing;
      for (const std::string_view partner : param.partners) {
        if (partner.empty() || is_set(p, partner) || !reported.insert(partner).second) continue;
        const bool zero = values_.count(std::string(partner)) != 0;
        missing.push_back(fmt::format("{}{}", partner, zero ? " (not 0)" : ""));
      }
      if (!missing.empty())
        error(v.location,
              fmt::format("{}: {} needs {} too", key, v.value, fmt::join(missing, " and ")));
      if (!param.at_least.empty() && is_set(p, param.at_least) &&
          refused_.count(std::string(param.at_least)) == 0) {
        const ProfileParameter& floor = *find_profile_parameter(param.at_least);
        if (param.of(p) < floor.of(p))
          error(v.location, fmt::format("{}: {} must be at least {} ({})", key, v.value, floor.key,
                                        values_.at(std::string(floor.key))->value));
      }
    }
  }

  std::string file_;
  std::vector<Diagnostic>& out_;
  KeySet keys_;
  std::map<std::string, const YamlNode*> values_;
  std::set<std::string> refused_;  // keys whose value was refused
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
  // Sections open as the keys' prefixes change: compute, compute.gemm, links, ...
  std::vector<std::string> open;
  for (const auto& param : profile_parameters()) {
    // A device's profile has no CPU's keys, and the other way round.
    if (!param.applies_to(p.is_cpu())) continue;
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
    const std::string indent(2 * (parts.size() - 1), ' ');
    // Tiles and memory as a hand-written file has them, without a comment.
    if (param.count != nullptr)
      out += fmt::format("{}{}: {}\n", indent, parts.back(), p.*param.count);
    else if (param.size != nullptr)
      out += fmt::format("{}{}: {}\n", indent, parts.back(),
                         p.*param.size % (1 << 20) == 0 ? fmt::format("{}MiB", p.*param.size >> 20)
                                                        : fmt::format("{}", p.*param.size));
    else
      out += fmt::format("{}{}: {:.6g}  # {}{}\n", indent, parts.back(), param.of(p), param.what,
                         fitted ? " (fitted)" : "");
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
