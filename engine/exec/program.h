// Running the plan's program: its setup once, then steps, each the plan's phases in
// order over the batch a BatchSource serves (or, with a pipelined plan, its stages at
// once), recording the step's time per phase and category and each phase's memory
// samples. It owns the parts that run ops: the op runner, the IO thread, the segments
// and the pipelined stages.
#pragma once

#include <memory>

#include "engine/data/batch_source.h"
#include "engine/exec/io_thread.h"
#include "engine/exec/op_runner.h"
#include "engine/exec/pipeline_run.h"
#include "engine/exec/segments.h"
#include "engine/exec/state.h"

namespace popkit::engine {

class Program {
 public:
  explicit Program(EngineState& state);

  // The plan's setup ops: the always-live tensors allocated (each on its stage's device
  // of every replica when pipelined).
  void setup();
  // One execution of the plan's phases over the batch `source` serves.
  void run_step(const BatchSource& source);

 private:
  EngineState& m_;
  OpRunner ops_;
  IoThread io_;
  Segments segments_;
  std::unique_ptr<StagePipeline> stages_;  // a pipelined plan's
};

}  // namespace popkit::engine
