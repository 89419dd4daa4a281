// The progress bar: epoch i/N and the percentage, and a line that fits the terminal's
// width whatever it is (a bar wider than the terminal wraps, and every redraw then adds
// a line).
#include "runner/progress.h"

#include <boost/test/unit_test.hpp>
#include <sstream>

using namespace popkit::runner;

namespace {

ProgressTick tick() {
  ProgressTick t;
  t.epoch = 1;
  t.n_epochs = 2;
  t.step = 750;
  t.total_steps = 3000;
  t.elapsed_seconds = 10.0;
  t.global_batch_size = 64;
  t.loss = 0.5;
  return t;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(progress)

BOOST_AUTO_TEST_CASE(text_shows_the_epochs_and_the_percentage) {
  BOOST_TEST(progress_text(tick()) ==
             "epoch 1/2 step 750/3000 25% 00:10<00:30 75.0 steps/s 4,800 samples/s loss 0.5000");
}

BOOST_AUTO_TEST_CASE(a_run_limited_by_steps_knows_its_last_epoch) {
  BOOST_TEST(last_epoch(0, 0, 200, 1875) == 1);
  BOOST_TEST(last_epoch(0, 0, 1875, 1875) == 1);
  BOOST_TEST(last_epoch(0, 0, 1876, 1875) == 2);
  BOOST_TEST(last_epoch(2, 1870, 10, 1875) == 4);  // resumed near an epoch's end
  BOOST_TEST(last_epoch(0, 0, 0, 1875) == 0);
}

BOOST_AUTO_TEST_CASE(the_bar_fits_the_width_and_never_wraps) {
  const std::string text = progress_text(tick());
  BOOST_TEST(progress_bar_line(tick(), 120) == "[======>                 ] " + text);
  for (const int columns : {120, 100, 80, 60, 40, 20, 1}) {
    const std::string line = progress_bar_line(tick(), columns);
    BOOST_TEST(line.size() <= static_cast<std::size_t>(std::max(columns - 1, 1)), columns);
  }
  // 60 columns: no room for a bar beside the whole text; the rates go first.
  const std::string compact = compact_progress_text(tick());
  BOOST_TEST(compact == "epoch 1/2 step 750/3000 25% 00:10<00:30 loss 0.5000");
  BOOST_TEST(progress_bar_line(tick(), 70) == "[===>           ] " + compact);
  BOOST_TEST(progress_bar_line(tick(), 60) == compact);
  BOOST_TEST(progress_bar_line(tick(), 20) == compact.substr(0, 19));
  // A bar as narrow as the width demands.
  const std::string narrow = progress_bar_line(tick(), static_cast<int>(text.size()) + 16);
  BOOST_TEST(narrow == "[===>        ] " + text);
}

BOOST_AUTO_TEST_CASE(redraws_end_with_erase_to_end_of_line) {
  std::ostringstream out;
  {
    Progress p(out, ProgressStyle::kBar, 40);
    ProgressTick t = tick();
    t.step = t.total_steps;
    p.update(t);
  }
  const std::string s = out.str();
  BOOST_TEST(s.front() == '\r');
  BOOST_TEST(s.find("\x1b[K") == s.size() - 4);  // then the finishing newline
  BOOST_TEST(s.size() - 5 <= 39u);
}

BOOST_AUTO_TEST_SUITE_END()
