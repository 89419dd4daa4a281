// Device profile files: reading one (YAML, or JSON, which YAML reads too) into a
// DeviceProfile with every problem as a file:line:column diagnostic, and finding the
// built-in ones by name. Built-in profiles are the files `<name>.yaml` of, in order:
//   1. the directories of $POPKIT_PROFILE_PATH (colon-separated), when set;
//   2. <the executable's directory>/../share/popkit/profiles (an installed popkit);
//   3. the source tree's share/profiles (a build directory; compiled in).
// The first directory that holds the name wins, so an installed tool uses its own files
// even where the sources are still around.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/device_profile.h"
#include "config/diagnostics.h"

namespace popkit::config {

struct ProfileLoad {
  std::optional<DeviceProfile> profile;  // set when there are no errors
  std::vector<Diagnostic> diagnostics;
  SourceMap sources;
  [[nodiscard]] bool ok() const { return profile.has_value(); }
};

// Reads a profile. `name` is the profile's name when the file does not give one.
ProfileLoad load_profile_string(std::string_view text, const std::string& filename,
                                const std::string& name);
ProfileLoad load_profile_file(const std::string& path);

// The directories searched for built-in profiles, in order (existing or not).
std::vector<std::string> profile_dirs();

// The names of the profiles found in profile_dirs(), sorted.
std::vector<std::string> builtin_profile_names();

// True when `spec` (device.profile) is a file path: it holds a '/' or ends in .yaml,
// .yml or .json. Otherwise it is a built-in profile's name.
bool is_profile_path(std::string_view spec);

// Loads what `spec` names: a built-in profile, or a file whose relative path is taken
// from `base_dir` (the config file's directory; "" = the working directory). An unknown
// name is an error at `where` with "did you mean" and the names known; so is a path
// whose name does not end in .yaml, .yml or .json, which is not read (its lines would
// show in the errors).
ProfileLoad resolve_profile(const std::string& spec, const std::string& base_dir,
                            const Location& where);

// The profile as a profile file: `header` (lines, each written as a `# ` comment), then
// every key in the table's order, each parameter with what it is in a comment; numbers
// with 6 significant digits. What `popplan calibrate --write` writes; reading it back
// gives the profile (to those digits).
std::string profile_to_yaml(const DeviceProfile& profile, const std::vector<std::string>& header);

}  // namespace popkit::config
