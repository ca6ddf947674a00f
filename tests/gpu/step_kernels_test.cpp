// step_kernels_test.cpp — the CUDA Device's memory calls and step work (ops/device.hpp) against the
// CPU Device, bit for bit: copies round trip, fill_zero, convert between every pair of training
// dtypes on every 16-bit pattern and on fp32 specials (NaN payloads, infinities, subnormals, ties),
// add in each dtype, scale, divide, round_to, the gradient norm's block sums of squares and AdamW. Results of
// arithmetic on NaN match any NaN (the GPU makes NaN canonical); conversions match every bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "gpu_test_support.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "optim/adamw.hpp"
#include "optim/grad_norm.hpp"

namespace zl {
namespace {

using test::download_bytes;
using test::first_difference;
using test::upload_bytes;
using test::value_at;

constexpr DType kTrainingDtypes[] = {DType::F32, DType::BF16, DType::F16};

// fp32 values that exercise every rounding rule: random magnitudes and bit patterns, NaN with
// payloads and signs, infinities, zeros, fp32 and fp16 subnormals, bf16 and fp16 ties, overflow.
std::vector<float> float_specials(std::uint32_t seed) {
  std::vector<float> values = test::random_floats(4000, seed, -1e5f, 1e5f);
  std::mt19937 engine(seed);
  for (int i = 0; i < 4000; ++i)
    values.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(engine())));
  using limits = std::numeric_limits<float>;
  // Infinities, signed zeros, NaN: quiet, negative with a payload, signalling.
  values.insert(values.end(),
                {limits::infinity(), -limits::infinity(), 0.0f, -0.0f, limits::quiet_NaN(),
                 std::bit_cast<float>(0xFFC00001u), std::bit_cast<float>(0x7F800001u)});
  // fp32 subnormals, the smallest normal, the largest float (bf16 rounds it to infinity), -3e38.
  values.insert(values.end(),
                {limits::denorm_min(), -1e-40f, limits::min(), limits::max(), -3.0e38f});
  // A bf16 tie (1 + 2^-8) and an fp16 tie (1 + 2^-11), both to even; fp16's largest value, the
  // last value below the tie that rounds to infinity, and that tie.
  values.insert(values.end(), {1.00390625f, 1.00048828125f, 65504.0f, 65519.0f, 65520.0f});
  // fp16 subnormals: the smallest, half of it (a tie to zero), 1.5 times it, the largest, 1e-6.
  values.insert(values.end(), {5.9604645e-8f, 2.9802322e-8f, 8.940697e-8f, 6.097555e-5f, 1e-6f});
  return values;
}

// Every bit pattern of a 16-bit dtype (all NaN payloads, subnormals and infinities included).
std::vector<std::byte> every_16_bit_pattern() {
  std::vector<std::byte> bytes(std::size_t{65536} * 2);
  for (std::uint32_t v = 0; v < 65536; ++v) {
    const auto bits = static_cast<std::uint16_t>(v);
    std::memcpy(bytes.data() + 2 * v, &bits, 2);
  }
  return bytes;
}

// `values` stored as `dtype` (the host's rounding).
std::vector<std::byte> stored_as(const std::vector<float>& values, DType dtype) {
  CpuDevice cpu;
  std::vector<std::byte> bytes(values.size() * dtype_bytes(dtype));
  cpu.convert(values.data(), DType::F32, bytes.data(), dtype,
              static_cast<std::int64_t>(values.size()));
  return bytes;
}

// Inputs of `dtype` for convert and add: every pattern of a 16-bit dtype, fp32 specials else.
std::vector<std::byte> inputs_of(DType dtype, std::uint32_t seed) {
  if (dtype == DType::F32) return stored_as(float_specials(seed), DType::F32);
  auto bytes = every_16_bit_pattern();
  // A second input differs from the first: a seeded shuffle of the patterns.
  std::mt19937 engine(seed);
  for (std::size_t i = bytes.size() / 2 - 1; i > 0; --i) {
    const std::size_t j = std::uniform_int_distribution<std::size_t>(0, i)(engine);
    std::swap(bytes[2 * i], bytes[2 * j]);
    std::swap(bytes[2 * i + 1], bytes[2 * j + 1]);
  }
  return bytes;
}

std::size_t elems_of(const std::vector<std::byte>& bytes, DType dtype) {
  return bytes.size() / dtype_bytes(dtype);
}

// Asserts that the device bytes equal the CPU's, printing the first differing element.
void expect_same(const std::vector<std::byte>& gpu, const std::vector<std::byte>& cpu, DType dtype,
                 bool any_nan, const std::string& what) {
  const std::int64_t i = first_difference(gpu, cpu, dtype, any_nan);
  if (i < 0) return;
  const auto index = static_cast<std::size_t>(i);
  ADD_FAILURE() << what << ": first different element " << i << " (gpu "
                << (gpu.size() == cpu.size() ? value_at(gpu, dtype, index) : 0.0) << ", cpu "
                << value_at(cpu, dtype, index) << ", sizes " << gpu.size() << " and " << cpu.size()
                << " bytes)";
}

class GpuStepWork : public ::testing::Test {
 protected:
  void SetUp() override {
    ZL_REQUIRE_GPU();
    gpu_ = std::make_unique<CudaDevice>(0);
  }
  CpuDevice cpu_;
  std::unique_ptr<CudaDevice> gpu_;
};

TEST_F(GpuStepWork, CopiesRoundTripAndFillZeroClearsItsRangeOnly) {
  constexpr std::size_t kBytes = 1001;  // odd: no alignment assumed
  std::vector<std::byte> host(kBytes);
  std::mt19937 engine(70);
  for (auto& byte : host) byte = static_cast<std::byte>(engine() & 0xFFu);
  Buffer a = gpu_->alloc(MemCategory::CommBuffer, DType::F32, {300});
  Buffer b = gpu_->alloc(MemCategory::CommBuffer, DType::F32, {300});
  gpu_->copy_from_host(a.data(), host.data(), kBytes);
  gpu_->copy(static_cast<std::byte*>(b.data()) + 3, a.data(), kBytes);  // queued, not waited
  gpu_->copy(b.data(), b.data(), kBytes);                               // same buffer: nothing
  std::vector<std::byte> back(kBytes);
  gpu_->copy_to_host(back.data(), static_cast<const std::byte*>(b.data()) + 3, kBytes);
  EXPECT_EQ(back, host) << "host -> a -> b (+3 bytes) -> host";

  gpu_->fill_zero(static_cast<std::byte*>(b.data()) + 10, 100);
  std::vector<std::byte> expected(300 * 4, std::byte{0});
  std::memcpy(expected.data() + 3, host.data(), kBytes);
  std::fill(expected.begin() + 10, expected.begin() + 110, std::byte{0});
  EXPECT_EQ(download_bytes(*gpu_, b), expected) << "fill_zero of bytes [10, 110)";

  // Zero bytes touch nothing, even through null pointers.
  gpu_->copy_from_host(nullptr, nullptr, 0);
  gpu_->copy_to_host(nullptr, nullptr, 0);
  gpu_->copy(nullptr, nullptr, 0);
  gpu_->fill_zero(nullptr, 0);
  gpu_->synchronize();
}

TEST_F(GpuStepWork, ConvertGivesTheHostBitsForEveryPair) {
  for (const DType from : kTrainingDtypes) {
    const auto in = inputs_of(from, 71);
    const std::size_t elems = elems_of(in, from);
    Buffer g_in = upload_bytes(*gpu_, in, from, elems);
    for (const DType to : kTrainingDtypes) {
      std::vector<std::byte> cpu_out(elems * dtype_bytes(to));
      cpu_.convert(in.data(), from, cpu_out.data(), to, static_cast<std::int64_t>(elems));
      Buffer g_out = gpu_->alloc(MemCategory::CommBuffer, to, {static_cast<std::int64_t>(elems)});
      gpu_->convert(g_in.data(), from, g_out.data(), to, static_cast<std::int64_t>(elems));
      expect_same(download_bytes(*gpu_, g_out), cpu_out, to, false,
                  std::string("convert ") + std::string(dtype_name(from)) + " -> " +
                      std::string(dtype_name(to)));
    }
  }
}

TEST_F(GpuStepWork, AddGivesTheHostBitsInEachDtype) {
  for (const DType dtype : kTrainingDtypes) {
    const auto acc = inputs_of(dtype, 72), addend = inputs_of(dtype, 73);
    const std::size_t elems = elems_of(acc, dtype);
    Buffer g_acc = upload_bytes(*gpu_, acc, dtype, elems);
    Buffer g_addend = upload_bytes(*gpu_, addend, dtype, elems);
    auto cpu_acc = acc;
    cpu_.add(cpu_acc.data(), addend.data(), dtype, static_cast<std::int64_t>(elems));
    gpu_->add(g_acc.data(), g_addend.data(), dtype, static_cast<std::int64_t>(elems));
    expect_same(download_bytes(*gpu_, g_acc), cpu_acc, dtype, true,
                std::string("add ") + std::string(dtype_name(dtype)));
  }
}

TEST_F(GpuStepWork, ScaleAndDivideGiveTheHostBits) {
  const auto values = float_specials(74);
  for (const float factor : {0.37f, 1.0f / 65536.0f, 3.0e-39f, 1e30f, -2.0f}) {
    std::vector<float> cpu_x = values;
    cpu_.scale(cpu_x, factor);
    Buffer g = test::upload(*gpu_, values);
    gpu_->scale(g.as<float>(), factor);
    expect_same(download_bytes(*gpu_, g), stored_as(cpu_x, DType::F32), DType::F32, true,
                "scale by " + std::to_string(factor));
  }
  for (const float divisor : {3.0f, 65536.0f, 1e-30f, 7e37f, 0.0f}) {
    std::vector<float> cpu_x = values;
    cpu_.divide(cpu_x, divisor);
    Buffer g = test::upload(*gpu_, values);
    gpu_->divide(g.as<float>(), divisor);
    expect_same(download_bytes(*gpu_, g), stored_as(cpu_x, DType::F32), DType::F32, true,
                "divide by " + std::to_string(divisor));
  }
}

TEST_F(GpuStepWork, RoundToGivesTheHostBits) {
  const auto values = float_specials(76);
  for (const DType dtype : kTrainingDtypes) {
    std::vector<float> cpu_x = values;
    cpu_.round_to(cpu_x, dtype);
    Buffer g = test::upload(*gpu_, values);
    gpu_->round_to(g.as<float>(), dtype);
    expect_same(download_bytes(*gpu_, g), stored_as(cpu_x, DType::F32), DType::F32, false,
                std::string("round_to ") + std::string(dtype_name(dtype)));
  }
}

// The kernels move 8 elements at once where both arrays are 16-byte aligned and one at a time
// elsewhere: every start (aligned or not) and length (whole vectors, a tail, shorter than one)
// gives the host's bits, and nothing outside the range is written.
TEST_F(GpuStepWork, ConvertAndRoundToGiveTheHostBitsAtEveryStartAndLength) {
  const auto values = float_specials(77);
  const auto total = static_cast<std::int64_t>(values.size());
  for (const DType from : kTrainingDtypes) {
    const auto in = stored_as(values, from);
    Buffer g_in = upload_bytes(*gpu_, in, from, values.size());
    for (const DType to : kTrainingDtypes) {
      for (const std::int64_t start : {0, 1, 3, 8, 13}) {
        for (const std::int64_t elems : {1, 7, 8, 9, 16, 61, 1000}) {
          std::vector<std::byte> cpu_out(values.size() * dtype_bytes(to), std::byte{0x5A});
          Buffer g_out = upload_bytes(*gpu_, cpu_out, to, values.size());
          const auto in_at = static_cast<std::size_t>(start) * dtype_bytes(from);
          const auto out_at = static_cast<std::size_t>(start) * dtype_bytes(to);
          cpu_.convert(in.data() + in_at, from, cpu_out.data() + out_at, to, elems);
          gpu_->convert(static_cast<const std::byte*>(g_in.data()) + in_at, from,
                        static_cast<std::byte*>(g_out.data()) + out_at, to, elems);
          expect_same(download_bytes(*gpu_, g_out), cpu_out, to, false,
                      "convert " + std::string(dtype_name(from)) + " -> " +
                          std::string(dtype_name(to)) + " from " + std::to_string(start) + ", " +
                          std::to_string(elems) + " elements");
        }
      }
    }
  }
  for (const DType dtype : {DType::BF16, DType::F16}) {
    for (const std::int64_t start : {0, 1, 4, 8}) {
      for (const std::int64_t elems : std::vector<std::int64_t>{1, 7, 8, 9, 61, total - 8}) {
        std::vector<float> cpu_x = values;
        Buffer g = test::upload(*gpu_, values);
        const auto range = [&](std::span<float> all) {
          return all.subspan(static_cast<std::size_t>(start), static_cast<std::size_t>(elems));
        };
        cpu_.round_to(range(cpu_x), dtype);
        gpu_->round_to(range(g.as<float>()), dtype);
        expect_same(download_bytes(*gpu_, g), stored_as(cpu_x, DType::F32), DType::F32, false,
                    "round_to " + std::string(dtype_name(dtype)) + " from " +
                        std::to_string(start) + ", " + std::to_string(elems) + " elements");
      }
    }
  }
}

TEST_F(GpuStepWork, BlockSumsOfSquaresAreTheHostPartials) {
  constexpr std::int64_t kElems = kNormBlockElems * 101;  // an odd count of whole blocks
  auto grads = test::random_floats(kElems, 75);
  grads[100] = std::numeric_limits<float>::infinity();  // one block's partial is infinite
  grads[300] = std::numeric_limits<float>::denorm_min();
  Buffer g = test::upload(*gpu_, grads);
  std::vector<double> expected(kElems / kNormBlockElems), actual(expected.size());
  cpu_.block_sumsq(grads, expected);
  Buffer partials = gpu_->alloc(MemCategory::CommBuffer, DType::F64,
                                {static_cast<std::int64_t>(actual.size())});
  gpu_->block_sumsq(g.as<float>(), partials.as<double>());
  gpu_->copy_to_host(actual.data(), partials.data(), static_cast<std::size_t>(partials.bytes()));
  for (std::size_t b = 0; b < expected.size(); ++b) {
    EXPECT_EQ(std::bit_cast<std::uint64_t>(actual[b]), std::bit_cast<std::uint64_t>(expected[b]))
        << "partial " << b << ": gpu " << actual[b] << ", cpu " << expected[b];
  }
  Buffer ragged = gpu_->alloc(MemCategory::Grads, DType::F32, {kNormBlockElems + 1});
  EXPECT_THROW(gpu_->block_sumsq(ragged.as<float>(), partials.as<double>().first(1)), Error);
  EXPECT_THROW(gpu_->block_sumsq(g.as<float>(), partials.as<double>().first(100)), Error);
}

// The norm's tree sums: a whole unit of GPT-2's wte (603,136 leaves: nodes up to 2^19 leaves, two
// passes of the kernel), unaligned shards of it and a node of 2^21 leaves (three passes), against
// the host's tree_cover_sums bit for bit.
TEST_F(GpuStepWork, TreeCoverSumsAreTheHosts) {
  constexpr std::int64_t kWteLeaves = 50257 * 768 / kNormBlockElems;
  constexpr std::int64_t kLeaves = (std::int64_t{1} << 21) + 5;
  std::mt19937 engine(78);
  // Signs mixed and sizes close: sums cancel, so a rounding anywhere in the tree shows in the root.
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-3, 3);
  std::vector<double> leaves(kLeaves);
  for (double& leaf : leaves) leaf = std::ldexp(mantissa(engine), exponent(engine));
  Buffer on_gpu = gpu_->alloc(MemCategory::CommBuffer, DType::F64, {kLeaves});
  gpu_->copy_from_host(on_gpu.data(), leaves.data(), leaves.size() * sizeof(double));
  struct Range {
    std::int64_t first, count;
  };
  for (const Range range : {Range{0, kWteLeaves}, Range{kWteLeaves / 3, kWteLeaves / 3},
                            Range{7, 1}, Range{0, kLeaves}}) {
    const std::size_t nodes = tree_cover(range.first, range.count).size();
    std::vector<double> expected(nodes), actual(nodes);
    const auto host_leaves = std::span<const double>(leaves).subspan(
        static_cast<std::size_t>(range.first), static_cast<std::size_t>(range.count));
    tree_cover_sums(host_leaves, range.first, expected);
    Buffer sums = gpu_->alloc(MemCategory::CommBuffer, DType::F64, {std::ssize(expected)});
    gpu_->tree_cover_sums(on_gpu.as<double>().subspan(static_cast<std::size_t>(range.first),
                                                      static_cast<std::size_t>(range.count)),
                          range.first, sums.as<double>());
    gpu_->copy_to_host(actual.data(), sums.data(), static_cast<std::size_t>(sums.bytes()));
    for (std::size_t n = 0; n < nodes; ++n) {
      EXPECT_EQ(std::bit_cast<std::uint64_t>(actual[n]), std::bit_cast<std::uint64_t>(expected[n]))
          << "leaves [" << range.first << ", +" << range.count << ") node " << n << ": gpu "
          << actual[n] << ", cpu " << expected[n];
    }
  }
  Buffer one = gpu_->alloc(MemCategory::CommBuffer, DType::F64, {1});
  EXPECT_THROW(gpu_->tree_cover_sums(on_gpu.as<double>().first(3), 0, one.as<double>()), Error);
}

TEST_F(GpuStepWork, AdamWGivesTheHostBits) {
  constexpr std::int64_t kElems = 70001;  // several threads' worth on the CPU, odd
  auto params = test::random_floats(kElems, 76),
       grads = test::random_floats(kElems, 77, -1e-2f, 1e-2f);
  std::vector<float> m(kElems, 0.0f), v(kElems, 0.0f);
  grads[5] = 0.0f;
  grads[6] = 1e-30f;  // v underflows to subnormals
  Buffer gp = test::upload(*gpu_, params), gg = test::upload(*gpu_, grads),
         gm = test::upload(*gpu_, m), gv = test::upload(*gpu_, v);
  const AdamWConfig config{.lr = 3e-4, .weight_decay = 0.1};
  for (std::int64_t step = 1; step <= 3; ++step) {
    const AdamWScalars scalars = adamw_scalars(config, step);
    cpu_.adamw_update(params, grads, m, v, scalars);
    gpu_->adamw_update(gp.as<float>(), gg.as<float>(), gm.as<float>(), gv.as<float>(), scalars);
  }
  test::expect_same_bits(test::download(*gpu_, gp), params, "params after 3 steps");
  test::expect_same_bits(test::download(*gpu_, gm), m, "exp_avg after 3 steps");
  test::expect_same_bits(test::download(*gpu_, gv), v, "exp_avg_sq after 3 steps");

  Buffer short_m = gpu_->alloc(MemCategory::Optimizer, DType::F32, {kElems - 1});
  EXPECT_THROW(gpu_->adamw_update(gp.as<float>(), gg.as<float>(), short_m.as<float>(),
                                  gv.as<float>(), adamw_scalars(config, 4)),
               Error);
}

// The fused bf16 pass and the two-call fp16 path give the CPU's master, moments and rounded copy.
TEST_F(GpuStepWork, AdamWWithARoundedCopyGivesTheHostBits) {
  constexpr std::int64_t kElems = 5003;
  for (const DType dtype : {DType::BF16, DType::F16}) {
    auto master = test::random_floats(kElems, 81), grads = test::random_floats(kElems, 82);
    std::vector<float> m(kElems, 0.0f), v(kElems, 0.0f);
    std::vector<std::uint16_t> rounded(kElems, 0);
    Buffer gp = test::upload(*gpu_, master), gg = test::upload(*gpu_, grads),
           gm = test::upload(*gpu_, m), gv = test::upload(*gpu_, v);
    Buffer gr = gpu_->alloc(MemCategory::Params, dtype, {kElems});
    const AdamWConfig config{.lr = 1e-3, .weight_decay = 0.01};
    for (std::int64_t step = 1; step <= 2; ++step) {
      const AdamWScalars scalars = adamw_scalars(config, step);
      cpu_.adamw_update_rounded(master, grads, m, v, scalars, rounded.data(), dtype);
      gpu_->adamw_update_rounded(gp.as<float>(), gg.as<float>(), gm.as<float>(), gv.as<float>(),
                                 scalars, gr.data(), dtype);
    }
    test::expect_same_bits(test::download(*gpu_, gp), master, "master");
    test::expect_same_bits(test::download(*gpu_, gv), v, "exp_avg_sq");
    std::vector<std::uint16_t> actual(kElems);
    gpu_->copy_to_host(actual.data(), gr.data(), actual.size() * sizeof(std::uint16_t));
    EXPECT_EQ(actual, rounded) << dtype_name(dtype);
  }
}

TEST_F(GpuStepWork, OtherDtypesAreOneLineErrors) {
  Buffer a = gpu_->alloc(MemCategory::CommBuffer, DType::F64, {4});
  Buffer b = gpu_->alloc(MemCategory::CommBuffer, DType::F64, {4});
  EXPECT_THROW(gpu_->convert(a.data(), DType::F64, b.data(), DType::F32, 4), Error);
  EXPECT_THROW(gpu_->convert(a.data(), DType::F32, b.data(), DType::I64, 4), Error);
  EXPECT_THROW(gpu_->add(a.data(), b.data(), DType::F64, 4), Error);
  EXPECT_THROW(gpu_->add(a.data(), b.data(), DType::I64, 4), Error);
}

}  // namespace
}  // namespace zl
