// What a training run and an evaluation check and build before their engines exist: the
// plans (which must fit), the engine options, the datasets against the model, and the host
// memory the run needs against what the machine has. A failure here is the user's input
// (or the machine's size), reported before anything large is allocated.
#pragma once

#include "config/config.h"
#include "engine/engine.h"
#include "engine/runtime/world.h"
#include "planner/plan.h"

namespace popkit::runner {

// The plan of `program` (kEval: the evaluation plan; kTrain may be given that plan as
// `eval`, whose memory it reserves); throws popkit::Error when it does not fit, and an
// AgreedError (exit 2) when its device profile prices it at no finite time.
planner::Plan plan_of(const config::Config& config,
                      planner::Program program = planner::Program::kTrain,
                      const planner::Plan* eval = nullptr);

engine::EngineOptions engine_options(const config::Config& config, int n_threads,
                                     engine::IoOverlap io_overlap = engine::IoOverlap::kAuto);

// The dataset must fit the model: image shape and classes. Images are rows x cols; an
// input_shape of more dims folds its trailing ones into cols (as the synthetic set is
// made), so [28, 28] takes 28x28 images only, not 1x784 ones with as many pixels.
void check_dataset(const engine::Dataset& data, const planner::Plan& plan);

// Evaluation needs a sample to average over: an empty test set would report 0/0.
void check_test_set(const engine::Dataset& test);

// The ranks of this process's world can host the plan: each the same share of the
// replicas (the rank count divides replication.factor), and a pipelined plan in one
// process (its stage workers are threads of it, as the engine requires). Otherwise
// InputRefused (exit 2) on every rank, before any folder is made.
void check_ranks_host(const planner::Plan& plan, const engine::World& world);

// Refuses, before anything large is allocated, a run this machine cannot hold: the
// datasets' sizes come from the config or the IDX headers, the rest from the plans
// (training: `plan` and the evaluation plan `eval`; evaluation: `plan` alone). Over MPI
// ranks, what all the world's ranks on this host need together: each its share of the
// replicas, rank 0 its run file besides (planner::RanksMemory). Throws InputRefused
// (exit 2), naming the estimate (a rank's, and the host's), its parts and what the
// machine has.
void check_host_memory(const planner::Plan& plan, const planner::Plan* eval,
                       const config::Config& config, const engine::World& world);

}  // namespace popkit::runner
