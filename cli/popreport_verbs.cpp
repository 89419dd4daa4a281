// Verbs registered by add_report_verbs; none yet (see the open issues).
#include "cli/verbs.h"

namespace popkit::cli {

void add_report_verbs(Tool& /*tool*/) {}

}  // namespace popkit::cli
