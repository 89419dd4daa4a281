// popplan: checks a config and builds its phased execution plan.
#include "cli/verbs.h"

int main(int argc, char** argv) {
  popkit::cli::Tool tool(
      "popplan", "popplan: check a popkit config and build its phased execution plan",
      "popplan plan exits 1 when the plan does not fit the device, tune when no candidate "
      "fits, calibrate when a residual passes its tolerance. Each verb's help says more; "
      "the config's keys: popplan schema.");
  popkit::cli::add_config_verbs(tool);
  popkit::cli::add_plan_verbs(tool);
  popkit::cli::add_calibrate_verbs(tool);
  popkit::cli::add_tune_verbs(tool);
  return tool.main(argc, argv);
}
