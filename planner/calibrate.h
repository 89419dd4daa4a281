// Calibration: fitting a device profile's free parameters to measured throughputs
// (`popplan calibrate`, docs/cost-model.md). Each case is a plan and the samples/s that
// were measured running it; the fit prices every plan with the profile (cost.h) and
// moves only the parameters it is told to fit, the published figures staying as they are.
//
//   std::vector<CalibrationCase> cases = ...;   // plans built from the table's configs
//   CalibrationResult r = calibrate(cases, profile, profile.fitted);  // key: prior
//   r.profile   // the fitted profile;  r.rows: measured, estimated, residual per case
#pragma once

#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "planner/device_profile.h"
#include "planner/plan.h"

namespace popkit::planner {

struct CalibrationCase {
  std::string name;
  Plan plan;
  double measured_samples_per_second = 0.0;
};

struct CalibrationRow {
  std::string name;
  double measured = 0.0;   // samples/s
  double estimated = 0.0;  // samples/s
  [[nodiscard]] double residual() const { return estimated / measured - 1.0; }
};

struct FittedParameter {
  std::string key;
  double start = 0.0;
  double value = 0.0;
};

struct CalibrationResult {
  DeviceProfile profile;
  std::vector<FittedParameter> fitted;  // empty when nothing was fitted
  std::vector<CalibrationRow> rows;     // in the cases' order
  double loss = 0.0;  // what the fit minimised: sum of log(estimated / measured)^2 + the pull
  int evaluations = 0;
  [[nodiscard]] double worst_residual() const;  // the largest |residual|
  // True when the estimates rank the cases as the measurements do.
  [[nodiscard]] bool same_order() const;
};

// The cases priced with `profile`, nothing fitted.
CalibrationResult price_cases(std::vector<CalibrationCase>& cases, const DeviceProfile& profile);

// Fits the parameters named by `priors` (keys of config/device_profile.h
// profile_parameters()) by least squares on log(estimated / measured), starting from each
// prior, with a weak pull towards it so parameters the cases do not determine stay there.
// Deterministic: the same cases and start give the same result. Throws popkit::Error
// for an unknown key or no cases.
CalibrationResult calibrate(std::vector<CalibrationCase>& cases, const DeviceProfile& start,
                            std::span<const DeviceProfile::Fitted> priors);

// The minimum of `loss` near `x` (Nelder-Mead from initial steps of `step` along each
// axis, restarted from the best point with halved steps); deterministic. `evaluations`
// grows by the calls made. Shared by the fits of `popplan calibrate` and `poprun
// calibrate` (runner/calibrate.h).
std::vector<double> minimise(const std::function<double(const std::vector<double>&)>& loss,
                             std::vector<double> x, double step, int& evaluations);

// The result as a report: the fitted parameters (start -> value) and a table of the cases
// (measured, estimated, residual), then the worst residual and whether the estimates rank
// the cases as measured. JSON: {"profile", "fitted": [{key, start, value}], "cases":
// [{name, measured, estimated, residual}], "worst_residual", "same_order"}.
void print_calibration(std::ostream& out, const CalibrationResult& result, bool json);

}  // namespace popkit::planner
