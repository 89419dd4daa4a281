// Evaluation: an evaluation plan (planner::Program::kEval) run over a data set, each
// replica its share with its group's weights (EvalBatches), and the logits it streams out
// scored on the host: loss and accuracy over all samples, summed in replica and step
// order so that they depend neither on the threads nor on the ranks.
#pragma once

#include <vector>

#include "engine/data/dataset.h"
#include "engine/exec/program.h"
#include "engine/exec/state.h"

namespace popkit::engine {

EvalResult evaluate(EngineState& state, Program& program, const Dataset& data);

// The logits the evaluation plan streams out for `data`, sample after sample, each
// plan.positions rows of plan.n_classes (poprun generate samples from them). Rows of
// samples hosted by another rank stay 0.
std::vector<float> evaluation_logits(EngineState& state, Program& program, const Dataset& data);

}  // namespace popkit::engine
