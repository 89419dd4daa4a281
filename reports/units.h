// Human-readable units for tables: bytes in B/KiB/MiB/GiB chosen by size, counts with
// thousands separated, so a terminal table reads at a glance.
#pragma once

#include <cstdint>
#include <string>

namespace popkit::reports {

// 0 -> "0 B", 1536 -> "1.50 KiB", 943718400 -> "900.00 MiB".
std::string format_bytes(std::uint64_t bytes);

// 1234567.8 -> "1,234,568" (rounded to `decimals` places, default none).
std::string format_thousands(double value, int decimals = 0);

}  // namespace popkit::reports
