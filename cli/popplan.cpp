// popplan: checks a config and builds its phased execution plan.
#include "cli/verbs.h"

int main(int argc, char** argv) {
  popkit::cli::Tool tool("popplan",
                         "popplan: check a popkit config and build its phased execution plan");
  popkit::cli::add_config_verbs(tool);
  popkit::cli::add_plan_verbs(tool);
  popkit::cli::add_calibrate_verbs(tool);
  popkit::cli::add_tune_verbs(tool);
  return tool.main(argc, argv);
}
