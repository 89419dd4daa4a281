// A device profile for configs built in code, which no loader resolves: round figures,
// so tests that price a plan can work their expected times out by hand. The shipped
// profiles are files (share/profiles); tests that need those load them through
// config/yaml.
#pragma once

#include <string>

#include "config/config.h"

namespace popkit::test_support {

inline config::DeviceProfile test_profile(std::string name = "test") {
  config::DeviceProfile p;
  p.name = std::move(name);
  p.tiles = 1000;
  p.memory_bytes = 1ull << 30;
  p.flops_per_second = 1e12;
  p.vector_flops_per_second = 1e11;
  p.ipu_link = {1e10, 1e-6, 1.0};
  p.streaming = {1e10, 1e-6, 1.0};
  p.host = {1e10, 1e-6, 1.0};
  return p;
}

// `c` with its device resolved to test_profile(c.device.profile).
inline config::Config with_test_profile(config::Config c) {
  c.device.resolved = test_profile(c.device.profile);
  return c;
}

}  // namespace popkit::test_support
