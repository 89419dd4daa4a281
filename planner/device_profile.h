// The device profiles the cost model prices plans with; the table lives in config/
// (config/device_profile.h), where validation checks device.profile against it.
#pragma once

#include "config/device_profile.h"

namespace popkit::planner {

using config::device_profiles;
using config::DeviceProfile;
using config::find_device_profile;

}  // namespace popkit::planner
