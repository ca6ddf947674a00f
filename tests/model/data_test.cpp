// data_test.cpp — the synthetic task: sample g is a pure function of (seed, g), so every world
// size cuts the same data stream; labels are in range; the formula is the documented one.
#include "model/data.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/rng.hpp"

namespace zl {
namespace {

TEST(ClassificationTask, SampleIsTheSameHoweverBatchesAreCut) {
  const ClassificationTask task{.features = 5, .classes = 4, .seed = 3, .noise = 0.5f};
  const std::int64_t total = 48;
  const Batch whole = task.batch(0, total);
  ASSERT_EQ(whole.rows, total);
  ASSERT_EQ(whole.x.size(), static_cast<std::size_t>(total * 5));
  // Micro-batches of 4, 6 or 12 rows, as W = 12, 8 or 4 ranks would draw them in one step.
  for (const std::int64_t rows : {4, 6, 12}) {
    for (std::int64_t first = 0; first < total; first += rows) {
      const Batch part = task.batch(first, rows);
      for (std::int64_t b = 0; b < rows; ++b) {
        const std::int64_t g = first + b;
        EXPECT_EQ(part.y[b], whole.y[g]) << "label of sample " << g;
        for (std::int64_t j = 0; j < 5; ++j) {
          EXPECT_EQ(part.x[b * 5 + j], whole.x[g * 5 + j]) << "x[" << g << ", " << j << "]";
        }
      }
    }
  }
}

TEST(ClassificationTask, FollowsTheDocumentedFormula) {
  const ClassificationTask task{.features = 3, .classes = 5, .seed = 8, .noise = 0.25f};
  const Batch batch = task.batch(10, 4);
  for (std::int64_t b = 0; b < 4; ++b) {
    const std::uint64_t g = 10 + b;
    const std::uint64_t y = uniform_below(8, stream_of("data.label"), g, 5);
    EXPECT_EQ(batch.y[b], static_cast<std::int64_t>(y));
    for (std::uint64_t j = 0; j < 3; ++j) {
      const float center = standard_normal(8, stream_of("data.center"), y * 3 + j);
      const float noise = standard_normal(8, stream_of("data.noise"), g * 3 + j);
      EXPECT_EQ(batch.x[b * 3 + j], center + 0.25f * noise);
    }
  }
}

TEST(ClassificationTask, LabelsAreInRangeAndUseEveryClass) {
  const ClassificationTask task{.features = 2, .classes = 7, .seed = 1};
  const Batch batch = task.batch(0, 700);
  std::vector<int> counts(7, 0);
  for (const auto label : batch.y) {
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 7);
    ++counts[label];
  }
  // 100 expected per class; binomial standard deviation ~9.3, so 50 is over five sigmas away.
  for (int c = 0; c < 7; ++c) EXPECT_GT(counts[c], 50) << "class " << c;
}

TEST(ClassificationTask, DifferentSeedsGiveDifferentData) {
  const Batch a = ClassificationTask{.seed = 1}.batch(0, 16);
  const Batch b = ClassificationTask{.seed = 2}.batch(0, 16);
  EXPECT_NE(a.x, b.x);
  EXPECT_NE(a.y, b.y);
  EXPECT_EQ(a.x, ClassificationTask{.seed = 1}.batch(0, 16).x);
}

TEST(ClassificationTask, FirstSampleOfLaysStepsOutRankByRank) {
  // Step t, rank r of W, micro-batch B starts at (t W + r) B: consecutive ranks, then steps.
  EXPECT_EQ(first_sample_of(0, 0, 4, 8), 0);
  EXPECT_EQ(first_sample_of(0, 3, 4, 8), 24);
  EXPECT_EQ(first_sample_of(1, 0, 4, 8), 32);
  EXPECT_EQ(first_sample_of(2, 1, 2, 5), 25);
}

}  // namespace
}  // namespace zl
