// Editing a config's YAML text in place, for `popplan tune --write`: `--set`-style
// settings applied to the text the user wrote, so its comments, key order and
// formatting stay (yaml-cpp's emitter would drop the comments). A setting replaces the
// value where its key is (the scalar at the node's mark, or the whole value), or inserts
// the missing keys under their parent map after the sibling that precedes them in schema
// order, indented like the map's keys (in a flow map `{a: 1}` as `, key: value`).
//
//   TextEdit e = set_in_text(text, "mnist.yaml", {"sharding.threshold=512"});
//   if (has_errors(e.diagnostics)) ...; else e.text, e.changed
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "config/diagnostics.h"

namespace popkit::config {

struct TextEdit {
  std::string text;                     // the edited text
  std::vector<std::string> changed;     // the settings that changed it, in order
  std::vector<Diagnostic> diagnostics;  // errors: a setting the text cannot take
};

// `settings` are `key.path=value` with the value in YAML flow syntax. A value equal, as
// written, to the one in the text leaves it (and the setting is not in `changed`).
TextEdit set_in_text(std::string_view text, const std::string& filename,
                     const std::vector<std::string>& settings);

// `source` with `settings` applied (set_in_text), written to `destination` through a
// temporary in its folder that is loaded again before it is renamed into place: it must
// load without errors and give exactly `expected`, read from the same device profile
// file; otherwise popkit::Error names what differs and no file is left. Overwrites
// `destination` (the caller refuses that without --force). Returns the settings that
// changed the text.
std::vector<std::string> write_config_with(const std::string& source,
                                           const std::vector<std::string>& settings,
                                           const Config& expected, const std::string& destination);

}  // namespace popkit::config
