// The names of the config's enums, as the YAML file, the JSON Schema, plan files, run
// files and every printout spell them: one table per enum, read through base/names.h
// (enum_name, parse_enum, enum_names). The loader's choices, validation's messages, the
// resolved config and the planner's files all use these.
#pragma once

#include "base/names.h"
#include "config/config.h"

namespace popkit::config {

NameTable<Activation> name_table(Activation);
NameTable<Loss> name_table(Loss);
NameTable<RetrievalMode> name_table(RetrievalMode);
NameTable<ExecutionMode> name_table(ExecutionMode);
NameTable<IoMode> name_table(IoMode);
NameTable<IoSchedule> name_table(IoSchedule);
NameTable<Pass> name_table(Pass);
NameTable<SyncPattern> name_table(SyncPattern);
NameTable<DType> name_table(DType);
NameTable<Dataset> name_table(Dataset);

// model.init.biases: `zeros` (Init::biases_zero) or `normal` (the weights' distribution).
NameTable<bool> bias_init_names();

}  // namespace popkit::config
