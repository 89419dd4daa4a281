// popreport: tables, comparisons and charts from plan and run files; a CI gate.
#include "cli/verbs.h"

int main(int argc, char** argv) {
  popkit::cli::Tool tool(
      "popreport",
      "popreport: memory and throughput tables and comparisons from plan and run files",
      "popreport compare exits 1 when a gate fails (a gate that compared no row fails "
      "too); 2 is a file that is not a plan or run file, or a bad option.");
  popkit::cli::add_report_verbs(tool);
  return tool.main(argc, argv);
}
