// An evaluation plan over a data set, scored on the host (evaluate.h).
#include "engine/exec/evaluate.h"

#include <algorithm>
#include <array>
#include <vector>

#include "base/error.h"

namespace popkit::engine {
namespace {

// The host's buffers for scoring, kept from one micro-batch to the next.
struct Scratch {
  std::vector<float> labels, dlogits;
};

// Replica r's micro-batch of step s, its logits scored as the loss scores them, a row a
// sample's position (plan.positions of them): {1, the summed loss, the correct count},
// or {0, 0, 0} when it holds no sample.
std::array<double, 3> score(const EngineState& m, const EvalBatches& batches, std::int64_t r,
                            std::int64_t s, Scratch& scratch) {
  const std::int64_t classes = m.plan.n_classes;
  const std::int64_t n = batches.valid(r, s) * m.plan.positions;
  if (n == 0) return {0.0, 0.0, 0.0};
  const auto& dev = m.device(r, m.n_stages - 1);  // the stage with the logits
  if (static_cast<std::size_t>(s) >= dev.logits.size())
    throw Error("evaluate: plan '{}' streamed no logits at step {}", m.plan.name, s);
  const float* logits = dev.logits[static_cast<std::size_t>(s)].data();
  const MicroBatch mb = batches.micro_batch(r, s);
  for (std::int64_t i = 0; i < n; ++i)
    if (mb.labels[static_cast<std::size_t>(i)] >= classes)
      throw Error(
          "evaluate: label {} of replica {}'s row {} at step {} is not a class "
          "below {}",
          mb.labels[static_cast<std::size_t>(i)], r, i, s, classes);
  scratch.labels.assign(mb.labels.begin(), mb.labels.begin() + n);
  scratch.dlogits.resize(static_cast<std::size_t>(n * classes));
  const double loss = static_cast<double>(m.kern.softmax_cross_entropy(
                          logits, scratch.labels.data(), scratch.dlogits.data(), n, classes)) *
                      static_cast<double>(n);
  std::int64_t correct = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * classes;
    if (std::max_element(row, row + classes) - row == mb.labels[static_cast<std::size_t>(i)])
      ++correct;
  }
  return {1.0, loss, static_cast<double>(correct)};
}

// One batch of the evaluation plan, abandoned on a stop request before any of its ops
// (EngineOptions::stop_requested, which the gate polls before each; an evaluation plan
// has no update to protect). Over several processes it runs to its end: a rank that
// stopped alone would leave the others waiting in the next collective.
void run_batch(EngineState& m, Program& program, const EvalBatches& batches) {
  try {
    const StepGate::Step step(m.gate, m.world->size() > 1 ? nullptr : &m.options.stop_requested);
    program.run_step(batches);
  } catch (const StepAbandoned&) {
    throw EvaluationAbandoned();
  }
}

void check_image_size(const EngineState& m, const Dataset& data) {
  if (data.image_size() != m.image_size)
    throw Error("evaluate: images of {} pixels but the plan's input shape {} needs {}",
                data.image_size(), shape_str(m.plan.input_shape), m.image_size);
}

}  // namespace

EvalResult evaluate(EngineState& m, Program& program, const Dataset& data) {
  check_image_size(m, data);
  const auto t0 = Clock::now();
  const std::int64_t steps = m.plan.gradient_accumulation;
  EvalBatches batches(data, m.n_replicas, steps, m.plan.micro_batch_size);
  EvalResult result;
  double loss_sum = 0.0;
  // Per micro-batch of the replicas hosted here: whether it had samples, its summed loss
  // and its correct count; gathered from every rank and added in replica and step order.
  std::vector<double> scored;
  Scratch scratch;
  for (std::int64_t b = 0; b < batches.n_batches(); ++b) {
    batches.set_batch(b);
    for (auto& dev : m.devices) dev->logits.clear();
    run_batch(m, program, batches);
    scored.clear();
    for (std::int64_t r = m.hosted.first; r < m.hosted.first + m.hosted.n; ++r)
      for (std::int64_t s = 0; s < steps; ++s) {
        const auto one = score(m, batches, r, s, scratch);
        scored.insert(scored.end(), one.begin(), one.end());
      }
    const auto all = all_gather_values(*m.world, std::span<const double>(scored));
    for (std::size_t i = 0; i + 2 < all.size(); i += 3) {
      if (all[i] == 0.0) continue;
      loss_sum += all[i + 1];
      result.correct += static_cast<std::int64_t>(all[i + 2]);
    }
  }
  // The mean loss and the accuracy over every scored row: a sample, or a sample's position.
  result.n = data.n;
  result.rows = data.n * m.plan.positions;
  const auto rows = static_cast<double>(result.rows);
  result.batches = batches.n_batches();
  result.seconds = seconds_since(t0);
  result.loss = data.n > 0 ? loss_sum / rows : 0.0;
  result.accuracy = data.n > 0 ? static_cast<double>(result.correct) / rows : 0.0;
  return result;
}

std::vector<float> evaluation_logits(EngineState& m, Program& program, const Dataset& data) {
  check_image_size(m, data);
  const std::int64_t steps = m.plan.gradient_accumulation;
  const std::int64_t micro = m.plan.micro_batch_size;
  const std::int64_t sample_floats = m.plan.positions * m.plan.n_classes;
  EvalBatches batches(data, m.n_replicas, steps, micro);
  std::vector<float> out(static_cast<std::size_t>(data.n * sample_floats), 0.0F);
  for (std::int64_t b = 0; b < batches.n_batches(); ++b) {
    batches.set_batch(b);
    for (auto& dev : m.devices) dev->logits.clear();
    program.run_step(batches);
    for (std::int64_t r = m.hosted.first; r < m.hosted.first + m.hosted.n; ++r)
      for (std::int64_t s = 0; s < steps; ++s) {
        const std::int64_t n = batches.valid(r, s);
        if (n == 0) continue;
        const auto& dev = m.device(r, m.n_stages - 1);
        if (static_cast<std::size_t>(s) >= dev.logits.size())
          throw Error("evaluate: plan '{}' streamed no logits at step {}", m.plan.name, s);
        // EvalBatches' layout: replica r's share begins at n r / R, then step after step.
        const std::int64_t first = data.n * r / m.n_replicas + (b * steps + s) * micro;
        const float* logits = dev.logits[static_cast<std::size_t>(s)].data();
        std::copy(logits, logits + n * sample_floats, out.begin() + first * sample_floats);
      }
  }
  return out;
}

}  // namespace popkit::engine
