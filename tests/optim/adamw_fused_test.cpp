// adamw_fused_test.cpp — the fused, vectorized, multi-threaded AdamW (optim/adamw_fused.hpp)
// against the reference kernel (optim/adamw.hpp): the same bits for every size (0, 1, odd, not a
// multiple of any vector width), every value (denormals, infinities, NaN included), every step,
// every thread count and chunk size (a NaN result is NaN in both, its payload aside). Speed lives
// in tests/bench and `zerolab bench adam`.
#include "optim/adamw_fused.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "optim/adamw.hpp"

namespace zl {
namespace {

// Any float: ordinary magnitudes, raw bit patterns (every class, NaN payloads too), and the edge
// values themselves.
rc::Gen<float> gen_any_float() {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  return rc::gen::weightedOneOf<float>({
      {6, rc::gen::map(rc::gen::inRange(-1000000, 1000000), [](int x) { return x * 1e-5f; })},
      {2, rc::gen::map(rc::gen::arbitrary<std::uint32_t>(),
                       [](std::uint32_t bits) { return std::bit_cast<float>(bits); })},
      {2, rc::gen::element(0.0f, -0.0f, kInf, -kInf, std::numeric_limits<float>::quiet_NaN(),
                           std::numeric_limits<float>::denorm_min(),
                           -std::numeric_limits<float>::denorm_min(),
                           std::numeric_limits<float>::min() / 3.0f,
                           std::numeric_limits<float>::max(), -std::numeric_limits<float>::max())},
  });
}

struct AdamInputs {
  std::vector<float> params, grads, exp_avg, exp_avg_sq;
};

rc::Gen<AdamInputs> gen_inputs() {
  return rc::gen::mapcat(rc::gen::inRange<std::size_t>(0, 3000), [](std::size_t elems) {
    const auto values = rc::gen::container<std::vector<float>>(elems, gen_any_float());
    return rc::gen::build<AdamInputs>(
        rc::gen::set(&AdamInputs::params, values), rc::gen::set(&AdamInputs::grads, values),
        rc::gen::set(&AdamInputs::exp_avg, values), rc::gen::set(&AdamInputs::exp_avg_sq, values));
  });
}

// "" when the arrays hold the same bits, else the first differing element with both values.
// A NaN matches any NaN: x86 returns the payload and sign of one NaN operand, and the compiler
// may order the operands of a commutative operation differently in the two kernels (it does
// under the sanitizers' -O2), so NaN bits are not part of the promise.
std::string first_difference(const char* what, const std::vector<float>& fused,
                             const std::vector<float>& reference) {
  for (std::size_t i = 0; i < reference.size(); ++i) {
    const auto a = std::bit_cast<std::uint32_t>(fused[i]);
    const auto b = std::bit_cast<std::uint32_t>(reference[i]);
    if (a != b && !(std::isnan(fused[i]) && std::isnan(reference[i]))) {
      return fmt::format("{}[{}]: fused {} (0x{:08x}), reference {} (0x{:08x})", what, i, fused[i],
                         a, reference[i], b);
    }
  }
  return "";
}

RC_GTEST_PROP(AdamWFused, prop_fused_is_bitwise_the_reference, ()) {
  const AdamInputs inputs = *gen_inputs();
  const AdamWConfig config{
      .lr = *rc::gen::element(1e-4, 1e-3, 3e-2, 0.5),
      .beta1 = *rc::gen::element(0.9, 0.8, 0.0),
      .beta2 = *rc::gen::element(0.999, 0.95, 0.5),
      .eps = *rc::gen::element(1e-8, 1e-6, 1e-3),
      .weight_decay = *rc::gen::element(0.01, 0.0, 0.1, 1.0),
  };
  const std::int64_t step = *rc::gen::inRange<std::int64_t>(1, 1000000);
  const int threads = *rc::gen::inRange(1, 9);
  const std::size_t min_elems_per_thread = *rc::gen::inRange<std::size_t>(1, 200);
  RC_TAG(threads);
  const AdamWScalars scalars = adamw_scalars(config, step);

  AdamInputs reference = inputs;
  adamw_update(reference.params, reference.grads, reference.exp_avg, reference.exp_avg_sq, scalars);
  AdamInputs fused = inputs;
  adamw_update_fused(fused.params, fused.grads, fused.exp_avg, fused.exp_avg_sq, scalars, threads,
                     min_elems_per_thread);

  RC_ASSERT(first_difference("params", fused.params, reference.params) == std::string());
  RC_ASSERT(first_difference("exp_avg", fused.exp_avg, reference.exp_avg) == std::string());
  RC_ASSERT(first_difference("exp_avg_sq", fused.exp_avg_sq, reference.exp_avg_sq) ==
            std::string());
}

// Large enough that the default minimum chunk splits it over every thread.
TEST(AdamWFused, ManyThreadsOnALargeSpanAreBitwiseTheReference) {
  const std::size_t elems = 8 * kAdamMinElemsPerThread + 37;
  AdamInputs inputs;
  for (std::size_t i = 0; i < elems; ++i) {
    const auto x = static_cast<float>(i % 1013) - 506.0f;
    inputs.params.push_back(x * 1e-3f);
    inputs.grads.push_back(std::sin(x) * 1e-2f);
    inputs.exp_avg.push_back(x * 1e-5f);
    inputs.exp_avg_sq.push_back(x * x * 1e-8f);
  }
  const AdamWScalars scalars = adamw_scalars(AdamWConfig{}, 7);
  AdamInputs reference = inputs;
  adamw_update(reference.params, reference.grads, reference.exp_avg, reference.exp_avg_sq, scalars);
  for (const int threads : {1, 2, 3, 8}) {
    AdamInputs fused = inputs;
    adamw_update_fused(fused.params, fused.grads, fused.exp_avg, fused.exp_avg_sq, scalars,
                       threads);
    EXPECT_EQ(first_difference("params", fused.params, reference.params), "") << threads;
    EXPECT_EQ(first_difference("exp_avg", fused.exp_avg, reference.exp_avg), "") << threads;
    EXPECT_EQ(first_difference("exp_avg_sq", fused.exp_avg_sq, reference.exp_avg_sq), "")
        << threads;
  }
}

TEST(AdamWFused, SpansOfDifferentSizesAreAnError) {
  std::vector<float> params(4), grads(3), exp_avg(4), exp_avg_sq(4);
  EXPECT_THROW(
      adamw_update_fused(params, grads, exp_avg, exp_avg_sq, adamw_scalars(AdamWConfig{}, 1), 2),
      Error);
}

}  // namespace
}  // namespace zl
