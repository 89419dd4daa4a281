// The config's optimizer kinds (optimizer_kinds.h): adam and sgd.
#include "config/optimizer_kinds.h"

#include <fmt/format.h>

#include <array>

namespace popkit::config {
namespace {

constexpr std::array<KindKey<Optimizer>, 2> kCommonKeys{{
    {"lr", &Optimizer::lr},
    {"weight_decay", &Optimizer::weight_decay},
}};

// Adam as popxl-addons applies it.
constexpr std::array<KindKey<Optimizer>, 5> kAdamKeys{{
    {"beta1", &Optimizer::beta1},
    {"beta2", &Optimizer::beta2},
    {"eps", &Optimizer::eps},
    {"bias_correction", &Optimizer::bias_correction},
    {"first_order_dtype", &Optimizer::first_order_dtype},
}};

void adam_check(const Optimizer& o, RuleChecks& checks) {
  for (const auto& [key, beta] : {std::pair{"beta1", o.beta1}, std::pair{"beta2", o.beta2}}) {
    const std::string path = fmt::format("training.optimizer.{}", key);
    if (checks.ok(path) && !(beta >= 0 && beta < 1))
      checks.error(path, fmt::format("must be in [0, 1), got {}", beta));
  }
  checks.positive("training.optimizer.eps", o.eps);
}

// SGD with torch.optim.SGD's semantics (dampening 0).
constexpr std::array<KindKey<Optimizer>, 2> kSgdKeys{{
    {"momentum", &Optimizer::momentum},
    {"nesterov", &Optimizer::nesterov},
}};

void sgd_check(const Optimizer& o, RuleChecks& checks) {
  checks.non_negative("training.optimizer.momentum", o.momentum);
  // torch.optim.SGD's rule: Nesterov momentum needs a momentum (and zero dampening).
  if (o.nesterov && o.momentum == 0.0 && checks.ok("training.optimizer.nesterov") &&
      checks.ok("training.optimizer.momentum"))
    checks.error("training.optimizer.nesterov",
                 "nesterov: true needs a momentum > 0, but training.optimizer.momentum is 0");
}

const std::array<OptimizerKindRules, 2> kOptimizerKinds{{
    {OptimizerType::kAdam, kAdamKeys, adam_check},
    {OptimizerType::kSgd, kSgdKeys, sgd_check},
}};

}  // namespace

const OptimizerKindRules& optimizer_kind_rules(OptimizerType type) {
  return kind_entry(kOptimizerKinds, type);
}

std::span<const OptimizerKindRules> optimizer_kind_rules() {
  return kOptimizerKinds;
}

std::span<const KindKey<Optimizer>> common_optimizer_keys() {
  return kCommonKeys;
}

std::vector<std::string_view> optimizer_kind_keys() {
  return keys_of_kinds<OptimizerKindRules>(kOptimizerKinds);
}

}  // namespace popkit::config
