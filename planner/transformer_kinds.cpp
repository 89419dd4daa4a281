// The transformer's layer kinds (transformer_kinds.h): what each holds, keeps for its
// backward, reads and writes, and costs.
#include "planner/transformer_kinds.h"

#include <algorithm>
#include <array>
#include <utility>

#include "planner/attention_workspace.h"
#include "planner/decoder_block_layout.h"
#include "planner/layer_ops.h"

namespace popkit::planner {
namespace {

using R = OperandRole;

std::uint64_t u(std::int64_t v) {
  return static_cast<std::uint64_t>(v);
}
std::int64_t seq(const LayerInfo& l) {
  return l.sequence;
}
std::int64_t features(const LayerInfo& l) {  // C: the input's features a position
  return l.in_features / l.sequence;
}
std::int64_t integer(const LayerInfo& l, const char* key) {
  return l.attributes.integer(key);
}

// The running mean of its gradient accumulators, and the GEMMs' packing of a linear.
std::uint64_t running_mean(const LayerInfo& l) {
  return kRunningMeanFlops * accumulator_elements(l);
}

// ---- embedding: out[b, t] = wte[token[b, t]] + wpe[t]; wte [V, C], wpe [P, C] ---------

std::int64_t emb_width(const LayerInfo& l) {  // C
  return l.out_features / l.sequence;
}

constexpr std::array<ParamSpec, 2> kEmbeddingParams{{
    {"wte", VariableRole::kWeight, ParamInit::kWeights, DType::kFloat32,
     [](const LayerInfo& l) {
       return Shape{integer(l, "vocabulary"), emb_width(l)};
     }},
    {"wpe", VariableRole::kWeight, ParamInit::kWeights, DType::kFloat32,
     [](const LayerInfo& l) {
       return Shape{integer(l, "positions"), emb_width(l)};
     }},
}};
constexpr int kWte = 0, kWpe = 1;

// Its input is token ids (float32, exact below 2^24); the backward scatters dy into the
// tables' accumulators by the same ids, and gives no dx (tokens have no gradient).
constexpr std::array<Operand, 3> kEmbeddingForwardIn{
    {{"tokens", R::kIn}, {"wte", R::kParam, kWte}, {"wpe", R::kParam, kWpe}}};
constexpr std::array<Operand, 1> kOutOnly{{{"out", R::kOut}}};
constexpr std::array<Operand, 2> kEmbeddingBackwardIn{{{"dy", R::kDy}, {"tokens", R::kIn}}};
constexpr std::array<Operand, 1> kDxOut{{{"dx", R::kDx}}};
constexpr std::array<Operand, 2> kEmbeddingBackwardState{
    {{"grad_wte", R::kGrad, kWte}, {"grad_wpe", R::kGrad, kWpe}}};

// A gather and an add per output element; the backward's two scatter-adds.
std::uint64_t embedding_forward_flops(const LayerInfo& l, std::uint64_t rows) {
  return rows * u(l.out_features);
}
std::uint64_t embedding_backward_flops(const LayerInfo& l, std::uint64_t rows, bool) {
  return 2 * rows * u(l.out_features) + running_mean(l);
}

// ---- decoder_block ---------------------------------------------------------------------
//   a = ln1(x); qkv = a Wqkv + bqkv; o = attention(qkv); h = x + drop(o Wproj + bproj)
//   m = ln2(h); f = gelu(m Wfc + bfc); y = h + drop(f Wfc2 + bfc2)
// Weights [in, out] as a linear's (x W + b).

std::int64_t hidden(const LayerInfo& l) {
  return integer(l, "hidden");
}
AttentionShape attention_shape(const LayerInfo& l, std::int64_t rows) {
  return {rows, seq(l), features(l), integer(l, "heads")};
}
bool attention_dropout(const LayerInfo& l) {
  return l.attributes.number("attention_dropout") > 0;
}

Shape c_vec(const LayerInfo& l) {
  return {features(l)};
}
constexpr std::array<ParamSpec, 12> kBlockParams{{
    {"ln1.scale", VariableRole::kWeight, ParamInit::kOnes, DType::kFloat32, c_vec},
    {"ln1.shift", VariableRole::kBias, ParamInit::kZeros, DType::kFloat32, c_vec},
    {"attn.qkv.weight", VariableRole::kWeight, ParamInit::kWeights, DType::kFloat32,
     [](const LayerInfo& l) {
       return Shape{features(l), 3 * features(l)};
     }},
    {"attn.qkv.bias", VariableRole::kBias, ParamInit::kBiases, DType::kFloat32,
     [](const LayerInfo& l) { return Shape{3 * features(l)}; }},
    {"attn.proj.weight", VariableRole::kWeight, ParamInit::kWeights, DType::kFloat32,
     [](const LayerInfo& l) {
       return Shape{features(l), features(l)};
     }},
    {"attn.proj.bias", VariableRole::kBias, ParamInit::kBiases, DType::kFloat32, c_vec},
    {"ln2.scale", VariableRole::kWeight, ParamInit::kOnes, DType::kFloat32, c_vec},
    {"ln2.shift", VariableRole::kBias, ParamInit::kZeros, DType::kFloat32, c_vec},
    {"mlp.fc.weight", VariableRole::kWeight, ParamInit::kWeights, DType::kFloat32,
     [](const LayerInfo& l) {
       return Shape{features(l), hidden(l)};
     }},
    {"mlp.fc.bias", VariableRole::kBias, ParamInit::kBiases, DType::kFloat32,
     [](const LayerInfo& l) { return Shape{hidden(l)}; }},
    {"mlp.proj.weight", VariableRole::kWeight, ParamInit::kWeights, DType::kFloat32,
     [](const LayerInfo& l) {
       return Shape{hidden(l), features(l)};
     }},
    {"mlp.proj.bias", VariableRole::kBias, ParamInit::kBiases, DType::kFloat32, c_vec},
}};
using namespace decoder_block;  // Param, Saved: the indices of the tables below

bool always(const LayerInfo&) {
  return true;
}
Shape per_position(const LayerInfo& l, std::int64_t rows) {
  return {rows, seq(l)};
}
Shape c_wide(const LayerInfo& l, std::int64_t rows) {
  return {rows, seq(l), features(l)};
}
Shape h_wide(const LayerInfo& l, std::int64_t rows) {
  return {rows, seq(l), hidden(l)};
}
// What the backward reads besides x: the layer norms' statistics and outputs, qkv, the
// attention's probabilities (attention_saved_bytes: B NH T T), its output, h, and the
// MLP's pre-activation and activation. Dropout masks are drawn again from their keys.
constexpr std::array<SavedSpec, 12> kBlockSaved{{
    {"ln1.mean", "the first layer norm's means", per_position, always},
    {"ln1.rstd", "the first layer norm's reciprocal deviations", per_position, always},
    {"ln1.out", "the first layer norm's output", c_wide, always},
    {"qkv", "the queries, keys and values",
     [](const LayerInfo& l, std::int64_t rows) {
       return Shape{rows, seq(l), 3 * features(l)};
     },
     always},
    {"attn.probs", "the attention probabilities",
     [](const LayerInfo& l, std::int64_t rows) {
       return Shape{rows, integer(l, "heads"), seq(l), seq(l)};
     },
     always},
    {"attn.out", "the attention's output", c_wide, always},
    {"h", "the first residual sum", c_wide, always},
    {"ln2.mean", "the second layer norm's means", per_position, always},
    {"ln2.rstd", "the second layer norm's reciprocal deviations", per_position, always},
    {"ln2.out", "the second layer norm's output", c_wide, always},
    {"mlp.pre", "the MLP's pre-activation", h_wide, always},
    {"mlp.act", "the MLP's activation", h_wide, always},
}};

template <std::size_t... I>
constexpr std::array<Operand, 1 + sizeof...(I)> block_forward_in(std::index_sequence<I...>) {
  return {{{"in", R::kIn}, {kBlockParams[I].suffix, R::kParam, static_cast<int>(I)}...}};
}
template <std::size_t... I>
constexpr std::array<Operand, 1 + sizeof...(I)> block_forward_out(std::index_sequence<I...>) {
  return {{{"out", R::kOut}, {kBlockSaved[I].name, R::kSaved, static_cast<int>(I)}...}};
}
template <std::size_t... I>
constexpr std::array<Operand, sizeof...(I)> block_grads(std::index_sequence<I...>) {
  return {{{kBlockParams[I].suffix, R::kGrad, static_cast<int>(I)}...}};
}
template <std::size_t... I>
constexpr std::array<Operand, 2 + sizeof...(I)> block_backward_saved(std::index_sequence<I...>) {
  return {
      {{"dy", R::kDy}, {"in", R::kIn}, {kBlockSaved[I].name, R::kSaved, static_cast<int>(I)}...}};
}
constexpr auto kBlockForwardIn = block_forward_in(std::make_index_sequence<12>());
constexpr auto kBlockForwardOut = block_forward_out(std::make_index_sequence<12>());
constexpr auto kBlockBackwardState = block_grads(std::make_index_sequence<12>());
constexpr auto kBlockBackwardSaved = block_backward_saved(std::make_index_sequence<12>());
// dy, x and the saved tensors; the weights the chain back through the block multiplies
// by; ln1's scale only for dx (qkv's weight gives the gradient of ln1's output, which
// its parameters' gradients need).
constexpr std::array<Operand, kBlockBackwardSaved.size() + 6> kBlockBackwardIn = [] {
  std::array<Operand, kBlockBackwardSaved.size() + 6> out{};
  std::size_t i = 0;
  for (const Operand& o : kBlockBackwardSaved) out[i++] = o;
  out[i++] = {"mlp.proj.weight", R::kParam, kFc2W};
  out[i++] = {"mlp.fc.weight", R::kParam, kFcW};
  out[i++] = {"ln2.scale", R::kParam, kLn2Scale};
  out[i++] = {"attn.proj.weight", R::kParam, kProjW};
  out[i++] = {"attn.qkv.weight", R::kParam, kQkvW};
  out[i++] = {"ln1.scale", R::kParam, kLn1Scale, true};
  return out;
}();

// The four linears, as [rows T, in] x [in, out] (they do not depend on the rows).
std::array<Linear, 4> block_linears(const LayerInfo& l) {
  return linears(dims(l, 0));
}

// The attention's score and value products over the causal row blocks: each GEMM's
// multiply-adds, summed over (batch, head) pairs (attention_workspace.h's blocks).
std::uint64_t attention_products(const AttentionShape& s) {
  std::uint64_t cells = 0;  // score cells computed, rows x columns, per pair
  for (std::int64_t r0 = 0; r0 < s.seq; r0 += kAttentionRows) {
    const std::int64_t r1 = std::min(s.seq, r0 + kAttentionRows);
    cells += u(r1 - r0) * u(r1);
  }
  return cells * u(s.head_size()) * u(s.pairs());
}
// Per score cell: scale, max, exp, sum, divide; the backward's dS the same again.
constexpr std::uint64_t kSoftmaxFlops = 5;
// Per element of C: a layer norm's 7 (layer_kinds.cpp), a residual add, a dropout's 4.
constexpr std::uint64_t kLnFlops = 7, kLnBackwardFlops = 12, kDropFlops = 4, kGeluFlops = 8,
                        kGeluBackwardFlops = 12;

std::uint64_t block_elementwise(const LayerInfo& l, std::uint64_t rows, bool backward) {
  const std::uint64_t n = rows * u(seq(l)), c = u(features(l)), h = u(hidden(l));
  const std::uint64_t drop = l.attributes.number("residual_dropout") > 0 ? 2 * kDropFlops : 0;
  const std::uint64_t ln = backward ? kLnBackwardFlops : kLnFlops;
  const std::uint64_t gelu = backward ? kGeluBackwardFlops : kGeluFlops;
  const AttentionShape s = attention_shape(l, static_cast<std::int64_t>(rows));
  const std::uint64_t cells = attention_products(s) / u(s.head_size());
  const std::uint64_t att_drop = attention_dropout(l) ? kDropFlops : 0;
  return n * (2 * ln * c + 2 * c + drop * c + gelu * h + 3 * c + c + h + c) +
         cells * (kSoftmaxFlops + att_drop);
}

std::uint64_t block_forward_flops(const LayerInfo& l, std::uint64_t rows) {
  std::uint64_t gemm = 0;
  for (const Linear& g : block_linears(l)) gemm += 2 * rows * u(seq(l)) * u(g.in) * u(g.out);
  // S = Q K^T and O = P V.
  gemm += 2 * 2 * attention_products(attention_shape(l, static_cast<std::int64_t>(rows)));
  return gemm + block_elementwise(l, rows, false);
}
std::uint64_t block_backward_flops(const LayerInfo& l, std::uint64_t rows, bool) {
  std::uint64_t gemm = 0;  // each linear's gradient and input gradient (qkv's: ln1's output's)
  for (const Linear& g : block_linears(l)) gemm += 2 * 2 * rows * u(seq(l)) * u(g.in) * u(g.out);
  // dV, dP, dQ, dK.
  gemm += 4 * 2 * attention_products(attention_shape(l, static_cast<std::int64_t>(rows)));
  return gemm + block_elementwise(l, rows, true) + running_mean(l);
}

OpGemms block_forward_gemms(const LayerInfo& l, std::uint64_t rows) {
  OpGemms g;
  for (const Linear& b : block_linears(l))
    g.gemm[static_cast<std::size_t>(g.n_gemms++)] = {rows * u(seq(l)), u(b.out), u(b.in), true};
  return g;
}
OpGemms block_backward_gemms(const LayerInfo& l, std::uint64_t rows, bool) {
  OpGemms g;
  const std::uint64_t n = rows * u(seq(l));
  for (const Linear& b : block_linears(l)) {
    g.gemm[static_cast<std::size_t>(g.n_gemms++)] = {u(b.in), u(b.out), n};
    g.gemm[static_cast<std::size_t>(g.n_gemms++)] = {n, u(b.in), u(b.out), true};
  }
  return g;
}

// The workspace as the engine's entry cuts it (decoder_block_layout.h): in evaluation
// (nothing saved) the intermediates, then the packing.
OpWorkspace block_forward_ws(const LayerInfo& l, std::int64_t rows, bool saves) {
  return {forward_scratch(l, rows, saves).bytes(), 1};
}
// The gradients inside the block, then the packing; dx or not, the same.
OpWorkspace block_backward_ws(const LayerInfo& l, std::int64_t rows, bool) {
  return {backward_scratch(l, rows).bytes(), 1};
}

// ---- lm_head: logits[b, t] = x[b, t] W^T, W [V, C] (the token table's layout) -----------

std::int64_t vocabulary(const LayerInfo& l) {
  return integer(l, "vocabulary");
}

// The weight: its own, or (tied_to) the embedding's token table, one variable.
constexpr std::array<ParamSpec, 1> kHeadParams{{
    {"weight", VariableRole::kWeight, ParamInit::kWeights, DType::kFloat32,
     [](const LayerInfo& l) {
       return Shape{vocabulary(l), features(l)};
     },
     "tied_to", kWte},
}};
constexpr std::array<Operand, 2> kHeadForwardIn{{{"in", R::kIn}, {"weight", R::kParam, 0}}};
constexpr std::array<Operand, 3> kHeadBackwardIn{
    {{"dy", R::kDy}, {"in", R::kIn}, {"weight", R::kParam, 0, true}}};
constexpr std::array<Operand, 1> kHeadBackwardState{{{"grad_weight", R::kGrad, 0}}};

std::uint64_t head_weights(const LayerInfo& l, std::uint64_t rows) {
  return rows * u(seq(l)) * u(features(l)) * u(vocabulary(l));
}
std::uint64_t head_forward_flops(const LayerInfo& l, std::uint64_t rows) {
  return 2 * head_weights(l, rows);
}
std::uint64_t head_backward_flops(const LayerInfo& l, std::uint64_t rows, bool dx) {
  return 2 * head_weights(l, rows) * (dx ? 2 : 1) + running_mean(l);
}
// x W^T is [B T, C] x [C, V]; dW = dy^T x is [V, B T] x [B T, C]; dx = dy W is [B T, V] x
// [V, C].
OpGemms head_forward_gemms(const LayerInfo& l, std::uint64_t rows) {
  OpGemms g;
  g.gemm[0] = {rows * u(seq(l)), u(vocabulary(l)), u(features(l))};
  g.n_gemms = 1;
  return g;
}
OpGemms head_backward_gemms(const LayerInfo& l, std::uint64_t rows, bool dx) {
  OpGemms g;
  g.gemm[0] = {u(vocabulary(l)), u(features(l)), rows * u(seq(l))};
  if (dx) g.gemm[1] = {rows * u(seq(l)), u(features(l)), u(vocabulary(l))};
  g.n_gemms = dx ? 2 : 1;
  return g;
}
OpWorkspace head_forward_ws(const LayerInfo& l, std::int64_t rows, bool) {
  return lm_head_forward_workspace(rows * seq(l), features(l), vocabulary(l));
}
OpWorkspace head_backward_ws(const LayerInfo& l, std::int64_t rows, bool dx) {
  return lm_head_backward_workspace(rows * seq(l), features(l), vocabulary(l), dx);
}

OpWorkspace no_workspace(const LayerInfo&, std::int64_t, bool) {
  return {};
}
OpGemms no_gemms(const LayerInfo&, std::uint64_t) {
  return {};
}
OpGemms no_backward_gemms(const LayerInfo&, std::uint64_t, bool) {
  return {};
}

constexpr LayerKind kEmbedding{"embedding",
                               kEmbeddingParams,
                               {},
                               /*identity_in_eval=*/false,
                               kEmbeddingForwardIn,
                               kOutOnly,
                               kEmbeddingBackwardIn,
                               kDxOut,
                               kEmbeddingBackwardState,
                               embedding_forward_flops,
                               embedding_backward_flops,
                               no_gemms,
                               no_backward_gemms,
                               no_workspace,
                               no_workspace};

constexpr LayerKind kDecoderBlock{"decoder_block",
                                  kBlockParams,
                                  kBlockSaved,
                                  /*identity_in_eval=*/false,
                                  kBlockForwardIn,
                                  kBlockForwardOut,
                                  kBlockBackwardIn,
                                  kDxOut,
                                  kBlockBackwardState,
                                  block_forward_flops,
                                  block_backward_flops,
                                  block_forward_gemms,
                                  block_backward_gemms,
                                  block_forward_ws,
                                  block_backward_ws};

constexpr LayerKind kLmHead{"lm_head",
                            kHeadParams,
                            {},
                            /*identity_in_eval=*/false,
                            kHeadForwardIn,
                            kOutOnly,
                            kHeadBackwardIn,
                            kDxOut,
                            kHeadBackwardState,
                            head_forward_flops,
                            head_backward_flops,
                            head_forward_gemms,
                            head_backward_gemms,
                            head_forward_ws,
                            head_backward_ws};

}  // namespace

const LayerKind& embedding_kind() {
  return kEmbedding;
}
const LayerKind& decoder_block_kind() {
  return kDecoderBlock;
}
const LayerKind& lm_head_kind() {
  return kLmHead;
}

}  // namespace popkit::planner
