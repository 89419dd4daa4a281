// The verbs of each tool, registered from the file that owns them, so every verb's
// arguments sit in one place and `--help` lists exactly what dispatch runs.
#pragma once

#include "cli/tool.h"

namespace popkit::cli {

void add_config_verbs(Tool& tool);     // popplan validate, schema   (cli/popplan_config.cpp)
void add_plan_verbs(Tool& tool);       // popplan plan, groups       (cli/popplan_plan.cpp)
void add_calibrate_verbs(Tool& tool);  // popplan calibrate        (cli/popplan_calibrate.cpp)
void add_tune_verbs(Tool& tool);       // popplan tune               (cli/popplan_tune.cpp)
void add_run_verbs(Tool& tool);        // poprun train, eval         (cli/poprun_verbs.cpp)
void add_report_verbs(
    Tool& tool);  // popreport memory, throughput, compare (cli/popreport_verbs.cpp)

}  // namespace popkit::cli
