// popreport: tables, comparisons and charts from plan and run files; a CI gate.
#include "cli/verbs.h"

int main(int argc, char** argv) {
  popkit::cli::Tool tool(
      "popreport",
      "popreport: memory and throughput tables and comparisons from plan and run files");
  popkit::cli::add_report_verbs(tool);
  return tool.main(argc, argv);
}
