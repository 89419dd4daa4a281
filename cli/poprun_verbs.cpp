// Verbs registered by add_run_verbs; none yet (see the open issues).
#include "cli/verbs.h"

namespace popkit::cli {

void add_run_verbs(Tool& /*tool*/) {}

}  // namespace popkit::cli
