// popplan tune's report: the candidates that fit by row, as text that fits 100 columns or
// as JSON.
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/units.h"
#include "planner/fit_advice.h"
#include "planner/plan_text.h"
#include "planner/tune.h"

namespace popkit::planner {
namespace {

constexpr std::size_t kWidth = 100;

// Words joined by spaces into lines of at most `width` columns (a longer word alone).
std::vector<std::string> wrap(const std::vector<std::string>& words, std::size_t width) {
  std::vector<std::string> lines(1);
  for (const std::string& w : words) {
    if (!lines.back().empty() && lines.back().size() + 1 + w.size() > width) lines.emplace_back();
    lines.back() += (lines.back().empty() ? "" : " ") + w;
  }
  return lines;
}

void print_json(std::ostream& out, const TuneResult& r) {
  nlohmann::ordered_json j;
  j["device_profile"] = r.device_profile;
  j["memory_per_replica"] = r.memory_per_replica;
  j["planned"] = r.n_planned;
  j["skipped"] = r.n_skipped;
  j["combinations"] = r.n_combinations;
  j["thinned"] = r.thinned;
  j["pipelined_limit"] = r.pipelined_limit;
  j["rows"] = r.n_rows;
  j["candidates"] = nlohmann::ordered_json::array();
  for (const TuneCandidate& c : r.fits)
    j["candidates"].push_back({{"rank", c.row},
                               {"samples_per_second", c.samples_per_second},
                               {"peak_bytes", c.peak_bytes},
                               {"pareto", c.pareto},
                               {"settings", c.settings},
                               {"changes", c.changes}});
  if (r.advice) j["advice"] = fit_advice_json(*r.advice);
  out << j.dump(1) << '\n';
}

}  // namespace

void print_tune(std::ostream& out, const TuneResult& r, bool json, std::size_t top) {
  if (json) return print_json(out, r);
  const std::vector<std::string> first =
      wrap({fmt::format("Ranked for device profile {} at {} per replica:", r.device_profile,
                        format_bytes(r.memory_per_replica)),
            fmt::format("{} of {} candidates fit{}", r.fits.size(), r.n_planned,
                        r.fits.empty() ? "" : fmt::format(", in {} rows", r.n_rows))},
           kWidth);
  fmt::print(out, "{}\n", fmt::join(first, "\n  "));
  if (r.n_skipped > 0)
    fmt::print(out,
               "  {} more were not planned: each has a larger micro-batch than one that does not "
               "fit\n",
               r.n_skipped);
  if (!r.thinned.empty()) {
    fmt::print(
        out,
        "  the search has {} combinations, more than --max-combinations{} ({}): it tried only\n",
        format_thousands(static_cast<double>(r.n_combinations)),
        r.cap_for_layers ? fmt::format(" allows for {} layers", r.n_layers) : "",
        format_thousands(static_cast<double>(r.combinations_cap)));
    for (const std::string& t : r.thinned) fmt::print(out, "    {}\n", t);
  }
  if (!r.pipelined_limit.empty()) {
    fmt::print(out, "  pipelined, it tried at most {} micro-batches a step:\n",
               format_thousands(static_cast<double>(kTunePipelinedAccumulation)));
    for (const std::string& t : r.pipelined_limit) fmt::print(out, "    {}\n", t);
  }
  if (r.fits.empty()) return;
  fmt::print(out,
             "  a row is the candidates within 1% of its fastest or of the one it is shown by, "
             "the one\n  with the fewest changes to the config (Alike); * marks the Pareto front "
             "of peak memory\n  against samples/s\n");
  if (!r.request_changes.empty())
    fmt::print(out, "  every row changes {} as asked; the rows show what else they change\n",
               fmt::join(r.request_changes, " "));
  out << '\n';
  const std::string head =
      fmt::format("{:>4}  {:>11}  {:>10}    {:>5}  ", "Rank", "Samples/s", "Peak", "Alike");
  fmt::print(out, "{}Changes\n", head);
  const std::string indent(head.size(), ' ');
  for (std::size_t i = 0; i < r.fits.size();) {
    const TuneCandidate& c = r.fits[i];
    if (top > 0 && c.row > top) {
      const std::size_t more = r.n_rows - top;
      fmt::print(out, "  {} more row{}: --top 0 lists them all\n", more, more == 1 ? "" : "s");
      break;
    }
    std::size_t alike = 0;
    while (i + alike < r.fits.size() && r.fits[i + alike].row == c.row) ++alike;
    i += alike;
    std::vector<std::string> changes;
    for (const std::string& change : c.changes)
      if (std::find(r.request_changes.begin(), r.request_changes.end(), change) ==
          r.request_changes.end())
        changes.push_back(change);
    const std::vector<std::string> lines =
        changes.empty() ? std::vector<std::string>{"(nothing else: the config as it is)"}
                        : wrap(changes, kWidth - head.size());
    // Slow rows (a GPT-2 XL step on 16 IPUs) with the digits that tell them apart.
    fmt::print(out, "{:>4}  {:>11}  {:>10} {} {:>5}  {}\n", c.row,
               format_rate(c.samples_per_second), format_bytes(c.peak_bytes),
               c.row_on_front ? " *" : "  ", alike, lines.front());
    for (std::size_t l = 1; l < lines.size(); ++l) fmt::print(out, "{}{}\n", indent, lines[l]);
  }
}

}  // namespace popkit::planner
