// What the engine's equivalence tests share: training an engine over consecutive global
// batches of a dataset, every variable it holds as float bit patterns, and the two ways
// to compare them (bitwise, and to rounding relative to each variable's scale).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "config/optimizer_kinds.h"
#include "engine/data/batch_source.h"
#include "engine/data/dataset.h"
#include "engine/engine.h"

namespace popkit::engine::test {

// The tests' engine: two threads, whatever this machine's core count.
inline EngineOptions options() {
  EngineOptions o;
  o.n_threads = 2;
  return o;
}

// Runs `steps` optimizer steps over consecutive global batches of `data` from batch
// `first_batch` (wrapping at the end); returns the losses.
inline std::vector<double> train_on(Engine& e, const Dataset& data, std::int64_t steps,
                                    std::int64_t first_batch = 0) {
  const auto& p = e.plan();
  DatasetBatches batches(data, p.replication_factor, p.gradient_accumulation, p.micro_batch_size);
  std::vector<std::int64_t> order(static_cast<std::size_t>(data.n));
  std::iota(order.begin(), order.end(), 0);
  std::vector<double> losses;
  for (std::int64_t s = 0; s < steps; ++s) {
    batches.set_batch(order, (first_batch + s) % (data.n / p.global_batch_size));
    losses.push_back(e.train_step(batches));
  }
  return losses;
}

// Every variable of every group (weights, biases, optimizer state), as float bit patterns.
inline std::vector<std::vector<float>> all_state(const Engine& e) {
  std::vector<std::vector<float>> out;
  for (const auto& name : e.variable_names())
    for (std::int64_t g = 0; g < e.plan().variables_grouping.n_groups(); ++g)
      out.push_back(e.read_variable(name, g));
  return out;
}

// The optimizers of the equivalence tests: `adam` as given and with a float16 first
// moment, SGD with Nesterov momentum and weight decay (a momentum buffer per parameter),
// plain SGD (no optimizer state at all).
struct OptimizerCase {
  std::string name;
  config::Optimizer optimizer;
};
inline std::vector<OptimizerCase> optimizer_cases(const config::Optimizer& adam) {
  config::Optimizer adam16 = adam;
  adam16.attributes.set("first_order_dtype", "float16");
  config::Optimizer nesterov;
  config::set_optimizer_type(nesterov, "sgd");
  nesterov.lr = 0.05;
  nesterov.attributes.set("momentum", 0.9);
  nesterov.attributes.set("nesterov", true);
  nesterov.weight_decay = 1e-3;
  config::Optimizer sgd;
  config::set_optimizer_type(sgd, "sgd");
  sgd.lr = 0.05;
  return {{"adam", adam},
          {"adam, float16 first order", adam16},
          {"sgd, nesterov momentum", nesterov},
          {"sgd", sgd}};
}

inline bool bitwise_equal(const std::vector<std::vector<float>>& a,
                          const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size()) return false;
    if (std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0) return false;
  }
  return true;
}

// The largest |a - b| of any element, relative to the largest magnitude of its variable
// in `b`; infinity when the two hold different variables or shapes.
inline double largest_relative_difference(const std::vector<std::vector<float>>& a,
                                          const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (std::size_t v = 0; v < a.size(); ++v) {
    if (a[v].size() != b[v].size()) return INFINITY;
    double scale = 0;
    for (const float x : b[v]) scale = std::max(scale, double{std::abs(x)});
    for (std::size_t i = 0; i < a[v].size(); ++i)
      worst = std::max(worst, std::abs(double{a[v][i]} - b[v][i]) / std::max(scale, 1e-30));
  }
  return worst;
}

}  // namespace popkit::engine::test
