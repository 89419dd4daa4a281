// The figures a run reports of its replicas: device and streaming memory measured by
// their accounts, and the bytes each moved, gathered from the ranks hosting them (every
// rank must call these).
#pragma once

#include <vector>

#include "engine/exec/state.h"

namespace popkit::engine {

MemoryReport memory_report(const EngineState& state);
std::vector<BytesMoved> bytes_moved(const EngineState& state);

}  // namespace popkit::engine
