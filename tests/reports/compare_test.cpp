// The comparison's rows and the CI gate: parsing, both directions, the messages.
#include "reports/compare.h"

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <sstream>

#include "reports/input_error.h"
#include "tests/reports/golden.h"

namespace r = popkit::reports;
using r::testing::fixtures;

namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const r::InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(compare)

BOOST_AUTO_TEST_CASE(rows_take_the_measured_figures_of_runs) {
  const auto c = r::compare(fixtures({"base.json", "nosharding.json"}), {}, "");
  BOOST_TEST_REQUIRE(c.rows.size() == 2u);
  BOOST_TEST(c.rows[0].name == "base");
  BOOST_TEST(c.rows[0].throughput == 640.0);
  BOOST_TEST(c.rows[0].execution_time == 0.1);  // median of 0.1, 0.125, 0.08, 0.1
  BOOST_TEST(c.rows[0].peak_memory == 1606656u);
  BOOST_TEST(c.rows[1].sharding_threshold == 0);
  BOOST_TEST(c.rows[1].peak_memory == 1606656u + 802816u + 1024u);  // replica 1's peak
  BOOST_TEST(c.rows[1].streaming_memory == 4931584u);
}

BOOST_AUTO_TEST_CASE(gates_parse) {
  const r::Gate g = r::parse_gate("throughput < -5%");
  BOOST_TEST((g.metric == r::Metric::kThroughput));
  BOOST_TEST(g.less);
  BOOST_TEST(g.percent == -5.0);
  const r::Gate h = r::parse_gate(" peak_memory>+2.5% ");
  BOOST_TEST((h.metric == r::Metric::kPeakMemory));
  BOOST_TEST(!h.less);
  BOOST_TEST(h.percent == 2.5);
  BOOST_TEST(message_of([] { r::parse_gate("throughput -5%"); }) ==
             "--fail-if 'throughput -5%': want METRIC < PERCENT or METRIC > PERCENT, e.g. "
             "'throughput < -5%'");
  BOOST_TEST(message_of([] { r::parse_gate("speed < -5%"); }) ==
             "--fail-if 'speed < -5%': unknown metric \"speed\" (throughput, execution_time, "
             "peak_memory, streaming_memory)");
}

BOOST_AUTO_TEST_CASE(gate_bounds_beyond_a_double_are_input_errors) {
  const std::string ones(400, '1');
  BOOST_TEST(message_of([&] { r::parse_gate("throughput < " + ones + "%"); }) ==
             "--fail-if 'throughput < " + ones + "%': " + ones + "% is out of range");
  BOOST_TEST(message_of([&] { r::parse_gate("throughput > -" + ones + ".5%"); }) ==
             "--fail-if 'throughput > -" + ones + ".5%': -" + ones + ".5% is out of range");
  BOOST_TEST(r::parse_gate("throughput > 1" + std::string(300, '0') + "%").percent == 1e300);
}

BOOST_AUTO_TEST_CASE(gates_take_any_amount_of_space) {
  const std::string spaces(100000, ' ');
  const r::Gate g = r::parse_gate(spaces + "streaming_memory" + spaces + "<" + spaces + "-0.25" +
                                  spaces + "%" + spaces);
  BOOST_TEST((g.metric == r::Metric::kStreamingMemory));
  BOOST_TEST(g.less);
  BOOST_TEST(g.percent == -0.25);
  for (const char* bad :
       {"", "%", "throughput <", "throughput < %", "throughput < 5", "throughput < 5.%",
        "throughput < .5%", "throughput < 5%%", "throughput < +-5%", "Throughput < 5%",
        "throughput =< 5%", "throughput < 5 %x", "throughput < 1e3%"}) {
    BOOST_TEST(message_of([&] { r::parse_gate(bad); }) ==
                   fmt::format("--fail-if '{}': want METRIC < PERCENT or METRIC > PERCENT, e.g. "
                               "'throughput < -5%'",
                               bad),
               bad);
  }
}

BOOST_AUTO_TEST_CASE(gate_messages_show_byte_figures_exactly) {
  // The largest byte count did not survive a trip through double (undefined behaviour).
  r::Comparison c;
  c.rows.resize(2);
  c.rows[0] = {"base", r::SourceKind::kRun, 0, 100.0, 0.5, 1000, 10, "measured on CPU", "CPU"};
  c.rows[1] = {"big",
               r::SourceKind::kRun,
               0,
               100.0,
               0.5,
               18446744073709551615u,
               18446744073709549568u,
               "measured on CPU",
               "CPU"};
  BOOST_TEST(r::check_gates(c, {r::parse_gate("peak_memory > +2%"),
                                r::parse_gate("streaming_memory > +2%")}) ==
                 (std::vector<std::string>{
                     "big: peak_memory +1844674407370955264.0% > +2% (17179869184.00 GiB vs "
                     "1000 B of baseline base)",
                     "big: streaming_memory +184467440737095516160.0% > +2% (17179869184.00 GiB "
                     "vs 10 B of baseline base)"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(gate_fails_a_row_that_falls_short_and_says_by_how_much) {
  const auto c = r::compare(fixtures({"base.json", "nosharding.json", "fast.json"}), {}, "");
  const auto failures =
      r::check_gates(c, {r::parse_gate("throughput < -5%"), r::parse_gate("peak_memory > +2%")});
  BOOST_TEST_REQUIRE(failures.size() == 2u);
  BOOST_TEST(failures[0] ==
             "nosharding: throughput -20.0% < -5% (512.0 samples/s vs 640.0 samples/s of "
             "baseline base)");
  BOOST_TEST(failures[1] ==
             "nosharding: peak_memory +50.0% > +2% (2.30 MiB vs 1.53 MiB of baseline base)");
}

BOOST_AUTO_TEST_CASE(gate_passes_rows_within_the_bound) {
  const auto c = r::compare(fixtures({"base.json", "fast.json"}), {}, "");
  BOOST_TEST(
      r::check_gates(c, {r::parse_gate("throughput < -5%"), r::parse_gate("peak_memory > +2%")})
          .empty());
  // Against `fast`, `base` is 3.0% slower: inside -5%, outside -2%.
  const auto d = r::compare(fixtures({"base.json", "fast.json"}), {}, "fast");
  BOOST_TEST(r::check_gates(d, {r::parse_gate("throughput < -5%")}).empty());
  const auto failures = r::check_gates(d, {r::parse_gate("throughput < -2%")});
  BOOST_TEST_REQUIRE(failures.size() == 1u);
  BOOST_TEST(failures[0] ==
             "base: throughput -3.0% < -2% (640.0 samples/s vs 660.0 samples/s of baseline fast)");
}

BOOST_AUTO_TEST_CASE(bad_names_and_baselines_are_input_errors) {
  const auto sources = fixtures({"base.json", "fast.json"});
  BOOST_TEST(message_of([&] { r::compare(sources, {"a"}, ""); }) == "--names: 1 names for 2 files");
  BOOST_TEST(message_of([&] {
               r::compare(sources, {"a", "a"}, "");
             }) == "two rows are named \"a\"; name them with --names a,b,...");
  BOOST_TEST(message_of([&] { r::compare(sources, {}, "nope"); }) ==
             "--baseline: no row is named \"nope\" (rows: base, fast)");
}

// runs/a/run.json and runs/b/run.json: the stems collide, so the rows take the folders'
// names; a stem that is unique keeps its own.
// A run folder's run.json is named by its config's name and the folder's stamp (all
// were "run", then the bare stamp); other files by their stems; a clash by the paths.
BOOST_AUTO_TEST_CASE(runs_are_named_by_config_name_and_stamp) {
  const auto json = r::read_json_file(r::testing::data_dir() + "/base.json");
  const std::vector<r::Source> sources = {
      r::source_from_json(json, "runs/tiny-phased/20261127-181002/run.json"),
      r::source_from_json(json, "runs/tiny-phased/20261127-181355/run.json"),
      r::source_from_json(json, "runs/c/other.json")};
  const auto c = r::compare(sources, {}, "");
  BOOST_TEST_REQUIRE(c.rows.size() == 3u);
  BOOST_TEST(c.rows[0].name == "tiny-phased/20261127-181002");
  BOOST_TEST(c.rows[1].name == "tiny-phased/20261127-181355");
  BOOST_TEST(c.rows[2].name == "other");
  const std::vector<r::Source> same_folder = {r::source_from_json(json, "x/a/run.json"),
                                              r::source_from_json(json, "y/a/run.json")};
  const auto d = r::compare(same_folder, {}, "");
  BOOST_TEST(d.rows[0].name == "x/a/run.json");
  BOOST_TEST(d.rows[1].name == "y/a/run.json");
}

// Runs show their final training loss and test figures; a row whose model differs from
// the baseline's is warned about, naming the keys (there was neither).
BOOST_AUTO_TEST_CASE(runs_show_loss_and_accuracy_and_other_models_are_warned_of) {
  auto sources = fixtures({"base.json", "nosharding.json"});
  sources[0].record.config["model"] = {{"input_shape", {28, 28}},
                                       {"layers", {{{"out_features", 4}}}}};
  sources[1].record.config["model"] = sources[0].record.config["model"];
  sources[1].record.config["model"]["layers"][0]["out_features"] = 7;
  const auto c = r::compare(sources, {}, "");
  BOOST_TEST_REQUIRE(c.rows[0].final_loss.has_value());
  BOOST_TEST(*c.rows[0].final_loss == sources[0].record.loss.back());
  BOOST_TEST_REQUIRE(c.rows[0].test_accuracy.has_value());
  BOOST_TEST(*c.rows[0].test_accuracy == sources[0].record.test->accuracy);
  const auto notes = r::model_notes(c);
  BOOST_TEST_REQUIRE(notes.size() == 1u);
  BOOST_TEST(notes[0] ==
             "warning: \"nosharding\" trains another model than the baseline \"base\" "
             "(model.layers differ): their losses and accuracies do not compare");
  std::ostringstream out;
  r::write_report(r::compare_report(c), r::Format::kWide, out);
  const std::string text = out.str();
  BOOST_TEST(text.find("Final loss") != std::string::npos);
  BOOST_TEST(text.find("Test accuracy") != std::string::npos);
  BOOST_TEST(text.find("91.25%") != std::string::npos);
  BOOST_TEST(text.find("trains another model") != std::string::npos);
  sources[1].record.config = sources[0].record.config;
  BOOST_TEST(r::model_notes(r::compare(sources, {}, "")).empty());
}

// A plan's estimate for an IPU and a run's CPU measurement: no time ratio; a time gate
// that therefore checks no row fails, saying so (it passed, silently); memory still
// compares.
BOOST_AUTO_TEST_CASE(plans_and_runs_compare_times_only_like_with_like) {
  const auto c = r::compare(fixtures({"quick_plan.json", "base.json"}), {}, "");
  BOOST_TEST(c.rows[0].time_basis == "estimate for ipu-mk2");
  BOOST_TEST(c.rows[1].time_basis == "measured on CPU");
  BOOST_TEST(!r::times_comparable(c.rows[0], c.rows[1]));
  const auto time_gate = r::check_gates(c, {r::parse_gate("throughput < -5%")});
  BOOST_TEST_REQUIRE(time_gate.size() == 1u);
  BOOST_TEST(time_gate[0] ==
             "'throughput < -5%' checked no row: every row's ratio is n/a, timed otherwise than "
             "the baseline \"quick_plan\" (estimate for ipu-mk2); compare like with like");
  BOOST_TEST(r::check_gates(c, {r::parse_gate("peak_memory > +2%")}).size() == 1u);
  // One file: the gate has nothing to compare either.
  const auto alone = r::compare(fixtures({"base.json"}), {}, "");
  BOOST_TEST(r::check_gates(alone, {r::parse_gate("peak_memory > +2%")}) ==
                 std::vector<std::string>{"'peak_memory > +2%' checked no row: there is only the "
                                          "baseline \"base\"; give files to compare with it"},
             boost::test_tools::per_element());
}

// A plan priced with a CPU's profile (`poprun calibrate`'s, or the built-in cpu)
// estimates what poprun measures: its time compares with a run's, and gates apply.
BOOST_AUTO_TEST_CASE(a_cpu_estimate_compares_with_a_cpu_run) {
  auto sources = fixtures({"quick_plan.json", "base.json"});
  sources[0].record.plan.device_profile = "cpu-calibrated";
  sources[0].record.plan.device_kind = "cpu";
  const auto c = r::compare(sources, {}, "");
  BOOST_TEST(c.rows[0].time_basis == "estimate for CPU (cpu-calibrated)");
  BOOST_TEST(r::times_comparable(c.rows[0], c.rows[1]));
  BOOST_TEST(r::check_gates(c, {r::parse_gate("throughput < -5%")}).size() == 1u);
}

// A run on CPUs placed otherwise than when the estimate's profile was measured (a
// virtual machine moved them between the host's caches: a round trip 2x or more away) is
// named in a note, against the baseline plan's profile or else its own; within 2x, or
// unmeasured, nothing is said.
BOOST_AUTO_TEST_CASE(a_run_on_cpus_placed_otherwise_is_named) {
  auto sources = fixtures({"quick_plan.json", "base.json", "fast.json"});
  sources[0].record.plan.device_kind = "cpu";
  sources[0].record.plan.device_core_round_trip_seconds = 60e-9;
  const auto notes = [&] { return r::machine_notes(r::compare(sources, {}, "")); };
  BOOST_TEST(notes().empty());  // the runs measured nothing
  sources[1].record.environment.core_round_trip_start_seconds = 58e-9;
  sources[1].record.environment.core_round_trip_end_seconds = 331e-9;  // moved during the run
  sources[2].record.environment.core_round_trip_start_seconds = 70e-9;
  sources[2].record.environment.core_round_trip_end_seconds = 110e-9;  // within 2x
  auto n = notes();
  BOOST_TEST_REQUIRE(n.size() == 1u);
  BOOST_TEST(n[0].find("run \"base\" ran with its CPUs placed otherwise") == 0u, n[0]);
  BOOST_TEST(n[0].find("58 ns as its steps began and 331 ns as they ended, against 60 ns") !=
                 std::string::npos,
             n[0]);
  BOOST_TEST(n[0].find("the baseline's (\"quick_plan\")") != std::string::npos, n[0]);
  // The report carries it.
  const auto report = r::compare_report(r::compare(sources, {}, ""));
  BOOST_TEST(std::count(report.tables[0].notes.begin(), report.tables[0].notes.end(), n[0]) == 1);
  // Without a measured baseline, each run against the profile it ran with.
  sources[0].record.plan.device_core_round_trip_seconds = 0;
  sources[2].record.plan.device_core_round_trip_seconds = 330e-9;
  n = notes();
  BOOST_TEST_REQUIRE(n.size() == 1u);
  BOOST_TEST(n[0].find("run \"fast\"") == 0u, n[0]);
  BOOST_TEST(n[0].find("when its profile was measured") != std::string::npos, n[0]);
}

// Likewise a run with another share of the host's last-level cache than when the
// estimate's profile was measured: any of its cache probes (at its start, between its
// steps, at its end) 1.3x or more away, slower or faster; within 1.3x, or unmeasured,
// nothing is said.
BOOST_AUTO_TEST_CASE(a_run_with_another_share_of_the_cache_is_named) {
  auto sources = fixtures({"quick_plan.json", "base.json", "fast.json"});
  sources[0].record.plan.device_kind = "cpu";
  sources[0].record.plan.device_cache_probe_seconds = 130e-6;
  const auto notes = [&] { return r::machine_notes(r::compare(sources, {}, "")); };
  const auto probed = [&](std::size_t i, std::initializer_list<double> probes) {
    sources[i].record.environment.cache_probes = {};
    for (const double p : probes) sources[i].record.environment.cache_probes.add(p);
  };
  BOOST_TEST(notes().empty());          // the runs measured nothing
  probed(1, {128e-6, 250e-6, 131e-6});  // the cache taken between its steps
  probed(2, {140e-6, 105e-6});          // within 1.3x
  auto n = notes();
  BOOST_TEST_REQUIRE(n.size() == 1u);
  BOOST_TEST(n[0].find("run \"base\" ran with another share of the host's last-level cache") == 0u,
             n[0]);
  BOOST_TEST(
      n[0].find("128 to 250 µs over its steps (3 probes), against 130 µs") != std::string::npos,
      n[0]);
  const auto report = r::compare_report(r::compare(sources, {}, ""));
  BOOST_TEST(std::count(report.tables[0].notes.begin(), report.tables[0].notes.end(), n[0]) == 1);
  // A probe faster than the profile's: the profile was measured with less of the cache.
  probed(1, {128e-6, 131e-6});
  probed(2, {90e-6, 105e-6});
  n = notes();
  BOOST_TEST_REQUIRE(n.size() == 1u);
  BOOST_TEST(n[0].find("run \"fast\"") == 0u, n[0]);
  // The baseline plan's profile has no probe: each run against its own profile's.
  sources[0].record.plan.device_cache_probe_seconds = 0;
  BOOST_TEST(notes().empty());
  sources[1].record.plan.device_cache_probe_seconds = 95e-6;
  n = notes();
  BOOST_TEST_REQUIRE(n.size() == 1u);
  BOOST_TEST(n[0].find("run \"base\"") == 0u, n[0]);
  BOOST_TEST(n[0].find("when its profile was measured") != std::string::npos, n[0]);
}

BOOST_AUTO_TEST_SUITE_END()
