// Byte sizes and other quantities as people read and write them. Parsing takes what
// configs and environment variables say: `900MiB`, `1.5GB`, `512 KiB` or a plain integer
// of bytes, exactly (decimal arithmetic on integers, no floating point), refusing sizes
// that are not whole bytes or do not fit in 64 bits. Formatting gives tables and
// summaries their units: bytes in B/KiB/MiB/GiB chosen by size, counts with thousands
// separated, seconds, relative changes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace popkit {

// The units accepted, decimal (KB = 1000) and binary (KiB = 1024); case matters,
// because `Mb` would be read as megabits elsewhere.
inline constexpr const char* kByteUnits = "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB";

// Parses `text`; on failure returns nullopt and sets `error` to why (without a key path).
std::optional<std::uint64_t> parse_bytes(std::string_view text, std::string& error);

// 0 -> "0 B", 1536 -> "1.50 KiB", 943718400 -> "900.00 MiB".
std::string format_bytes(std::uint64_t bytes);

// 1234567.8 -> "1,234,568" (rounded to `decimals` places, default none).
std::string format_thousands(double value, int decimals = 0);

// A rate as format_thousands writes it, with the decimals that keep three significant
// digits below 100: 85202.4 -> "85,202", 2.391 -> "2.39", 0.1527 -> "0.153".
std::string format_rate(double per_second);

// The difference a - b with its sign, for any two byte counts: (1536, 0) -> "+1.50 KiB",
// (0, 512) -> "-512 B", (7, 7) -> "0 B".
std::string format_byte_difference(std::uint64_t a, std::uint64_t b);

// Seconds with the unit chosen by size: 1.5 -> "1.500 s", 0.0123 -> "12.300 ms",
// 4.2e-5 -> "42.0 µs", 0 -> "0 s".
std::string format_seconds(double seconds);

// A relative change in percent with its sign: 0.05 -> "+5.0%", -0.073 -> "-7.3%".
std::string format_change(double fraction);

}  // namespace popkit
