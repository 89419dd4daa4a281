// poprun: executes a config's plan on this CPU: trains, evaluates, measures.
#include "cli/verbs.h"

int main(int argc, char** argv) {
  popkit::cli::Tool tool("poprun", "poprun: execute a popkit plan on this CPU: train and evaluate");
  popkit::cli::add_run_verbs(tool);
  return tool.main(argc, argv);
}
