// Plan files: the JSON form of a Plan (schemas/plan.schema.json). The planner owns
// this format; reports read plan files through these functions only.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "planner/plan.h"

namespace popkit::planner {

nlohmann::json plan_to_json(const Plan& plan);

// The optimizer's settings as plan files (and the run file's resolved config) write them.
nlohmann::json optimizer_json(const config::Optimizer& optimizer);

// Throws popkit::Error naming `filename` and the missing or ill-typed field, or a
// version newer than this build reads.
Plan plan_from_json(const nlohmann::json& json, const std::string& filename);

}  // namespace popkit::planner
