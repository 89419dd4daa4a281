// Plan files: the JSON form of a Plan (schemas/plan.schema.json). The planner owns
// this format; reports read plan files through these functions only.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "config/attributes.h"
#include "config/names.h"
#include "planner/json_text.h"
#include "planner/plan.h"

namespace popkit::planner {

// The plan file's text, written as it is produced (planner/json_writer.h: no DOM of the
// whole plan). The caller checks `out`.
void write_plan_json(std::ostream& out, const Plan& plan);

// The plan file's text as a DOM (parsed back: for tests and small plans).
nlohmann::json plan_to_json(const Plan& plan);

// The optimizer's settings as plan files (and the run file's resolved config) write them:
// its type, the common keys and its kind's keys (config/optimizer_kinds.h).
nlohmann::json optimizer_json(const config::Optimizer& optimizer);

// A kind's key's value (config/attributes.h) as files write it: a number, a boolean, or a
// choice by its name.
nlohmann::json attribute_json(const config::AttributeValue& value);

// A kind's attributes as members of `into`, key by key.
void put_attributes(nlohmann::json& into, const config::Attributes& attributes);

// Reads a plan file's big arrays (layers, variables, tensors, buffers, setup and each
// phase's ops) element by element while the text is parsed, so that memory holds the
// text and the Plan but never the DOM of those arrays (json_text.h).
class PlanSplit final : public JsonSplit {
 public:
  explicit PlanSplit(std::string filename);
  ~PlanSplit() override;
  PlanSplit(const PlanSplit&) = delete;
  PlanSplit& operator=(const PlanSplit&) = delete;

  std::optional<std::uint64_t> begin_array(const JsonPath& path) override;
  void element(std::uint64_t array, std::size_t index, nlohmann::json&& value) override;

  struct Arrays;  // the arrays read so far, by element type
  Arrays& arrays() { return *arrays_; }

 private:
  std::string filename_;
  std::unique_ptr<Arrays> arrays_;
};

// Throws popkit::Error naming `filename` and the missing or ill-typed field, or a
// version newer than this build reads. `split`: the one `json` was parsed with, if any
// (it hands its arrays over once: one plan_from_json per parse).
Plan plan_from_json(const nlohmann::json& json, const std::string& filename,
                    PlanSplit* split = nullptr);

// A plan file's text (parse_json with a PlanSplit, then plan_from_json). Throws
// popkit::Error: "FILE:LINE:COLUMN: ..." for text that is not JSON, else as above.
Plan plan_from_text(std::string_view text, const std::string& filename);

}  // namespace popkit::planner
