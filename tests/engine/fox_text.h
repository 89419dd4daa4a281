// The text the engine's GPT tests train on: a line of English repeated, cut into windows
// of kFoxSequence tokens (engine/data/text_dataset.h), byte-level text a small model
// learns fast, as the training split and the validation split.
#pragma once

#include <cstdint>
#include <string>

#include "engine/data/dataset.h"
#include "engine/data/text_dataset.h"

namespace popkit::engine::test {

inline constexpr std::int64_t kFoxSequence = 16;

inline const TextCorpus& fox_corpus() {
  static const TextCorpus c = [] {
    const std::string line =
        "the quick brown fox jumps over the lazy dog while the cat sleeps by the fire. ";
    std::string text;
    for (int i = 0; i < 60; ++i) text += line;
    return parse_text(text, "fox.txt", kFoxSequence);
  }();
  return c;
}

inline const Dataset& fox_train_set() {
  static const Dataset d = text_window_set(fox_corpus(), Split::kTrain, kFoxSequence);
  return d;
}

inline const Dataset& fox_validation_set() {
  static const Dataset d = text_window_set(fox_corpus(), Split::kTest, kFoxSequence);
  return d;
}

}  // namespace popkit::engine::test
