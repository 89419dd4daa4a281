// Verbs registered by add_config_verbs; none yet (see the open issues).
#include "cli/verbs.h"

namespace popkit::cli {

void add_config_verbs(Tool& /*tool*/) {}

}  // namespace popkit::cli
