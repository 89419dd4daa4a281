// The fit behind `popplan calibrate`: Nelder-Mead on the logarithms of the parameters.
#include "planner/calibrate.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <numeric>

#include "base/error.h"
#include "planner/cost.h"

namespace popkit::planner {
namespace {

// How strongly each parameter is pulled towards its start, per (log unit)^2, against the
// squared log residuals: weak enough that a factor of 100 away from the start costs less
// than a 5% residual, strong enough to pin parameters the cases leave free.
constexpr double kPull = 1e-4;
constexpr int kMaxEvaluations = 20000;
constexpr int kRestarts = 4;

struct Free {
  const config::ProfileParameter* param;
  double x0;  // log of the start
};

class Fit {
 public:
  Fit(std::vector<CalibrationCase>& cases, const DeviceProfile& start, std::vector<Free> free)
      : cases_(cases), profile_(start), free_(std::move(free)) {}

  void set(const std::vector<double>& x) {
    for (std::size_t i = 0; i < free_.size(); ++i) {
      // Within the parameter's bounds, so that what --write writes reads back.
      const config::ProfileBounds& b = free_[i].param->bounds;
      free_[i].param->set(profile_, std::clamp(std::exp(x[i]), b.min, b.max));
    }
  }

  double loss(const std::vector<double>& x) {
    set(x);
    double sum = 0.0;
    for (auto& c : cases_) {
      estimate_time(c.plan, profile_);
      const double r =
          std::log(c.plan.estimated_samples_per_second / c.measured_samples_per_second);
      sum += r * r;
    }
    for (std::size_t i = 0; i < free_.size(); ++i) sum += kPull * std::pow(x[i] - free_[i].x0, 2);
    return std::isfinite(sum) ? sum : HUGE_VAL;
  }

  const DeviceProfile& profile() const { return profile_; }

 private:
  std::vector<CalibrationCase>& cases_;
  DeviceProfile profile_;
  std::vector<Free> free_;
};

// Nelder-Mead from x with initial steps of `step` along each axis.
std::vector<double> nelder_mead(const std::function<double(const std::vector<double>&)>& loss,
                                std::vector<double> x, double step, int& evaluations) {
  const std::size_t n = x.size();
  std::vector<std::vector<double>> s(n + 1, x);
  for (std::size_t i = 0; i < n; ++i) s[i + 1][i] += step;
  std::vector<double> f(n + 1);
  for (std::size_t i = 0; i <= n; ++i) f[i] = loss(s[i]);
  evaluations += static_cast<int>(n + 1);
  std::vector<std::size_t> order(n + 1);
  auto point = [&](const std::vector<double>& c, const std::vector<double>& w, double t) {
    std::vector<double> p(n);
    for (std::size_t i = 0; i < n; ++i) p[i] = c[i] + t * (w[i] - c[i]);
    return p;
  };
  while (evaluations < kMaxEvaluations) {
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return f[a] < f[b]; });
    const std::size_t best = order.front(), worst = order.back(), second = order[n - 1];
    if (f[worst] - f[best] < 1e-14) break;
    std::vector<double> centre(n, 0.0);
    for (std::size_t k = 0; k < n; ++k)
      for (std::size_t i = 0; i < n; ++i) centre[i] += s[order[k]][i] / static_cast<double>(n);
    const auto reflected = point(centre, s[worst], -1.0);
    const double fr = loss(reflected);
    ++evaluations;
    if (fr < f[best]) {
      const auto expanded = point(centre, s[worst], -2.0);
      const double fe = loss(expanded);
      ++evaluations;
      if (fe < fr) {
        s[worst] = expanded;
        f[worst] = fe;
      } else {
        s[worst] = reflected;
        f[worst] = fr;
      }
      continue;
    }
    if (fr < f[second]) {
      s[worst] = reflected;
      f[worst] = fr;
      continue;
    }
    const auto contracted = point(centre, fr < f[worst] ? reflected : s[worst], 0.5);
    const double fc = loss(contracted);
    ++evaluations;
    if (fc < std::min(fr, f[worst])) {
      s[worst] = contracted;
      f[worst] = fc;
      continue;
    }
    for (std::size_t k = 1; k <= n; ++k) {  // shrink towards the best
      s[order[k]] = point(s[best], s[order[k]], 0.5);
      f[order[k]] = loss(s[order[k]]);
    }
    evaluations += static_cast<int>(n);
  }
  return s[static_cast<std::size_t>(std::min_element(f.begin(), f.end()) - f.begin())];
}

}  // namespace

std::vector<double> minimise(const std::function<double(const std::vector<double>&)>& loss,
                             std::vector<double> x, double step, int& evaluations) {
  // Restarts from the best point found, with smaller steps, get Nelder-Mead out of the
  // collapsed simplices it can stall in.
  for (int k = 0; k < kRestarts; ++k, step /= 2) x = nelder_mead(loss, x, step, evaluations);
  return x;
}

double CalibrationResult::worst_residual() const {
  double worst = 0.0;
  for (const auto& r : rows) worst = std::max(worst, std::abs(r.residual()));
  return worst;
}

bool CalibrationResult::same_order() const {
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < rows.size(); ++j)
      if (rows[i].measured < rows[j].measured && !(rows[i].estimated < rows[j].estimated))
        return false;
  return true;
}

CalibrationResult price_cases(std::vector<CalibrationCase>& cases, const DeviceProfile& profile) {
  CalibrationResult r;
  r.profile = profile;
  for (auto& c : cases) {
    estimate_time(c.plan, profile);
    r.rows.push_back({c.name, c.measured_samples_per_second, c.plan.estimated_samples_per_second});
  }
  return r;
}

CalibrationResult calibrate(std::vector<CalibrationCase>& cases, const DeviceProfile& start,
                            std::span<const DeviceProfile::Fitted> priors) {
  if (cases.empty()) throw Error("calibration needs at least one measured case");
  std::vector<Free> free;
  for (const auto& [key, prior] : priors) {
    const config::ProfileParameter* p = config::find_profile_parameter(key);
    if (p == nullptr) throw Error("'{}' is not a parameter of a device profile", key);
    if (!p->fittable()) throw Error("'{}' is not a parameter calibration fits", key);
    if (!(prior > 0))
      throw Error("{} starts at {}; a fitted parameter needs a positive prior", key, prior);
    free.push_back({p, std::log(prior)});
  }
  Fit fit(cases, start, free);
  std::vector<double> x;
  for (const auto& f : free) x.push_back(f.x0);
  int evaluations = 0;
  if (!x.empty())
    x = minimise([&](const std::vector<double>& p) { return fit.loss(p); }, x, std::log(4.0),
                 evaluations);
  const double loss = fit.loss(x);
  CalibrationResult r = price_cases(cases, fit.profile());
  r.loss = loss;
  r.evaluations = evaluations;
  for (std::size_t i = 0; i < free.size(); ++i)
    r.fitted.push_back(
        {std::string(free[i].param->key), std::exp(free[i].x0), free[i].param->of(r.profile)});
  return r;
}

void print_calibration(std::ostream& out, const CalibrationResult& r, bool json) {
  if (json) {
    nlohmann::ordered_json j;
    j["profile"] = r.profile.name;
    j["loss"] = r.loss;
    j["evaluations"] = r.evaluations;
    j["fitted"] = nlohmann::ordered_json::array();
    for (const auto& f : r.fitted)
      j["fitted"].push_back({{"key", f.key}, {"start", f.start}, {"value", f.value}});
    j["cases"] = nlohmann::ordered_json::array();
    for (const auto& row : r.rows)
      j["cases"].push_back({{"name", row.name},
                            {"measured", row.measured},
                            {"estimated", row.estimated},
                            {"residual", row.residual()}});
    j["worst_residual"] = r.worst_residual();
    j["same_order"] = r.same_order();
    out << j.dump(1) << '\n';
    return;
  }
  if (!r.fitted.empty()) {
    std::size_t w = 9;
    for (const auto& f : r.fitted) w = std::max(w, f.key.size());
    fmt::print(out, "Fitted parameters of {} ({} evaluations, loss {:.6f}):\n", r.profile.name,
               r.evaluations, r.loss);
    for (const auto& f : r.fitted)
      fmt::print(out, "  {:<{}}  {:>12.6g} -> {:<12.6g}\n", f.key, w, f.start, f.value);
    out << '\n';
  }
  std::size_t w = 4;
  for (const auto& row : r.rows) w = std::max(w, row.name.size());
  fmt::print(out, "{:<{}}  {:>10}  {:>10}  {:>8}\n", "Case", w, "Measured", "Estimated",
             "Residual");
  for (const auto& row : r.rows)
    fmt::print(out, "{:<{}}  {:>10.1f}  {:>10.1f}  {:>+7.1f}%\n", row.name, w, row.measured,
               row.estimated, 100 * row.residual());
  fmt::print(out, "worst residual {:.1f}%; the estimates rank the cases {}\n",
             100 * r.worst_residual(),
             r.same_order() ? "as measured" : "differently from the measurements");
}

}  // namespace popkit::planner
