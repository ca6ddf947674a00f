// cpu_device_test.cpp — the CPU kernels against double-precision answer keys: finite differences
// for every gradient, torch.nn.GELU values, a hand-computed cross-entropy, and bit-identical
// results whatever the buffers' addresses.
#include "ops/cpu/cpu_device.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numbers>
#include <span>
#include <utility>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/huge_pages.hpp"
#include "core/rng.hpp"
#include "grad_check.hpp"
#include "support/huge_page_flags.hpp"

namespace zl {
namespace {

using test::central_differences;
using test::check_gradient;
using test::to_double;

// Deterministic N(0, 1) test values; `stream` keeps different tensors independent.
std::vector<float> normals(std::uint64_t stream, std::int64_t elems, float scale = 1.0f) {
  std::vector<float> values(static_cast<std::size_t>(elems));
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = scale * standard_normal(42, stream, i);
  return values;
}

// Float kernels against double central differences. Each float op rounds at 2^-24 = 6e-8
// relative, and the gradients here are sums of <= 7 products of O(1) values, so their error is
// of order 1e-7 (measured: up to 1.3e-7). The differences use h = 1e-6 on smooth double functions:
// truncation ~h^2 = 1e-12, cancellation ~1e-16 / h = 1e-10. So 1e-6 + 1e-5 |g| is ten times the
// float error, and a real mistake (a wrong term, sign or scale) is off by the gradient's own size.
constexpr double kStep = 1e-6;
constexpr double kAbsTol = 1e-6;
constexpr double kRelTol = 1e-5;

TEST(CpuDevice, AllocatesZeroedAlignedMemoryBookedInTheLedger) {
  CpuDevice device;
  {
    Buffer buffer = device.alloc(MemCategory::Activations, DType::F32, {3, 7});
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buffer.data()) % 64, 0u);
    for (const float v : buffer.as<float>()) EXPECT_EQ(v, 0.0f);
    EXPECT_EQ(device.ledger().current_bytes(MemCategory::Activations), 3 * 7 * 4);
  }
  EXPECT_EQ(device.ledger().current_bytes(MemCategory::Activations), 0);
  EXPECT_EQ(device.ledger().peak_bytes(MemCategory::Activations), 3 * 7 * 4);
}

// A large block freed is taken again by the next allocation of its size, zeroed (or filled with
// the unset byte) like new memory, whatever it held; a block of another size is a new one.
TEST(CpuDevice, ALargeFreedBlockIsReusedAtItsSizeAndStartsAsNewMemory) {
  CpuDevice device;
  constexpr std::int64_t kElems = CpuDevice::kCacheMinBytes / 4;
  const void* first = nullptr;
  {
    Buffer buffer = device.alloc(MemCategory::HostMaster, DType::F32, {kElems});
    std::ranges::fill(buffer.as<float>(), 3.5f);
    first = buffer.data();
  }
  {
    Buffer again = device.alloc(MemCategory::HostMaster, DType::F32, {kElems});
    EXPECT_EQ(again.data(), first) << "the freed block is taken again";
    EXPECT_TRUE(std::ranges::all_of(again.as<float>(), [](float v) { return v == 0.0f; }));
    std::ranges::fill(again.as<float>(), 3.5f);
  }
  {
    Buffer unset = device.alloc_unset(MemCategory::HostMaster, DType::F32, {kElems});
    EXPECT_EQ(unset.data(), first);
    EXPECT_TRUE(std::ranges::all_of(unset.as<float>(), [](float v) { return std::isnan(v); }));
    Buffer other = device.alloc(MemCategory::HostMaster, DType::F32, {kElems + 1});
    EXPECT_NE(other.data(), first);
  }
  EXPECT_EQ(device.ledger().current_bytes(MemCategory::HostMaster), 0);
}

// Blocks start on a cache line; blocks of 1 MiB and more on a page, so that a swap file's
// O_DIRECT blocks move straight in and out of them (core/io_queue.hpp); from 2 MiB on a huge page.
TEST(CpuDevice, LargeBlocksStartOnAPage) {
  CpuDevice device;
  const auto address = [](const Buffer& b) { return reinterpret_cast<std::uintptr_t>(b.data()); };
  for (const std::int64_t elems : {std::int64_t{1}, std::int64_t{1000}, std::int64_t{262143}}) {
    const Buffer small = device.alloc(MemCategory::Activations, DType::F32, {elems});
    EXPECT_EQ(address(small) % 64, 0u) << elems;
  }
  for (const std::int64_t elems : {std::int64_t{262144}, std::int64_t{1000003}}) {
    const Buffer large = device.alloc_unset(MemCategory::HostMaster, DType::F32, {elems});
    EXPECT_EQ(address(large) % 4096, 0u) << elems;
  }
  for (const std::int64_t elems : {std::int64_t{524288}, std::int64_t{3000017}}) {
    const Buffer huge = device.alloc(MemCategory::Activations, DType::F32, {elems});
    EXPECT_EQ(address(huge) % kHugePageBytes, 0u) << elems;
  }
}

// The host copies a swap file moves ask for huge pages from 2 MiB up, where the disk's blocks move
// fastest (core/huge_pages.hpp), also when they come back from the device's cache; other blocks do
// not. 40 MiB blocks: above glibc's largest mmap threshold, each a mapping of its own.
TEST(CpuDevice, TheHostCopiesASwapFileMovesAskForHugePages) {
  if (!test::kernel_has_huge_pages()) GTEST_SKIP() << "this kernel has no transparent huge pages";
  CpuDevice device;
  constexpr std::int64_t kElems = 10 << 20;
  for (const MemCategory category :
       {MemCategory::HostMaster, MemCategory::HostOptimizer, MemCategory::HostParams}) {
    for (int round = 0; round < 2; ++round) {  // new, then from the cache
      const Buffer moved = device.alloc_unset(category, DType::F32, {kElems});
      EXPECT_TRUE(test::asks_for_huge_pages(moved.data())) << static_cast<int>(category);
    }
  }
  for (const MemCategory category : {MemCategory::Activations, MemCategory::Params}) {
    for (int round = 0; round < 2; ++round) {
      const Buffer kept = device.alloc(category, DType::F32, {kElems});
      EXPECT_FALSE(test::asks_for_huge_pages(kept.data())) << static_cast<int>(category);
    }
  }
}

TEST(CpuDevice, LinearForwardMatchesADoubleLoop) {
  CpuDevice device;
  const std::int64_t rows = 5, in = 7, out = 3;
  const auto x = normals(1, rows * in), w = normals(2, out * in), b = normals(3, out);
  std::vector<float> y(rows * out);
  device.linear_forward(x, w, b, y, rows, in, out);
  const auto expected = test::ref_linear(to_double(x), to_double(w), to_double(b), rows, in, out);
  for (std::size_t i = 0; i < y.size(); ++i)
    EXPECT_NEAR(y[i], expected[i], 1e-5) << "y[" << i << "]";
}

// The loss sum(y * r) with fixed weights r has dL/dy = r, so linear_backward(dy = r) must return
// dL/dx, dL/dw and dL/db.
TEST(CpuDevice, LinearBackwardMatchesFiniteDifferences) {
  CpuDevice device;
  const std::int64_t rows = 6, in = 4, out = 5;
  const auto x = normals(1, rows * in), w = normals(2, out * in), b = normals(3, out);
  const auto r = normals(4, rows * out);
  std::vector<float> dw(out * in), db(out), dx(rows * in);
  device.linear_backward(x, w, r, dw, db, dx, rows, in, out);

  const auto xd = to_double(x), wd = to_double(w), bd = to_double(b), rd = to_double(r);
  const auto weighted_sum = [&](std::span<const double> xs, std::span<const double> ws,
                                std::span<const double> bs) {
    const auto y = test::ref_linear(xs, ws, bs, rows, in, out);
    double loss = 0.0;
    for (std::size_t i = 0; i < y.size(); ++i) loss += y[i] * rd[i];
    return loss;
  };
  const auto num_dx = central_differences(
      [&](std::span<const double> p) { return weighted_sum(p, wd, bd); }, xd, kStep);
  const auto num_dw = central_differences(
      [&](std::span<const double> p) { return weighted_sum(xd, p, bd); }, wd, kStep);
  const auto num_db = central_differences(
      [&](std::span<const double> p) { return weighted_sum(xd, wd, p); }, bd, kStep);
  test::expect_gradient_ok("linear dx", check_gradient(dx, num_dx, kAbsTol, kRelTol));
  test::expect_gradient_ok("linear dw", check_gradient(dw, num_dw, kAbsTol, kRelTol));
  test::expect_gradient_ok("linear db", check_gradient(db, num_db, kAbsTol, kRelTol));
}

TEST(CpuDevice, LinearBackwardAddsIntoDwAndDbAndSkipsAnEmptyDx) {
  CpuDevice device;
  const std::int64_t rows = 3, in = 2, out = 4;
  const auto x = normals(1, rows * in), w = normals(2, out * in), dy = normals(3, rows * out);
  std::vector<float> dw(out * in), db(out);
  device.linear_backward(x, w, dy, dw, db, {}, rows, in, out);
  const auto once_dw = dw, once_db = db;
  device.linear_backward(x, w, dy, dw, db, {}, rows, in, out);
  // g + g is exact in float, so accumulating twice gives exactly twice the first result.
  for (std::size_t i = 0; i < dw.size(); ++i)
    EXPECT_EQ(dw[i], 2.0f * once_dw[i]) << "dw[" << i << "]";
  for (std::size_t i = 0; i < db.size(); ++i)
    EXPECT_EQ(db[i], 2.0f * once_db[i]) << "db[" << i << "]";
}

TEST(CpuDevice, GeluMatchesTorchValues) {
  CpuDevice device;
  // torch.nn.GELU()(x) for these x, from 0.5 x (1 + erf(x / sqrt 2)) in Python's math.erf.
  const std::vector<float> x = {-3.0f, -1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 2.0f, 3.0f};
  const std::vector<double> torch_gelu = {
      -0.00404969409489031, -0.15865525393145707, -0.15426876936299344, 0.0,
      0.34573123063700656,  0.8413447460685429,   1.9544997361036416,   2.99595030590511};
  std::vector<float> y(x.size());
  device.gelu_forward(x, y);
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_FLOAT_EQ(y[i], static_cast<float>(torch_gelu[i])) << "GELU(" << x[i] << ")";
  }
  // And on a grid, the same formula through std::erf in double.
  const auto grid = normals(5, 200, 3.0f);
  std::vector<float> grid_y(grid.size());
  device.gelu_forward(grid, grid_y);
  for (std::size_t i = 0; i < grid.size(); ++i) {
    EXPECT_FLOAT_EQ(grid_y[i], static_cast<float>(test::ref_gelu(grid[i])))
        << "GELU(" << grid[i] << ")";
  }
}

TEST(CpuDevice, GeluBackwardMatchesFiniteDifferences) {
  CpuDevice device;
  const auto x = normals(6, 64, 2.5f);
  const auto dy = normals(7, 64);
  std::vector<float> dx(x.size());
  device.gelu_backward(x, dy, dx);
  const auto dyd = to_double(dy);
  const auto weighted_gelu = [&](std::span<const double> p) {
    double loss = 0.0;
    for (std::size_t i = 0; i < p.size(); ++i) loss += test::ref_gelu(p[i]) * dyd[i];
    return loss;
  };
  const auto numeric = central_differences(weighted_gelu, to_double(x), kStep);
  test::expect_gradient_ok("gelu dx", check_gradient(dx, numeric, kAbsTol, kRelTol));

  // The check has teeth: dropping the x phi(x) term of the derivative is caught.
  std::vector<float> phi_only(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    phi_only[i] = dy[i] * static_cast<float>(0.5 * (1.0 + std::erf(x[i] / std::numbers::sqrt2)));
  }
  EXPECT_FALSE(check_gradient(phi_only, numeric, kAbsTol, kRelTol).ok);
}

TEST(CpuDevice, CrossEntropyMatchesHandComputation) {
  CpuDevice device;
  // Row 0: logits (1, 2, 3), label 2: ln(e + e^2 + e^3) - 3 = ln(1 + e^-1 + e^-2) = 0.4076059644.
  // Row 1: logits (0, 0, 0), label 0: ln 3 = 1.0986122887. Mean: 0.7531091266.
  // dlogits = (softmax - onehot) / 2, softmax(1, 2, 3) = (0.0900305732, 0.2447284711,
  // 0.6652409558).
  const std::vector<float> logits = {1, 2, 3, 0, 0, 0};
  const std::vector<std::int64_t> labels = {2, 0};
  std::vector<float> dlogits(6);
  const float loss = device.cross_entropy_forward_backward(logits, labels, dlogits, 2, 3, 3);
  EXPECT_FLOAT_EQ(loss, 0.7531091266f);
  const std::vector<float> expected = {
      0.0900305732f / 2,  0.2447284711f / 2, (0.6652409558f - 1) / 2,
      (1.0f / 3 - 1) / 2, 1.0f / 6,          1.0f / 6};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_FLOAT_EQ(dlogits[i], expected[i]) << "dlogits[" << i << "]";
  }
}

TEST(CpuDevice, CrossEntropyBackwardMatchesFiniteDifferences) {
  CpuDevice device;
  const std::int64_t rows = 6, classes = 5;
  const auto logits = normals(8, rows * classes, 2.0f);
  const std::vector<std::int64_t> labels = {0, 4, 2, 2, 1, 3};
  std::vector<float> dlogits(rows * classes);
  const float loss = device.cross_entropy_forward_backward(logits, labels, dlogits, rows, classes,
                                                          classes);
  const auto mean_loss = [&](std::span<const double> p) {
    return test::ref_cross_entropy(p, labels, rows, classes);
  };
  EXPECT_NEAR(loss, mean_loss(to_double(logits)), 1e-6);
  const auto numeric = central_differences(mean_loss, to_double(logits), kStep);
  test::expect_gradient_ok("cross-entropy dlogits",
                           check_gradient(dlogits, numeric, kAbsTol, kRelTol));
}

// A batch in chunks: each chunk's dlogits divide by the whole batch's rows, and the chunks' loss
// sums add up to the whole batch's mean (the rows' losses in the same order, in double).
TEST(CpuDevice, CrossEntropyInChunksIsTheWholeBatch) {
  CpuDevice device;
  const std::int64_t rows = 7, classes = 5;
  const auto logits = normals(9, rows * classes, 2.0f);
  const std::vector<std::int64_t> labels = {0, 4, 2, 2, 1, 3, 4};
  std::vector<float> whole(rows * classes), chunked(rows * classes);
  const float loss = device.cross_entropy_forward_backward(logits, labels, whole, rows, classes,
                                                          classes);
  double sum = 0.0;
  for (const auto& [first, count] : {std::pair{0, 4}, std::pair{4, 3}}) {
    sum += device.cross_entropy_sum_forward_backward(
        std::span(logits).subspan(first * classes, count * classes),
        std::span(labels).subspan(first, count),
        std::span(chunked).subspan(first * classes, count * classes), count, classes, classes,
        rows);
  }
  EXPECT_EQ(chunked, whole);
  EXPECT_EQ(static_cast<float>(sum / rows), loss);
  EXPECT_THROW(device.cross_entropy_sum_forward_backward(logits, labels, chunked, rows, classes,
                                                         classes, rows - 1),
               Error);
}

// Rows padded past the classes (GPT-2's vocabulary padded to a multiple of 128): the padded
// columns, however large, take no part in the loss or the softmax, their dlogits are 0, and the
// real columns' dlogits and the loss are bitwise those of unpadded rows, in place or not.
TEST(CpuDevice, CrossEntropyMasksThePaddedColumns) {
  CpuDevice device;
  const std::int64_t rows = 4, classes = 5, padded = 8;
  const auto logits = normals(10, rows * classes, 2.0f);
  const std::vector<std::int64_t> labels = {0, 4, 2, 1};
  std::vector<float> padded_logits(rows * padded, 80.0f);  // would dominate any softmax
  for (std::int64_t r = 0; r < rows; ++r) {
    std::copy_n(logits.begin() + r * classes, classes, padded_logits.begin() + r * padded);
  }
  std::vector<float> dlogits(rows * classes), padded_dlogits(rows * padded, 1.0f);
  const float loss =
      device.cross_entropy_forward_backward(logits, labels, dlogits, rows, classes, classes);
  EXPECT_EQ(device.cross_entropy_forward_backward(padded_logits, labels, padded_dlogits, rows,
                                                  classes, padded),
            loss);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < padded; ++c) {
      const float expected = c < classes ? dlogits[r * classes + c] : 0.0f;
      EXPECT_EQ(padded_dlogits[r * padded + c], expected) << "row " << r << ", column " << c;
    }
  }
  // In place, as the GPT writes the gradient over its logits.
  EXPECT_EQ(device.cross_entropy_forward_backward(padded_logits, labels, padded_logits, rows,
                                                  classes, padded),
            loss);
  EXPECT_EQ(padded_logits, padded_dlogits);
  // Labels are checked against the classes, not the padded width.
  const std::vector<std::int64_t> padded_label = {0, 4, 6, 1};
  EXPECT_THROW(device.cross_entropy_forward_backward(padded_logits, padded_label, padded_dlogits,
                                                     rows, classes, padded),
               Error);
  EXPECT_THROW(device.cross_entropy_forward_backward(logits, labels, dlogits, rows, classes,
                                                     classes - 1),
               Error);
}

// round_to leaves the value a 16-bit copy holds: to nearest even, NaN and infinity kept.
TEST(CpuDevice, RoundToGivesTheSixteenBitValue) {
  CpuDevice device;
  const std::vector<float> values = {1.00390625f, 1.01171875f, 65520.0f, -3.3e38f, 1e-8f,
                                     std::numeric_limits<float>::infinity(), 0.1f};
  std::vector<float> bf16 = values, fp16 = values, fp32 = values;
  device.round_to(bf16, DType::BF16);
  device.round_to(fp16, DType::F16);
  device.round_to(fp32, DType::F32);
  EXPECT_EQ(fp32, values);
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(bf16[i], bf16_to_f32(f32_to_bf16(values[i]))) << values[i];
    EXPECT_EQ(fp16[i], f16_to_f32(f32_to_f16(values[i]))) << values[i];
  }
  EXPECT_EQ(bf16[0], 1.0f);       // a tie rounds to the even neighbour
  EXPECT_EQ(bf16[1], 1.015625f);  // and the other tie up to it
  EXPECT_TRUE(std::isinf(fp16[2]));
  EXPECT_THROW(device.round_to(bf16, DType::I64), Error);
}

TEST(CpuDevice, CrossEntropyStaysFiniteForHugeLogits) {
  CpuDevice device;
  // exp(1000) overflows even in double; subtracting the row max keeps it exact.
  const std::vector<float> logits = {1000.0f, 0.0f, -1000.0f};
  const std::vector<std::int64_t> labels = {1};
  std::vector<float> dlogits(3);
  EXPECT_FLOAT_EQ(device.cross_entropy_forward_backward(logits, labels, dlogits, 1, 3, 3), 1000.0f);
  EXPECT_FLOAT_EQ(dlogits[0], 1.0f);
  EXPECT_FLOAT_EQ(dlogits[1], -1.0f);
  EXPECT_EQ(dlogits[2], 0.0f);
}

TEST(CpuDevice, KernelsRejectBadInputsWithAMessage) {
  CpuDevice device;
  std::vector<float> logits(6), dlogits(6);
  const std::vector<std::int64_t> bad_labels = {0, 3};
  EXPECT_THROW(device.cross_entropy_forward_backward(logits, bad_labels, dlogits, 2, 3, 3), Error);
  std::vector<float> x(6), w(6), b(2), y(5);
  EXPECT_THROW(device.linear_forward(x, w, b, y, 2, 3, 2), Error);  // y needs 2 * 2 = 4
}

// Runs linear_forward and linear_backward with every tensor at `offset_elems` floats into its own
// 64-byte aligned block, and returns y, dw, db and dx back to back.
std::vector<float> linear_results_at(CpuDevice& device, std::int64_t offset_elems,
                                     std::int64_t rows, std::int64_t in, std::int64_t out) {
  const auto place = [&](const std::vector<float>& values) {
    Buffer buffer = device.alloc(MemCategory::Activations, DType::F32,
                                 {offset_elems + static_cast<std::int64_t>(values.size())});
    std::copy(values.begin(), values.end(), buffer.as<float>().begin() + offset_elems);
    return buffer;
  };
  const auto view = [&](Buffer& buffer) { return buffer.as<float>().subspan(offset_elems); };
  Buffer x = place(normals(1, rows * in)), w = place(normals(2, out * in)),
         b = place(normals(3, out));
  Buffer dy = place(normals(4, rows * out));
  Buffer y = place(std::vector<float>(rows * out));
  Buffer dw = place(normals(5, out * in)), db = place(normals(6, out));  // accumulated into
  Buffer dx = place(std::vector<float>(rows * in));
  device.linear_forward(view(x), view(w), view(b), view(y), rows, in, out);
  device.linear_backward(view(x), view(w), view(dy), view(dw), view(db), view(dx), rows, in, out);
  std::vector<float> results;
  for (Buffer* output : {&y, &dw, &db, &dx}) {
    const auto values = view(*output);
    results.insert(results.end(), values.begin(), values.end());
  }
  return results;
}

TEST(CpuDevice, LinearBitsDoNotDependOnBufferAddresses) {
  CpuDevice device;
  struct Shape3 {
    std::int64_t rows, in, out;
  };
  // Tiny (Eigen's coefficient-based range), single rows and columns (GEMV and dot products),
  // odd sizes that leave SIMD tails, and sizes large enough for blocked GEMM. Measured to catch
  // db summed with Eigen's .colwise().sum(), and, in AVX builds, Eigen's small-product path.
  const std::vector<Shape3> shapes = {{6, 4, 5},    {2, 3, 3},   {1, 7, 1},  {1, 1, 1},
                                      {1, 9, 13},   {11, 1, 6},  {9, 17, 1}, {37, 29, 23},
                                      {64, 48, 40}, {130, 67, 5}};
  for (const auto& s : shapes) {
    const auto aligned = linear_results_at(device, 0, s.rows, s.in, s.out);
    for (const std::int64_t offset : {1, 2, 3, 5}) {
      const auto shifted = linear_results_at(device, offset, s.rows, s.in, s.out);
      ASSERT_EQ(aligned.size(), shifted.size());
      EXPECT_EQ(std::memcmp(aligned.data(), shifted.data(), aligned.size() * sizeof(float)), 0)
          << "rows " << s.rows << " in " << s.in << " out " << s.out << ": results at offset "
          << offset << " floats differ from the 64-byte aligned run";
    }
  }
}

TEST(GradCheck, CatchesADeliberatelyWrongGradient) {
  const std::vector<double> numeric = {0.5, -1.25, 3e-4, 2.0};
  std::vector<float> analytic = {0.5f, -1.25f, 3e-4f, 2.0f};
  EXPECT_TRUE(check_gradient(analytic, numeric, kAbsTol, kRelTol).ok);
  analytic[2] += 2e-5f;  // 7% of a small gradient
  const auto check = check_gradient(analytic, numeric, kAbsTol, kRelTol);
  EXPECT_FALSE(check.ok);
  EXPECT_EQ(check.worst_index, 2u) << check.report();
  analytic[2] = NAN;
  EXPECT_FALSE(check_gradient(analytic, numeric, kAbsTol, kRelTol).ok);
}

}  // namespace
}  // namespace zl
