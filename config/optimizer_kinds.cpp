// The config's optimizer kinds (optimizer_kinds.h): adam and sgd.
#include "config/optimizer_kinds.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>

#include "config/names.h"

namespace popkit::config {
namespace {

constexpr std::array<std::string_view, 2> kCommonKeys{"lr", "weight_decay"};

std::vector<std::string_view> dtype_names() {
  return enum_names<DType>();
}

// Adam as popxl-addons applies it.
constexpr std::array<KindKey, 5> kAdamKeys{{
    number_key("beta1", 0.9),
    number_key("beta2", 0.999),
    number_key("eps", 1.0e-5),
    boolean_key("bias_correction", false),
    choice_key("first_order_dtype", "float32", dtype_names),
}};

void adam_check(const Optimizer& o, RuleChecks& checks) {
  for (const char* key : {"beta1", "beta2"}) {
    const std::string path = fmt::format("training.optimizer.{}", key);
    const double beta = o.attributes.number(key);
    if (checks.ok(path) && !(beta >= 0 && beta < 1))
      checks.error(path, fmt::format("must be in [0, 1), got {}", beta));
  }
  checks.positive("training.optimizer.eps", o.attributes.number("eps"));
}

// SGD with torch.optim.SGD's semantics (dampening 0).
constexpr std::array<KindKey, 2> kSgdKeys{{
    number_key("momentum", 0.0),
    boolean_key("nesterov", false),
}};

void sgd_check(const Optimizer& o, RuleChecks& checks) {
  const double momentum = o.attributes.number("momentum");
  checks.non_negative("training.optimizer.momentum", momentum);
  // torch.optim.SGD's rule: Nesterov momentum needs a momentum (and zero dampening).
  if (o.attributes.boolean("nesterov") && momentum == 0.0 &&
      checks.ok("training.optimizer.nesterov") && checks.ok("training.optimizer.momentum"))
    checks.error("training.optimizer.nesterov",
                 "nesterov: true needs a momentum > 0, but training.optimizer.momentum is 0");
}

const std::array<OptimizerKindRules, 2> kOptimizerKinds{{
    {"adam", kAdamKeys, adam_check},
    {"sgd", kSgdKeys, sgd_check},
}};

}  // namespace

const OptimizerKindRules* find_optimizer_kind(std::string_view type) {
  return find_kind(optimizer_kind_rules(), type);
}

const OptimizerKindRules& optimizer_kind_rules(std::string_view type) {
  return kind_entry(optimizer_kind_rules(), type);
}

std::span<const OptimizerKindRules> optimizer_kind_rules() {
  return kOptimizerKinds;
}

std::vector<std::string_view> optimizer_kind_names() {
  return kind_names(optimizer_kind_rules());
}

std::span<const std::string_view> common_optimizer_keys() {
  return kCommonKeys;
}

std::vector<std::string_view> optimizer_kind_keys() {
  return keys_of_kinds(optimizer_kind_rules());
}

std::string foreign_optimizer_key(const OptimizerKindRules& kind, std::string_view key) {
  std::vector<std::string_view> own(kCommonKeys.begin(), kCommonKeys.end());
  for (const KindKey& k : kind.keys) own.push_back(k.name);
  return fmt::format("{} is not a key of optimizer type {} (it takes {})", key, kind.type,
                     fmt::join(own, ", "));
}

Attributes default_optimizer_attributes(std::string_view type) {
  return default_attributes(optimizer_kind_rules(type).keys);
}

void set_optimizer_type(Optimizer& optimizer, std::string_view type) {
  optimizer.type = std::string(type);
  optimizer.attributes = default_attributes(optimizer_kind_rules(type).keys);
}

Optimizer make_optimizer(std::string_view type, std::initializer_list<Attribute> attributes) {
  const OptimizerKindRules& kind = optimizer_kind_rules(type);
  Optimizer o;
  o.type = std::string(type);
  o.attributes = default_attributes(kind.keys);
  for (const Attribute& a : attributes) {
    POPKIT_ASSERT(find_key(kind.keys, a.key) != nullptr);
    o.attributes.set(a.key, a.value);
  }
  return o;
}

}  // namespace popkit::config
