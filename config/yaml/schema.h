// The config's JSON Schema (schemas/config.schema.json), compiled into the library at
// build time so `popplan schema` prints it wherever the tool is installed.
#pragma once

#include <string_view>

namespace popkit::config {

std::string_view config_schema_json();

}  // namespace popkit::config
