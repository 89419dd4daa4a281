// Verbs registered by add_plan_verbs; none yet (see the open issues).
#include "cli/verbs.h"

namespace popkit::cli {

void add_plan_verbs(Tool& /*tool*/) {}

}  // namespace popkit::cli
