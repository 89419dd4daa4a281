// The device profile table.
#include "config/device_profile.h"

namespace popkit::config {

const std::vector<DeviceProfile>& device_profiles() {
  static const std::vector<DeviceProfile> kProfiles = {
      // GC200: 1472 tiles, 62.5 TFLOPS float32, 900 MB In-Processor-Memory,
      // 10 IPU-Links at 32 GB/s each (320 GB/s), streaming memory ~ 20 GB/s.
      {"ipu-mk2", 1472, 62.5e12, 320.0e9, 20.0e9, 16.0e9, 5.0e-6, 2.0e-6, 10.0e-6,
       900ull * 1024 * 1024},
      // GC2: 1216 tiles, 31.1 TFLOPS float32, 304 MiB, IPU-Links 320 GB/s, no DDR of its
      // own: remote buffers go over PCIe to host memory.
      {"ipu-mk1", 1216, 31.1e12, 320.0e9, 16.0e9, 16.0e9, 5.0e-6, 10.0e-6, 10.0e-6,
       304ull * 1024 * 1024},
      // A host CPU running the popkit engine: one "tile", memory bandwidth for everything.
      {"cpu", 1, 100.0e9, 20.0e9, 20.0e9, 20.0e9, 1.0e-6, 0.5e-6, 0.5e-6,
       16ull * 1024 * 1024 * 1024},
  };
  return kProfiles;
}

const DeviceProfile* find_device_profile(std::string_view name) {
  for (const auto& p : device_profiles())
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace popkit::config
