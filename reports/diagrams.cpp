#include "reports/diagrams.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/units.h"
#include "planner/names.h"
#include "planner/plan_text.h"
#include "planner/sync_groups.h"
#include "reports/svg.h"

namespace popkit::reports {

namespace {

using planner::OpKind;

constexpr int kMargin = 10;
constexpr int kTitleSize = 14;
constexpr int kNoteSize = 11;
constexpr int kTextSize = 10;
constexpr const char* kInk = "#222222";
constexpr const char* kFaint = "#666666";
constexpr const char* kRule = "#dddddd";

// `hex` (#rrggbb) blended with white: `amount` 0 keeps it, 1 is white.
std::string tint(const std::string& hex, double amount) {
  std::string out = "#";
  for (int i = 0; i < 3; ++i) {
    const int c = std::stoi(hex.substr(1 + 2 * i, 2), nullptr, 16);
    out += fmt::format("{:02x}", static_cast<int>(c + (255 - c) * amount + 0.5));
  }
  return out;
}

// Title and notes, each fitted to the width; returns the y below them.
int header(std::ostream& out, int width, const std::string& title,
           const std::vector<std::string>& notes) {
  const double room = width - 2 * kMargin;
  svg::text(out, kMargin, 20, svg::fit(title, room, kTitleSize), "start", kTitleSize,
            " font-weight=\"bold\"");
  int y = 26;
  for (const std::string& note : notes) {
    svg::text(out, kMargin, y + 13, svg::fit(note, room, kNoteSize), "start", kNoteSize);
    y += 16;
  }
  return y + 12;
}

// A box with a thin outline and up to a few lines of text, centred.
void box(std::ostream& out, double x, double y, double w, double h, const std::string& fill,
         const std::vector<std::string>& lines, int size = kTextSize) {
  out << fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" "
      "stroke=\"#888888\" stroke-width=\"0.5\"/>\n",
      x, y, w, h, fill);
  const double top = y + h / 2 - (static_cast<double>(lines.size()) - 1) * (size + 2) / 2;
  for (std::size_t i = 0; i < lines.size(); ++i)
    svg::text(out, x + w / 2, top + static_cast<double>(i) * (size + 2) + size * 0.35,
              svg::fit(lines[i], w - 4, size), "middle", size);
}

// Words of `text` (split after spaces and '+') in lines of at most `width` px.
std::vector<std::string> wrap(const std::string& text, double width, int size) {
  std::vector<std::string> words;
  std::string word;
  for (const char c : text) {
    word += c;
    if (c == ' ' || c == '+') {
      words.push_back(word);
      word.clear();
    }
  }
  if (!word.empty()) words.push_back(word);
  std::vector<std::string> lines{""};
  for (const std::string& w : words) {
    if (!lines.back().empty() && svg::text_width(lines.back() + w, size) > width)
      lines.emplace_back();
    lines.back() += w;
  }
  for (std::string& l : lines)
    while (!l.empty() && l.back() == ' ') l.pop_back();
  return lines;
}

// Replica groupings: a row per grouping, a box per replica.

constexpr int kGroupLabel = 210;
constexpr int kCell = 34;
constexpr int kCellGap = 4;
constexpr int kGroupRow = 64;

}  // namespace

void write_groups_svg(std::ostream& out, const std::vector<NamedGrouping>& groupings,
                      const std::vector<std::string>& notes) {
  const std::int64_t r = groupings.empty() ? 0 : groupings.front().grouping.factor;
  if (r > kMostDrawnReplicas)
    throw Error("a picture of {} replicas would be unreadable: --chart draws at most {}", r,
                kMostDrawnReplicas);
  const int width =
      std::max(480, 2 * kMargin + kGroupLabel + static_cast<int>(r) * (kCell + kCellGap));
  const int top = 42 + 16 * static_cast<int>(notes.size()) + 12;
  const int height = top + static_cast<int>(groupings.size()) * kGroupRow + kMargin;
  svg::open(out, width, height);
  int y = header(out, width, fmt::format("Replica groupings over {} replicas", r), notes);
  for (const NamedGrouping& g : groupings) {
    const planner::ReplicaGrouping& rg = g.grouping;
    svg::text(out, kMargin, y + 14, svg::fit(g.name, kGroupLabel - 8, 12), "start", 12,
              " font-weight=\"bold\"");
    svg::text(out, kMargin, y + 29,
              fmt::format("group_size {}, stride {}: {} group{}", rg.group_size, rg.stride,
                          rg.n_groups(), rg.n_groups() == 1 ? "" : "s"),
              "start", kTextSize);
    for (std::int64_t replica = 0; replica < r; ++replica) {
      const std::int64_t group = rg.group_of(replica);
      const double x = kMargin + kGroupLabel + static_cast<double>(replica) * (kCell + kCellGap);
      box(out, x, y, kCell, kCell, tint(svg::series_colour(static_cast<std::size_t>(group)), 0.45),
          {std::to_string(replica)}, 12);
      svg::text(out, x + kCell / 2.0, y + kCell + 12, fmt::format("g{}", group), "middle", 9,
                " fill=\"#444444\"");
    }
    y += kGroupRow;
  }
  out << "</svg>\n";
}

namespace {

// Phases: a column per phase, a lane per kind of work.

enum class Lane { kLoad, kGather, kCompute, kReduce, kUpdate, kStore };
constexpr std::array<const char*, 6> kLaneNames = {"load: streaming memory to device",
                                                   "all-gather: shards to full",
                                                   "compute: the micro-batches",
                                                   "reduce: gradients over replicas",
                                                   "optimizer step",
                                                   "store: device to streaming memory"};
constexpr std::array<std::size_t, 6> kLaneColour = {0, 1, 2, 1, 4, 0};

constexpr int kLaneLabel = 170;
constexpr int kColumn = 128;
constexpr int kLaneHeight = 40;
constexpr int kComputeLaneHeight = 56;  // up to four lines: the loop, its work, its streams

int lane_height(Lane lane) {
  return lane == Lane::kCompute ? kComputeLaneHeight : kLaneHeight;
}
constexpr int kPhaseHead = 58;
constexpr int kMemoryHeight = 90;

// What one phase does, lane by lane.
struct PhaseSummary {
  std::uint64_t load = 0, gather = 0, reduce = 0, store = 0;
  std::int64_t updates = 0;
  std::int64_t steps = 0;         // micro-batches its compute loop runs; 0: none
  std::vector<std::string> work;  // "fwd fc1", "loss", "bwd fc4"
  std::uint64_t streamed = 0;     // host and remote bytes inside the loop, all steps
  [[nodiscard]] bool has(Lane lane) const {
    switch (lane) {
      case Lane::kLoad:
        return load > 0;
      case Lane::kGather:
        return gather > 0;
      case Lane::kCompute:
        return steps > 0;
      case Lane::kReduce:
        return reduce > 0;
      case Lane::kUpdate:
        return updates > 0;
      case Lane::kStore:
        return store > 0;
    }
    return false;
  }
};

void add_work(const planner::Plan& plan, const planner::Op& op, PhaseSummary& s) {
  std::string what;
  if (op.kind == OpKind::kForward || op.kind == OpKind::kBackward)
    what = fmt::format("{} {}", op.kind == OpKind::kForward ? "fwd" : "bwd",
                       plan.layers.at(static_cast<std::size_t>(op.layer)).name);
  else if (op.kind == OpKind::kLoss)
    what = "loss";
  if (!what.empty() && std::find(s.work.begin(), s.work.end(), what) == s.work.end())
    s.work.push_back(what);
}

PhaseSummary summarise(const planner::Plan& plan, const planner::Phase& phase) {
  PhaseSummary s;
  for (const planner::Op& op : phase.ops) {
    switch (op.kind) {
      case OpKind::kRemoteLoad:
        s.load += op.remote_bytes;
        break;
      case OpKind::kRemoteStore:
        s.store += op.remote_bytes;
        break;
      case OpKind::kAllGather:
        s.gather += op.collective_bytes;
        break;
      case OpKind::kReduceScatter:
      case OpKind::kAllReduce:
        s.reduce += op.collective_bytes;
        break;
      case OpKind::kOptimizerStep:
        ++s.updates;
        break;
      case OpKind::kRepeat:
        s.steps += op.steps;
        s.streamed += op.host_bytes + op.remote_bytes;
        for (const planner::Op& inner : op.body) add_work(plan, inner, s);
        break;
      case OpKind::kForward:
      case OpKind::kBackward:
      case OpKind::kLoss:
        s.steps = std::max<std::int64_t>(s.steps, 1);
        add_work(plan, op, s);
        break;
      case OpKind::kHostLoad:
      case OpKind::kHostStore:
        s.streamed += op.host_bytes;
        break;
      default:
        break;
    }
  }
  return s;
}

std::vector<std::string> lane_text(Lane lane, const PhaseSummary& s) {
  switch (lane) {
    case Lane::kLoad:
      return {planner::format_bytes(s.load)};
    case Lane::kGather:
      return {planner::format_bytes(s.gather)};
    case Lane::kCompute: {
      std::string work;
      for (const std::string& w : s.work) work += (work.empty() ? "" : ", ") + w;
      std::vector<std::string> lines{
          fmt::format("{} micro-batch{}", s.steps, s.steps == 1 ? "" : "es")};
      for (const std::string& line : wrap(work, kColumn - 12, 9)) lines.push_back(line);
      if (s.streamed > 0) lines.push_back("streams " + planner::format_bytes(s.streamed));
      return lines;
    }
    case Lane::kReduce:
      return {planner::format_bytes(s.reduce)};
    case Lane::kUpdate:
      return {fmt::format("{} variable{}", s.updates, s.updates == 1 ? "" : "s")};
    case Lane::kStore:
      return {planner::format_bytes(s.store)};
  }
  return {};
}

void write_phases_svg(std::ostream& out, const planner::Plan& plan) {
  const auto n = static_cast<int>(plan.phases.size());
  const int width = 2 * kMargin + kLaneLabel + std::max(n, 3) * kColumn;
  std::vector<PhaseSummary> summaries;
  for (const planner::Phase& p : plan.phases) summaries.push_back(summarise(plan, p));
  std::vector<Lane> lanes;
  for (std::size_t l = 0; l < kLaneNames.size(); ++l)
    for (const PhaseSummary& s : summaries)
      if (s.has(static_cast<Lane>(l)) &&
          std::find(lanes.begin(), lanes.end(), static_cast<Lane>(l)) == lanes.end())
        lanes.push_back(static_cast<Lane>(l));
  const std::vector<std::string> notes = {
      fmt::format("{} replicas, micro-batch {} x accumulation {}, mode {}, io_mode {}; each "
                  "column a phase, in execution order",
                  plan.replication_factor, plan.micro_batch_size, plan.gradient_accumulation,
                  enum_name(plan.mode), enum_name(plan.io_mode)),
      fmt::format("per replica and step; estimated {} per step on {}",
                  format_seconds(plan.estimated_step_seconds), plan.device_profile)};
  const int top = 42 + 16 * static_cast<int>(notes.size()) + 12;
  int lanes_height = 0;
  for (const Lane lane : lanes) lanes_height += lane_height(lane);
  const int height = top + kPhaseHead + lanes_height + kMemoryHeight + 24;
  svg::open(out, width, height);
  int y = header(out, width, fmt::format("Plan {}: {} phase{}", plan.name, n, n == 1 ? "" : "s"),
                 notes);
  const double x0 = kMargin + kLaneLabel;
  for (int i = 0; i < n; ++i) {
    const planner::Phase& p = plan.phases[static_cast<std::size_t>(i)];
    const double x = x0 + i * kColumn;
    svg::text(out, x + kColumn / 2.0, y + 12, fmt::format("phase {}", i + 1), "middle", 11,
              " font-weight=\"bold\"");
    const auto name = wrap(p.name, kColumn - 8, kTextSize);
    for (std::size_t k = 0; k < std::min<std::size_t>(name.size(), 2); ++k)
      svg::text(
          out, x + kColumn / 2.0, y + 26 + 12 * static_cast<double>(k),
          svg::fit(name[k] + (k == 1 && name.size() > 2 ? "..." : ""), kColumn - 4, kTextSize),
          "middle", kTextSize);
    svg::text(out, x + kColumn / 2.0, y + 52, "est. " + format_seconds(p.estimated_seconds),
              "middle", 9, " fill=\"#444444\"");
    if (i > 0) svg::line(out, x, y, x, y + kPhaseHead + lanes_height, kRule);
  }
  y += kPhaseHead;
  for (const Lane lane : lanes) {
    const auto l = static_cast<std::size_t>(lane);
    const auto label = wrap(kLaneNames[l], kLaneLabel - 8, kTextSize);
    const int h = lane_height(lane);
    const double first = y + h / 2.0 + 2 - 6.0 * static_cast<double>(label.size() - 1);
    for (std::size_t k = 0; k < label.size(); ++k)
      svg::text(out, kMargin, first + 12.0 * static_cast<double>(k), label[k], "start", kTextSize);
    for (int i = 0; i < n; ++i) {
      const PhaseSummary& s = summaries[static_cast<std::size_t>(i)];
      if (!s.has(lane)) continue;
      box(out, x0 + i * kColumn + 4, y + 3, kColumn - 8, h - 6,
          tint(svg::series_colour(kLaneColour[l]), 0.55), lane_text(lane, s), 9);
    }
    y += h;
  }
  // Peak device memory per phase, always-live part darker, on one scale.
  svg::text(out, kMargin, y + 16, "device memory", "start", kTextSize);
  svg::text(out, kMargin, y + 29, "peak, always-live darker", "start", 9, " fill=\"#444444\"");
  std::uint64_t most = 1;
  for (const planner::Phase& p : plan.phases) most = std::max(most, p.memory.peak);
  const double bar_room = kMemoryHeight - 22;
  const double base = y + 16 + bar_room;
  for (int i = 0; i < n; ++i) {
    const planner::PhaseMemory& m = plan.phases[static_cast<std::size_t>(i)].memory;
    const double x = x0 + i * kColumn + kColumn / 2.0 - 20;
    const double h = bar_room * static_cast<double>(m.peak) / static_cast<double>(most);
    const double h_always =
        bar_room * static_cast<double>(m.always_live) / static_cast<double>(most);
    svg::rect(out, x, base - h, 40, h - h_always, tint(svg::series_colour(0), 0.35));
    svg::rect(out, x, base - h_always, 40, h_always, svg::series_colour(0));
    svg::text(out, x + 20, base - h - 4, planner::format_bytes(m.peak), "middle", 9);
  }
  svg::line(out, x0, base, x0 + n * kColumn, base, kFaint);
  svg::text(out, x0, base + 16,
            fmt::format("program peak {} (phase {}) of {} per replica; streaming memory {}",
                        planner::format_bytes(plan.peak_bytes), plan.peak_phase + 1,
                        planner::format_bytes(plan.memory_per_replica),
                        planner::format_bytes(plan.streaming_bytes)),
            "start", kTextSize, fmt::format(" fill=\"{}\"", kInk).c_str());
  out << "</svg>\n";
}

// A pipeline: a row per device, a column per cycle.

constexpr int kDeviceLabel = 190;
constexpr int kCycle = 26;
constexpr int kDeviceRow = 24;

void write_pipeline_svg(std::ostream& out, const planner::Plan& plan) {
  const auto S = static_cast<std::int64_t>(plan.pipeline->stages.size());
  const std::int64_t devices = plan.replication_factor * S;
  if (devices > kMostDrawnDevices)
    throw Error(
        "a picture of {} devices would be unreadable: --chart draws pipelines of at most {}",
        devices, kMostDrawnDevices);
  const planner::PipelineCycles cycles = planner::pipeline_cycles(plan);
  const int width =
      std::max(560, 2 * kMargin + kDeviceLabel + static_cast<int>(cycles.cycles) * kCycle + 90);
  const std::vector<std::string> notes = {
      fmt::format("{} stages x {} replicas = {} devices (device = replica x {} + stage), {} "
                  "micro-batches a step, 1F1B with a flush",
                  S, plan.replication_factor, devices, S, plan.gradient_accumulation),
      fmt::format("sync pattern {}: a dark mark is a cycle at whose start the device waits "
                  "for the others of its GS2 set",
                  enum_name(plan.sync_pattern)),
      "Fi / Bi: the forward / backward of micro-batch i; a column is a cycle"};
  const int top = 42 + 16 * static_cast<int>(notes.size()) + 12;
  const int height = top + 18 + static_cast<int>(devices) * kDeviceRow + kMargin + 4;
  svg::open(out, width, height);
  int y =
      header(out, width, fmt::format("Pipeline of {}: the schedule by cycle", plan.name), notes);
  const double x0 = kMargin + kDeviceLabel;
  const auto at = [x0](std::int64_t cycle) { return x0 + static_cast<double>(cycle) * kCycle; };
  for (std::int64_t c = 0; c < cycles.cycles; c += (cycles.cycles > 30 ? 5 : 1))
    svg::text(out, at(c) + kCycle / 2.0, y + 10, std::to_string(c), "middle", 9,
              " fill=\"#444444\"");
  svg::text(out, at(cycles.cycles) + 8, y + 10, "GS2 set", "start", 9);
  y += 16;
  // The GS2 sets, in order, for a colour each.
  const auto& gs2 = cycles.groups.gs2;
  for (std::int64_t d = 0; d < devices; ++d) {
    const std::int64_t replica = d / S;
    const std::int64_t stage = d % S;
    const double row = y + static_cast<double>(d) * kDeviceRow;
    svg::text(out, kMargin, row + 15,
              fmt::format("device {}: replica {}, stage {}", d, replica, stage), "start",
              kTextSize);
    std::size_t set = 0;
    for (std::size_t k = 0; k < gs2.size(); ++k)
      if (std::find(gs2[k].begin(), gs2[k].end(), d) != gs2[k].end()) set = k;
    const double end = at(cycles.cycles);
    box(out, end + 8, row + 3, 18, kDeviceRow - 6, tint(svg::series_colour(set + 5), 0.3), {});
    svg::text(out, end + 32, row + 15, std::to_string(set), "start", kTextSize);
    for (std::size_t ph = 0; ph < plan.phases.size(); ++ph) {
      const planner::Phase& p = plan.phases[ph];
      if (p.stage != stage) continue;
      for (std::size_t k = 0; k < p.slots.size(); ++k) {
        const planner::StageSlot& slot = p.slots[k];
        const std::int64_t c = cycles.slot_cycle[ph][k];
        const bool fwd = slot.work == planner::PipelineWork::kForward;
        box(out, at(c) + 1, row + 2, kCycle - 2, kDeviceRow - 4,
            tint(svg::series_colour(fwd ? 0 : 1), 0.45),
            {fmt::format("{}{}", fwd ? "F" : "B", slot.micro_batch)}, 9);
      }
    }
    const std::int64_t meeting = cycles.group_of[static_cast<std::size_t>(d)];
    if (meeting >= 0)
      for (const std::int64_t c : cycles.meetings[static_cast<std::size_t>(meeting)].cycles)
        svg::rect(out, at(c) + 1, row + 2, kCycle - 2, 3, kInk);
  }
  out << "</svg>\n";
}

}  // namespace

void write_plan_svg(std::ostream& out, const planner::Plan& plan) {
  if (plan.pipeline && plan.pipeline->stages.size() > 1) {
    write_pipeline_svg(out, plan);
    return;
  }
  write_phases_svg(out, plan);
}

void write_svg_file(const std::string& path, const std::function<void(std::ostream&)>& draw) {
  std::ostringstream drawn;  // drawn first: a picture that cannot be drawn leaves no file
  draw(drawn);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("{}: cannot open for writing", path);
  out << drawn.str();
  out.flush();
  if (!out) throw Error("{}: write failed", path);
}

}  // namespace popkit::reports
