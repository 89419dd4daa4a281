// Byte sizes as people write them in configs: `900MiB`, `1.5GB`, `512 KiB` or a plain
// integer of bytes. Parsing is exact (decimal arithmetic on integers, no floating
// point) and rejects sizes that are not whole bytes or do not fit in 64 bits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace popkit::config {

// The units accepted, decimal (KB = 1000) and binary (KiB = 1024); case matters,
// because `Mb` would be read as megabits elsewhere.
inline constexpr const char* kByteUnits = "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB";

// Parses `text`; on failure returns nullopt and sets `error` to why (without a key path).
std::optional<std::uint64_t> parse_bytes(std::string_view text, std::string& error);

}  // namespace popkit::config
