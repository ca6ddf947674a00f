// gpt_ops_test.cpp — the GPT-2 kernels of CpuDevice (Conv1D, the bias-free head, LayerNorm, tanh
// GELU) against double answer keys: each forward against gpt_reference.hpp, each backward against
// central differences of the scalar sum(dy * forward(inputs)) in double, plus accumulation, bits
// independent of addresses and the messages for bad arguments. Attention and embeddings:
// gpt_attention_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ckpt/test_files.hpp"
#include "core/error.hpp"
#include "gpt_reference.hpp"
#include "ops/column_sums.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "ops/gelu_tanh.hpp"

namespace zl {
namespace {

using test::central_differences;
using test::check_gradient;
using test::error_of;
using test::expect_gradient_ok;
using test::random_normals;
using test::to_double;
using test::weighted_sum;
using ::testing::HasSubstr;

using test::kOpAbsTol;
using test::kOpRelTol;
using test::kOpStep;

TEST(GptOps, Conv1dForwardMatchesADoubleLoop) {
  CpuDevice device;
  const std::int64_t rows = 5, in = 7, out = 6;
  const auto x = random_normals(1, rows * in), w = random_normals(2, in * out),
             b = random_normals(3, out);
  std::vector<float> y(rows * out);
  device.conv1d_forward(x, w, b, y, rows, in, out);
  const auto expected = test::ref_conv1d(to_double(x), to_double(w), to_double(b), rows, in, out);
  // Seven float products summed: a few ulps of the result's size.
  for (std::size_t i = 0; i < y.size(); ++i)
    EXPECT_NEAR(y[i], expected[i], 1e-6 * (1.0 + std::abs(expected[i]))) << i;
}

TEST(GptOps, Conv1dBackwardMatchesFiniteDifferences) {
  CpuDevice device;
  const std::int64_t rows = 5, in = 7, out = 6;
  const auto x = random_normals(1, rows * in), w = random_normals(2, in * out),
             b = random_normals(3, out), dy = random_normals(4, rows * out);
  std::vector<float> dw(in * out), db(out), dx(rows * in);
  device.conv1d_backward(x, w, dy, dw, db, dx, rows, in, out);
  const auto xd = to_double(x), wd = to_double(w), bd = to_double(b);
  const auto loss_of = [&](auto&& set) {
    return [&, set](std::span<const double> v) {
      auto args = std::vector<std::vector<double>>{xd, wd, bd};
      set(args, v);
      return weighted_sum(dy, test::ref_conv1d(args[0], args[1], args[2], rows, in, out));
    };
  };
  const auto numeric = [&](int which, const std::vector<double>& at) {
    return central_differences(
        loss_of([which](auto& args, auto v) { args[which].assign(v.begin(), v.end()); }), at,
        kOpStep);
  };
  expect_gradient_ok("dx", check_gradient(dx, numeric(0, xd), kOpAbsTol, kOpRelTol));
  expect_gradient_ok("dw", check_gradient(dw, numeric(1, wd), kOpAbsTol, kOpRelTol));
  expect_gradient_ok("db", check_gradient(db, numeric(2, bd), kOpAbsTol, kOpRelTol));

  // dw and db are added into; dx is overwritten; an empty dx is skipped.
  auto dw_twice = dw, db_twice = db;
  std::vector<float> dx_again(rows * in, 99.0f);
  device.conv1d_backward(x, w, dy, dw_twice, db_twice, dx_again, rows, in, out);
  device.conv1d_backward(x, w, dy, dw_twice, db_twice, {}, rows, in, out);
  for (std::size_t i = 0; i < dw.size(); ++i) EXPECT_EQ(dw_twice[i], 3.0f * dw[i]);
  for (std::size_t i = 0; i < db.size(); ++i) EXPECT_EQ(db_twice[i], 3.0f * db[i]);
  EXPECT_EQ(dx_again, dx);
}

TEST(GptOps, LinearWithoutBiasIsTheTiedHead) {
  // logits [rows, vocab] = x [rows, C] * wte[vocab, C]^T: linear with an empty bias.
  CpuDevice device;
  const std::int64_t rows = 4, C = 5, V = 9;
  const auto x = random_normals(1, rows * C), wte = random_normals(2, V * C),
             dy = random_normals(3, rows * V);
  const std::vector<float> zeros(V, 0.0f);
  std::vector<float> with_bias(rows * V), without(rows * V);
  device.linear_forward(x, wte, zeros, with_bias, rows, C, V);
  device.linear_forward(x, wte, {}, without, rows, C, V);
  EXPECT_EQ(with_bias, without);
  std::vector<float> dw(V * C), dw_ref(V * C), db(V), dx(rows * C), dx_ref(rows * C);
  device.linear_backward(x, wte, dy, dw, {}, dx, rows, C, V);
  device.linear_backward(x, wte, dy, dw_ref, db, dx_ref, rows, C, V);
  EXPECT_EQ(dw, dw_ref);
  EXPECT_EQ(dx, dx_ref);
}

TEST(GptOps, LayerNormForwardMatchesTheDefinition) {
  CpuDevice device;
  const std::int64_t rows = 4, C = 9;
  const auto x = random_normals(1, rows * C, 2.0f, 0.5f), weight = random_normals(2, C, 0.3f, 1.0f),
             bias = random_normals(3, C, 0.2f);
  std::vector<float> y(rows * C), mean(rows), rstd(rows);
  device.layernorm_forward(x, weight, bias, y, mean, rstd, rows, C);
  const auto expected =
      test::ref_layernorm(to_double(x), to_double(weight), to_double(bias), rows, C);
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], expected[i], 1e-6) << i;
  for (std::int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (std::int64_t c = 0; c < C; ++c) sum += x[r * C + c];
    EXPECT_FLOAT_EQ(mean[r], static_cast<float>(sum / C));
  }
}

TEST(GptOps, LayerNormBackwardMatchesFiniteDifferencesAndAddsIntoDx) {
  CpuDevice device;
  const std::int64_t rows = 4, C = 9;
  const auto x = random_normals(1, rows * C, 2.0f, 0.5f), weight = random_normals(2, C, 0.3f, 1.0f),
             bias = random_normals(3, C, 0.2f), dy = random_normals(4, rows * C);
  std::vector<float> y(rows * C), mean(rows), rstd(rows);
  device.layernorm_forward(x, weight, bias, y, mean, rstd, rows, C);
  std::vector<float> dx(rows * C), dweight(C), dbias(C);
  device.layernorm_backward(x, weight, mean, rstd, dy, dx, dweight, dbias, rows, C);
  const auto xd = to_double(x), wd = to_double(weight), bd = to_double(bias);
  const auto loss = [&](const std::vector<double>& xs, const std::vector<double>& ws,
                        const std::vector<double>& bs) {
    return weighted_sum(dy, test::ref_layernorm(xs, ws, bs, rows, C));
  };
  expect_gradient_ok("dx", check_gradient(dx,
                                          central_differences(
                                              [&](auto v) {
                                                return loss({v.begin(), v.end()}, wd, bd);
                                              },
                                              xd, kOpStep),
                                          kOpAbsTol, kOpRelTol));
  expect_gradient_ok("dweight", check_gradient(dweight,
                                               central_differences(
                                                   [&](auto v) {
                                                     return loss(xd, {v.begin(), v.end()}, bd);
                                                   },
                                                   wd, kOpStep),
                                               kOpAbsTol, kOpRelTol));
  expect_gradient_ok("dbias", check_gradient(dbias,
                                             central_differences(
                                                 [&](auto v) {
                                                   return loss(xd, wd, {v.begin(), v.end()});
                                                 },
                                                 bd, kOpStep),
                                             kOpAbsTol, kOpRelTol));
  // The residual stream's gradient is already in dx: the kernel adds to it.
  const auto before = random_normals(5, rows * C);
  auto added = before;
  std::vector<float> dweight2(C), dbias2(C);
  device.layernorm_backward(x, weight, mean, rstd, dy, added, dweight2, dbias2, rows, C);
  for (std::size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(added[i], before[i] + dx[i], 1e-6) << i;
}

// Sums over many rows (bias and LayerNorm parameter gradients) run in ops/column_sums.hpp's
// order, which the CUDA device repeats bit for bit: chunks of 256 rows each summed from zero,
// then the chunks in order. 600 rows: two whole chunks and a partial one.
TEST(GptOps, ColumnSumsAddChunksOfRowsInOrder) {
  CpuDevice device;
  const std::int64_t rows = 600, in = 3, out = 5;
  const auto x = random_normals(20, rows * in), w = random_normals(21, in * out),
             dy = random_normals(22, rows * out, 1.0f, 3.0f);
  std::vector<float> dw(in * out), db(out, 0.25f), dx(rows * in);
  device.conv1d_backward(x, w, dy, dw, db, dx, rows, in, out);
  const std::int64_t C = out;
  const auto mean = random_normals(23, rows, 0.5f), rstd = random_normals(24, rows, 0.2f, 1.0f),
             weight = random_normals(25, C);
  std::vector<float> ln_dx(rows * C), dweight(C, -0.5f), dbias(C, 0.75f);
  device.layernorm_backward(dy, weight, mean, rstd, dy, ln_dx, dweight, dbias, rows, C);
  for (std::int64_t c = 0; c < out; ++c) {
    float total = 0.0f;
    double total_w = 0.0, total_b = 0.0;
    for (std::int64_t first = 0; first < rows; first += kColumnSumChunkRows) {
      float chunk = 0.0f;
      double chunk_w = 0.0, chunk_b = 0.0;
      for (std::int64_t r = first; r < std::min(rows, first + kColumnSumChunkRows); ++r) {
        const float g = dy[r * out + c];
        chunk += g;
        chunk_w += g * ((dy[r * C + c] - static_cast<double>(mean[r])) * rstd[r]);
        chunk_b += g;
      }
      total += chunk;
      total_w += chunk_w;
      total_b += chunk_b;
    }
    EXPECT_EQ(std::bit_cast<std::uint32_t>(db[c]), std::bit_cast<std::uint32_t>(0.25f + total))
        << "db " << c;
    EXPECT_EQ(std::bit_cast<std::uint32_t>(dweight[c]),
              std::bit_cast<std::uint32_t>(static_cast<float>(-0.5f + total_w)))
        << "dweight " << c;
    EXPECT_EQ(std::bit_cast<std::uint32_t>(dbias[c]),
              std::bit_cast<std::uint32_t>(static_cast<float>(0.75f + total_b)))
        << "dbias " << c;
  }
}

TEST(GptOps, GeluTanhMatchesTorchValues) {
  // torch.nn.functional.gelu(x, approximate="tanh") in float64.
  const std::vector<float> x = {-3.0f, -1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 2.5f};
  const std::vector<double> expected = {
      -0.0036373920817729943, -0.15880800939172324, -0.15428599017485606, 0.0,
      0.34571400982514394,    0.8411919906082768,   2.484915733910001};
  CpuDevice device;
  std::vector<float> y(x.size());
  device.gelu_tanh_forward(x, y);
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_FLOAT_EQ(y[i], static_cast<float>(expected[i])) << x[i];
    EXPECT_FLOAT_EQ(y[i], static_cast<float>(test::ref_gelu_tanh(x[i])));
  }
}

TEST(GptOps, GeluTanhBackwardMatchesFiniteDifferences) {
  CpuDevice device;
  const auto x = random_normals(1, 40, 2.0f), dy = random_normals(2, 40);
  std::vector<float> dx(x.size());
  device.gelu_tanh_backward(x, dy, dx);
  const auto numeric = central_differences(
      [&](std::span<const double> v) {
        std::vector<double> y(v.size());
        std::transform(v.begin(), v.end(), y.begin(), test::ref_gelu_tanh);
        return weighted_sum(dy, y);
      },
      to_double(x), kOpStep);
  expect_gradient_ok("dx", check_gradient(dx, numeric, kOpAbsTol, kOpRelTol));
}

// The device's GELU loops are built for this CPU's widest vectors (cpu_gpt_kernels.cpp); they give
// the bits of gelu_tanh.hpp's scalar functions, as built for the baseline here, on values from
// 1e-30 to 1e4 of both signs, zeros, and pieces that start at every offset of a vector.
TEST(GptOps, GeluTanhKernelsGiveTheScalarBitsAtThisCpusWidth) {
  std::vector<float> x = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e4f, -1e4f, 30.0f, -30.0f};
  for (int i = 0; i < 4099; ++i) {
    const float magnitude = std::pow(10.0f, -6.0f + 8.0f * static_cast<float>(i) / 4099.0f);
    x.push_back(i % 2 == 0 ? magnitude : -magnitude);
  }
  const auto dy = random_normals(3, static_cast<std::int64_t>(x.size()));
  CpuDevice device(2);
  std::vector<float> y(x.size()), dx(x.size());
  device.gelu_tanh_forward(x, y);
  device.gelu_tanh_backward(x, dy, dx);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float want_y = gelu_tanh::forward(x[i]), want_dx = gelu_tanh::backward(x[i], dy[i]);
    ASSERT_EQ(std::memcmp(&y[i], &want_y, sizeof(float)), 0) << "GELU(" << x[i] << ")";
    ASSERT_EQ(std::memcmp(&dx[i], &want_dx, sizeof(float)), 0) << "GELU'(" << x[i] << ")";
  }
}

TEST(GptOps, KernelsRejectBadShapesWithAMessage) {
  CpuDevice device;
  std::vector<float> x(12), w(12), b(4), y(5), stats(3);
  EXPECT_THAT(error_of([&] { device.conv1d_forward(x, w, b, y, 3, 4, 3); }),
              HasSubstr("conv1d_forward: b has 4 elements but the shapes need 3"));
  EXPECT_THAT(error_of([&] { device.layernorm_forward(x, b, b, x, stats, y, 3, 4); }),
              HasSubstr("layernorm_forward: rstd has 5 elements but the shapes need 3"));
  std::vector<float> qkv(2 * 3 * 6), att_stats(4 * 2 * 2), out(2 * 3 * 2);
  EXPECT_THAT(error_of([&] { device.attention_forward(qkv, att_stats, out, 1, 2, 6, 4); }),
              HasSubstr("6 channels do not split into 4 heads"));
  std::vector<float> qkv_ok(2 * 3 * 6), too_many(2 * 2 * 2 * 2), out_ok(2 * 6);
  EXPECT_THAT(error_of([&] { device.attention_forward(qkv_ok, too_many, out_ok, 1, 2, 6, 2); }),
              HasSubstr("attention_forward: stats has 16 elements but the shapes need 8"));
}

// Conv1D's products through Eigen, with every tensor `offset_elems` floats into its own 64-byte
// aligned block: y, dw, db and dx back to back.
std::vector<float> conv1d_results_at(CpuDevice& device, std::int64_t offset_elems,
                                     std::int64_t rows, std::int64_t in, std::int64_t out) {
  std::vector<Buffer> buffers;
  const auto place = [&](const std::vector<float>& values) {
    buffers.push_back(device.alloc(MemCategory::Activations, DType::F32,
                                   {offset_elems + static_cast<std::int64_t>(values.size())}));
    std::copy(values.begin(), values.end(), buffers.back().as<float>().begin() + offset_elems);
    return buffers.back().as<float>().subspan(offset_elems);
  };
  const auto x = place(random_normals(1, rows * in)), w = place(random_normals(2, in * out));
  const auto b = place(random_normals(3, out)), dy = place(random_normals(4, rows * out));
  const auto y = place(std::vector<float>(rows * out));
  const auto dw = place(random_normals(5, in * out)), db = place(random_normals(6, out));
  const auto dx = place(std::vector<float>(rows * in));
  device.conv1d_forward(x, w, b, y, rows, in, out);
  device.conv1d_backward(x, w, dy, dw, db, dx, rows, in, out);
  std::vector<float> results;
  for (const auto& values : {y, dw, db, dx})
    results.insert(results.end(), values.begin(), values.end());
  return results;
}

TEST(GptOps, Conv1dBitsDoNotDependOnBufferAddresses) {
  CpuDevice device;
  // Small, single rows and columns (GEMV), odd sizes with SIMD tails, blocked-GEMM sizes.
  const std::vector<std::array<std::int64_t, 3>> shapes = {
      {6, 4, 5}, {1, 7, 1}, {1, 9, 13}, {11, 1, 6}, {37, 29, 23}, {64, 48, 40}, {130, 67, 5}};
  for (const auto& [rows, in, out] : shapes) {
    const auto aligned = conv1d_results_at(device, 0, rows, in, out);
    for (const std::int64_t offset : {1, 3, 5}) {
      const auto shifted = conv1d_results_at(device, offset, rows, in, out);
      EXPECT_EQ(std::memcmp(aligned.data(), shifted.data(), aligned.size() * sizeof(float)), 0)
          << "rows " << rows << " in " << in << " out " << out << ": offset " << offset;
    }
  }
}

}  // namespace
}  // namespace zl
