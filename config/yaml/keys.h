// Every key the loader accepts, section by section; a layer's or an optimizer's come
// from the kind tables (config/layer_kinds.h, config/optimizer_kinds.h). The loader can
// only read keys listed here (it asserts so), unknown-key suggestions come from here,
// and a unit test checks that schemas/config.schema.json has exactly these keys, so the
// three cannot drift.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace popkit::config {

struct Section {
  std::string_view path;  // "" top level; "model.layers[]" items of a list;
                          // "replication.groupings.*" values of a named map
  std::vector<std::string> keys;
};

// All sections in schema order.
const std::vector<Section>& sections();

// The keys of one section; asserts that the section exists.
const std::vector<std::string>& section_keys(std::string_view section_path);

// Every accepted key as a full path: "training.optimizer.lr", "model.layers[].name",
// "replication.groupings.*.stride", sorted.
std::vector<std::string> accepted_key_paths();

}  // namespace popkit::config
