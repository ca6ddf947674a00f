// cuda_device_test.cpp — every kernel of the CUDA Device against the CPU Device (the answer key) on
// seeded random inputs of odd sizes. Tolerances, relative to the largest |cpu| value:
//   1e-5  fp32 kernels (cuBLAS's summation order differs from Eigen's; the double-precision
//         kernels differ from the CPU only in the order of their block-wide sums)
//   bits  sums whose order the GPU keeps (bias gradients, LayerNorm weight and bias gradients,
//         embeddings)
//   1e-4  the bf16 GEMM against a double reference on the same bf16-rounded inputs (fp32
//         accumulation over K = 96)
// Every test skips when the machine has no GPU.
#include "ops/cuda/cuda_device.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "gpu_test_support.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "ops/gelu_tanh.hpp"
#include "support/typed_kernel_checks.hpp"

namespace zl {
namespace {

using test::cspan_of;
using test::download;
using test::expect_close;
using test::expect_same_bits;
using test::random_floats;
using test::span_of;
using test::upload;

constexpr double kTolerance = 1e-5;

class GpuDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ZL_REQUIRE_GPU();
    gpu_ = std::make_unique<CudaDevice>(0);
  }
  CpuDevice cpu_;
  std::unique_ptr<CudaDevice> gpu_;
};

TEST_F(GpuDeviceTest, LinearForwardMatchesCpu) {
  constexpr std::int64_t kRows = 37, kIn = 70, kOut = 53;
  const auto x = random_floats(kRows * kIn, 1), w = random_floats(kOut * kIn, 2),
             b = random_floats(kOut, 3);
  for (const bool with_bias : {true, false}) {
    std::vector<float> y(kRows * kOut);
    const std::vector<float> bias = with_bias ? b : std::vector<float>{};
    cpu_.linear_forward(x, w, bias, y, kRows, kIn, kOut);
    Buffer gx = upload(*gpu_, x), gw = upload(*gpu_, w), gb = upload(*gpu_, b);
    Buffer gy = gpu_->alloc(MemCategory::Activations, DType::F32, {kRows * kOut});
    gpu_->linear_forward(cspan_of(gx), cspan_of(gw),
                         with_bias ? cspan_of(gb) : std::span<const float>{}, span_of(gy), kRows,
                         kIn, kOut);
    expect_close(download(*gpu_, gy), y, kTolerance, with_bias ? "y (bias)" : "y (no bias)");
  }
}

// A host wait counts the time it blocked the host: fp32 GEMMs of 2048 cubed (about 17 GFLOP
// each) keep the GPU busy well after their launches return, so the synchronize after them blocks,
// and host_wait_ms grows by that time; a wait on an idle GPU adds next to nothing.
TEST_F(GpuDeviceTest, AHostWaitCountsTheTimeItBlocked) {
  constexpr std::int64_t kN = 2048;
  Buffer x = upload(*gpu_, random_floats(kN * kN, 4)), w = upload(*gpu_, random_floats(kN * kN, 5));
  Buffer y = gpu_->alloc(MemCategory::Activations, DType::F32, {kN * kN});
  gpu_->synchronize();
  const std::int64_t waits = gpu_->host_waits();
  const double waited_ms = gpu_->host_wait_ms();
  for (int i = 0; i < 40; ++i) {
    gpu_->linear_forward(cspan_of(x), cspan_of(w), {}, span_of(y), kN, kN, kN);
  }
  gpu_->synchronize();
  EXPECT_EQ(gpu_->host_waits(), waits + 1);
  const double busy_wait_ms = gpu_->host_wait_ms() - waited_ms;
  EXPECT_GT(busy_wait_ms, 1.0) << "40 GEMMs of 17 GFLOP each";
  gpu_->synchronize();
  EXPECT_LT(gpu_->host_wait_ms() - waited_ms - busy_wait_ms, busy_wait_ms) << "an idle GPU";
}

TEST_F(GpuDeviceTest, LinearWithNoInputFeaturesIsTheBias) {
  constexpr std::int64_t kRows = 3, kOut = 4;  // in = 0: an empty sum, then the bias
  const auto b = random_floats(kOut, 40);
  std::vector<float> y(kRows * kOut);
  cpu_.linear_forward({}, {}, b, y, kRows, 0, kOut);
  Buffer gb = upload(*gpu_, b);
  Buffer gy = upload(*gpu_, random_floats(kRows * kOut, 41));  // overwritten
  gpu_->linear_forward({}, {}, cspan_of(gb), span_of(gy), kRows, 0, kOut);
  expect_same_bits(download(*gpu_, gy), y, "y");
}

TEST_F(GpuDeviceTest, LinearBackwardMatchesCpu) {
  constexpr std::int64_t kIn = 70, kOut = 53;
  // 1000 rows: db sums four chunks of rows (ops/column_sums.hpp), in parallel on the GPU
  for (const std::int64_t kRows : std::vector<std::int64_t>{37, 1000}) {
    SCOPED_TRACE(::testing::Message() << kRows << " rows");
    const auto x = random_floats(kRows * kIn, 4), w = random_floats(kOut * kIn, 5),
               dy = random_floats(kRows * kOut, 6);
    // dw and db accumulate: start them non-zero.
    auto dw = random_floats(kOut * kIn, 7), db = random_floats(kOut, 8);
    std::vector<float> dx(kRows * kIn);
    Buffer gx = upload(*gpu_, x), gw = upload(*gpu_, w), gdy = upload(*gpu_, dy),
           gdw = upload(*gpu_, dw), gdb = upload(*gpu_, db);
    Buffer gdx = gpu_->alloc(MemCategory::Activations, DType::F32, {kRows * kIn});
    cpu_.linear_backward(x, w, dy, dw, db, dx, kRows, kIn, kOut);
    gpu_->linear_backward(cspan_of(gx), cspan_of(gw), cspan_of(gdy), span_of(gdw), span_of(gdb),
                          span_of(gdx), kRows, kIn, kOut);
    expect_close(download(*gpu_, gdw), dw, kTolerance, "dw");
    expect_same_bits(download(*gpu_, gdb), db, "db");
    expect_close(download(*gpu_, gdx), dx, kTolerance, "dx");
  }
}

TEST_F(GpuDeviceTest, Conv1dForwardAndBackwardMatchCpu) {
  constexpr std::int64_t kRows = 29, kIn = 48, kOut = 144;
  const auto x = random_floats(kRows * kIn, 9), w = random_floats(kIn * kOut, 10),
             b = random_floats(kOut, 11), dy = random_floats(kRows * kOut, 12);
  std::vector<float> y(kRows * kOut), dx(kRows * kIn);
  auto dw = random_floats(kIn * kOut, 13), db = random_floats(kOut, 14);
  Buffer gx = upload(*gpu_, x), gw = upload(*gpu_, w), gb = upload(*gpu_, b),
         gdy = upload(*gpu_, dy), gdw = upload(*gpu_, dw), gdb = upload(*gpu_, db);
  Buffer gy = gpu_->alloc(MemCategory::Activations, DType::F32, {kRows * kOut});
  Buffer gdx = gpu_->alloc(MemCategory::Activations, DType::F32, {kRows * kIn});
  cpu_.conv1d_forward(x, w, b, y, kRows, kIn, kOut);
  cpu_.conv1d_backward(x, w, dy, dw, db, dx, kRows, kIn, kOut);
  gpu_->conv1d_forward(cspan_of(gx), cspan_of(gw), cspan_of(gb), span_of(gy), kRows, kIn, kOut);
  gpu_->conv1d_backward(cspan_of(gx), cspan_of(gw), cspan_of(gdy), span_of(gdw), span_of(gdb),
                        span_of(gdx), kRows, kIn, kOut);
  expect_close(download(*gpu_, gy), y, kTolerance, "y");
  expect_close(download(*gpu_, gdw), dw, kTolerance, "dw");
  expect_same_bits(download(*gpu_, gdb), db, "db");
  expect_close(download(*gpu_, gdx), dx, kTolerance, "dx");
}

// The erf GELU computes in double as the CPU does; the tanh GELU computes in fp32, each element
// within 8e-6 of the size of the terms it adds (the same fp32 code with the host's expf is within
// 2.4e-6 on these inputs; the error of exp(-2|u|) grows with |u|): |x s| forward, |dy| (s + |2 x s
// (1 - s) du/dx|) backward, s = sigmoid(2u). 1000 elements take the 8-wide kernels, 997 the
// one-element ones.
TEST_F(GpuDeviceTest, GeluKernelsMatchCpu) {
  const auto each_within = [](const std::vector<float>& actual, const std::vector<float>& expected,
                              const std::vector<double>& terms, const char* what) {
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const double error = std::abs(static_cast<double>(actual[i]) - expected[i]);
      ASSERT_LE(error, 8e-6 * terms[i] + 1e-30)
          << what << " element " << i << ": gpu " << actual[i] << ", cpu " << expected[i];
    }
  };
  for (const std::int64_t elems : {1000, 997}) {
    SCOPED_TRACE(std::to_string(elems) + " elements");
    const auto x = random_floats(elems, 15, -6.0f, 6.0f), dy = random_floats(elems, 16);
    Buffer gx = upload(*gpu_, x), gdy = upload(*gpu_, dy);
    Buffer gout = gpu_->alloc(MemCategory::Activations, DType::F32, {elems});
    std::vector<float> out(static_cast<std::size_t>(elems));
    cpu_.gelu_forward(x, out);
    gpu_->gelu_forward(cspan_of(gx), span_of(gout));
    expect_close(download(*gpu_, gout), out, kTolerance, "gelu_forward");
    cpu_.gelu_backward(x, dy, out);
    gpu_->gelu_backward(cspan_of(gx), cspan_of(gdy), span_of(gout));
    expect_close(download(*gpu_, gout), out, kTolerance, "gelu_backward");
    std::vector<double> forward_terms(out.size()), backward_terms(out.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      const double v = x[i];
      const gelu_tanh::Sigmoids g = gelu_tanh::sigmoids(v);
      const double du_dx = gelu_tanh::kSqrt2OverPi * (1.0 + 3.0 * gelu_tanh::kCoeff * v * v);
      forward_terms[i] = std::abs(v * g.s);
      backward_terms[i] =
          std::abs(static_cast<double>(dy[i])) * (g.s + std::abs(2.0 * v * g.s * g.s_neg * du_dx));
    }
    cpu_.gelu_tanh_forward(x, out);
    gpu_->gelu_tanh_forward(cspan_of(gx), span_of(gout));
    each_within(download(*gpu_, gout), out, forward_terms, "gelu_tanh_forward");
    cpu_.gelu_tanh_backward(x, dy, out);
    gpu_->gelu_tanh_backward(cspan_of(gx), cspan_of(gdy), span_of(gout));
    each_within(download(*gpu_, gout), out, backward_terms, "gelu_tanh_backward");
  }
}

// Rows padded as the GPT pads its vocabulary: the padded columns hold large logits that would
// dominate the softmax if it read them; both devices leave them out and give them dlogits 0.
TEST_F(GpuDeviceTest, CrossEntropyMatchesCpu) {
  // More classes than threads per block, in rows padded to a multiple of 128.
  constexpr std::int64_t kRows = 9, kClasses = 1000, kPadded = 1024;
  auto logits = random_floats(kRows * kPadded, 17, -8.0f, 8.0f);
  for (std::int64_t r = 0; r < kRows; ++r) {
    for (std::int64_t c = kClasses; c < kPadded; ++c) logits[r * kPadded + c] = 50.0f;
  }
  std::vector<std::int64_t> labels(kRows);
  for (std::int64_t r = 0; r < kRows; ++r) labels[r] = (r * 131) % kClasses;
  std::vector<float> dlogits(kRows * kPadded, 1.0f);
  const float loss =
      cpu_.cross_entropy_forward_backward(logits, labels, dlogits, kRows, kClasses, kPadded);
  Buffer glogits = upload(*gpu_, logits), glabels = upload(*gpu_, labels, DType::I64);
  Buffer gdlogits = upload(*gpu_, std::vector<float>(kRows * kPadded, 1.0f));
  const float gpu_loss = gpu_->cross_entropy_forward_backward(
      cspan_of(glogits), glabels.as<std::int64_t>(), span_of(gdlogits), kRows, kClasses, kPadded);
  EXPECT_NEAR(gpu_loss, loss, kTolerance * std::abs(loss));
  const std::vector<float> gpu_dlogits = download(*gpu_, gdlogits);
  expect_close(gpu_dlogits, dlogits, kTolerance, "dlogits");
  for (std::int64_t r = 0; r < kRows; ++r) {
    for (std::int64_t c = kClasses; c < kPadded; ++c) {
      ASSERT_EQ(gpu_dlogits[r * kPadded + c], 0.0f) << "row " << r << ", padded column " << c;
    }
  }

  labels[3] = kClasses;  // out of range: the GPU must say which row, as the CPU does
  Buffer bad_labels = upload(*gpu_, labels, DType::I64);
  try {
    gpu_->cross_entropy_forward_backward(cspan_of(glogits), bad_labels.as<std::int64_t>(),
                                         span_of(gdlogits), kRows, kClasses, kPadded);
    ADD_FAILURE() << "a label outside [0, classes) was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("row 3 has label 1000"), std::string::npos)
        << error.what();
  }
}

// A chunk of a larger batch, as the GPT's 16-bit LM head runs it: dlogits divide by the whole
// batch's rows and the chunk's loss sum comes back in double. Rows of 705 elements are not
// 16-byte aligned, so the kernel reads one column a thread (CrossEntropyMatchesCpu's read 8).
TEST_F(GpuDeviceTest, CrossEntropyOfAChunkMatchesCpu) {
  constexpr std::int64_t kRows = 5, kBatchRows = 12, kClasses = 700, kPadded = 705;
  const auto logits = random_floats(kRows * kPadded, 18, -8.0f, 8.0f);
  std::vector<std::int64_t> labels(kRows);
  for (std::int64_t r = 0; r < kRows; ++r) labels[r] = (r * 97) % kClasses;
  std::vector<float> dlogits(kRows * kPadded);
  const double sum = cpu_.cross_entropy_sum_forward_backward(logits, labels, dlogits, kRows,
                                                             kClasses, kPadded, kBatchRows);
  Buffer glogits = upload(*gpu_, logits), glabels = upload(*gpu_, labels, DType::I64);
  const double gpu_sum = gpu_->cross_entropy_sum_forward_backward(
      cspan_of(glogits), glabels.as<std::int64_t>(), span_of(glogits), kRows, kClasses, kPadded,
      kBatchRows);  // in place, as the GPT writes the gradient over the logits
  EXPECT_NEAR(gpu_sum, sum, kTolerance * std::abs(sum));
  expect_close(download(*gpu_, glogits), dlogits, kTolerance, "dlogits");
}

// The add form keeps the sum on the device: two chunks added there are, bit for bit, the two sums
// the GPU returns added on the host, and the calls make the host wait for nothing. A bad label
// is reported at the next host wait, naming its row.
TEST_F(GpuDeviceTest, CrossEntropyAddsItsChunksOnTheDevice) {
  constexpr std::int64_t kRows = 5, kBatchRows = 10, kClasses = 700, kPadded = 768;
  const auto logits = random_floats(2 * kRows * kPadded, 31, -8.0f, 8.0f);
  std::vector<std::int64_t> labels(2 * kRows);
  for (std::int64_t r = 0; r < 2 * kRows; ++r) labels[r] = (r * 89) % kClasses;
  Buffer glabels = upload(*gpu_, labels, DType::I64);
  const auto chunk = [&](Buffer& all, std::int64_t c) {
    return span_of(all).subspan(static_cast<std::size_t>(c * kRows * kPadded),
                                static_cast<std::size_t>(kRows * kPadded));
  };
  const auto chunk_labels = [&](std::int64_t c) {
    return glabels.as<std::int64_t>().subspan(static_cast<std::size_t>(c * kRows), kRows);
  };
  Buffer returned = upload(*gpu_, logits);
  double host_sum = 0.0;
  for (std::int64_t c = 0; c < 2; ++c) {
    host_sum += gpu_->cross_entropy_sum_forward_backward(chunk(returned, c), chunk_labels(c),
                                                         chunk(returned, c), kRows, kClasses,
                                                         kPadded, kBatchRows);
  }
  Buffer added = upload(*gpu_, logits);
  Buffer loss_sum = gpu_->alloc(MemCategory::CommBuffer, DType::F64, {1});
  const std::int64_t waits = gpu_->host_waits();
  for (std::int64_t c = 0; c < 2; ++c) {
    gpu_->cross_entropy_add_forward_backward(chunk(added, c), chunk_labels(c), chunk(added, c),
                                             kRows, kClasses, kPadded, kBatchRows,
                                             loss_sum.as<double>());
  }
  EXPECT_EQ(gpu_->host_waits(), waits);
  double device_sum = 0.0;
  gpu_->copy_to_host(&device_sum, loss_sum.data(), sizeof(device_sum));
  EXPECT_EQ(device_sum, host_sum);
  expect_same_bits(download(*gpu_, added), download(*gpu_, returned), "dlogits");

  labels[kRows + 2] = kClasses;  // the second chunk's row 2
  Buffer bad_labels = upload(*gpu_, labels, DType::I64);
  gpu_->cross_entropy_add_forward_backward(
      chunk(added, 1), bad_labels.as<std::int64_t>().subspan(kRows, kRows), chunk(added, 1), kRows,
      kClasses, kPadded, kBatchRows, loss_sum.as<double>());
  try {
    gpu_->synchronize();
    ADD_FAILURE() << "a label outside [0, classes) was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("row 2 has label 700"), std::string::npos)
        << error.what();
  }
  gpu_->synchronize();  // reported once: the device goes on
}

TEST_F(GpuDeviceTest, EmbeddingsMatchCpuBitForBit) {
  constexpr std::int64_t kBatch = 3, kSeq = 11, kChannels = 40, kVocab = 17;
  std::vector<std::int64_t> tokens(kBatch * kSeq);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = (i * 7) % 5;  // many repeats
  const auto wte = random_floats(kVocab * kChannels, 18), wpe = random_floats(kSeq * kChannels, 19),
             dx = random_floats(kBatch * kSeq * kChannels, 20);
  auto dwte = random_floats(kVocab * kChannels, 21), dwpe = random_floats(kSeq * kChannels, 22);
  std::vector<float> x(kBatch * kSeq * kChannels);
  Buffer gtokens = upload(*gpu_, tokens, DType::I64), gwte = upload(*gpu_, wte),
         gwpe = upload(*gpu_, wpe), gdx = upload(*gpu_, dx), gdwte = upload(*gpu_, dwte),
         gdwpe = upload(*gpu_, dwpe);
  Buffer gxout = gpu_->alloc(MemCategory::Activations, DType::F32, {kBatch * kSeq * kChannels});
  cpu_.embedding_forward(tokens, wte, wpe, x, kBatch, kSeq, kChannels, kVocab);
  cpu_.embedding_backward(tokens, dx, dwte, dwpe, kBatch, kSeq, kChannels, kVocab);
  const auto gtok = gtokens.as<std::int64_t>();
  gpu_->embedding_forward(gtok, cspan_of(gwte), cspan_of(gwpe), span_of(gxout), kBatch, kSeq,
                          kChannels, kVocab);
  gpu_->embedding_backward(gtok, cspan_of(gdx), span_of(gdwte), span_of(gdwpe), kBatch, kSeq,
                           kChannels, kVocab);
  expect_same_bits(download(*gpu_, gxout), x, "x");
  expect_same_bits(download(*gpu_, gdwte), dwte, "dwte");
  expect_same_bits(download(*gpu_, gdwpe), dwpe, "dwpe");

  tokens[kSeq + 4] = kVocab;  // row 1, position 4
  Buffer bad_tokens = upload(*gpu_, tokens, DType::I64);
  // The kernel skips the token and flags it; the host learns of it at its next wait, not before.
  const std::int64_t waits = gpu_->host_waits();
  gpu_->embedding_forward(bad_tokens.as<std::int64_t>(), cspan_of(gwte), cspan_of(gwpe),
                          span_of(gxout), kBatch, kSeq, kChannels, kVocab);
  EXPECT_EQ(gpu_->host_waits(), waits);
  try {
    gpu_->synchronize();
    ADD_FAILURE() << "a token outside the vocabulary was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("token 17 at row 1, position 4"), std::string::npos)
        << error.what();
  }
}

TEST_F(GpuDeviceTest, LayerNormMatchesCpu) {
  constexpr std::int64_t kChannels = 300;  // more channels than threads per block
  // 1000 rows: dweight and dbias sum four chunks of rows (ops/column_sums.hpp)
  for (const std::int64_t kRows : std::vector<std::int64_t>{19, 1000}) {
    SCOPED_TRACE(::testing::Message() << kRows << " rows");
    const auto x = random_floats(kRows * kChannels, 23, -3.0f, 5.0f),
               weight = random_floats(kChannels, 24), bias = random_floats(kChannels, 25),
               dy = random_floats(kRows * kChannels, 26);
    std::vector<float> y(kRows * kChannels), mean(kRows), rstd(kRows);
    cpu_.layernorm_forward(x, weight, bias, y, mean, rstd, kRows, kChannels);
    Buffer gx = upload(*gpu_, x), gweight = upload(*gpu_, weight), gbias = upload(*gpu_, bias);
    Buffer gy = gpu_->alloc(MemCategory::Activations, DType::F32, {kRows * kChannels});
    Buffer gmean = gpu_->alloc(MemCategory::Activations, DType::F32, {kRows});
    Buffer grstd = gpu_->alloc(MemCategory::Activations, DType::F32, {kRows});
    gpu_->layernorm_forward(cspan_of(gx), cspan_of(gweight), cspan_of(gbias), span_of(gy),
                            span_of(gmean), span_of(grstd), kRows, kChannels);
    expect_close(download(*gpu_, gy), y, kTolerance, "y");
    expect_close(download(*gpu_, gmean), mean, kTolerance, "mean");
    expect_close(download(*gpu_, grstd), rstd, kTolerance, "rstd");

    // Backward from the same inputs (the CPU's mean and rstd) on both devices; dx, dweight and
    // dbias accumulate, so they start non-zero.
    auto dx = random_floats(kRows * kChannels, 27), dweight = random_floats(kChannels, 28),
         dbias = random_floats(kChannels, 29);
    Buffer gmean_cpu = upload(*gpu_, mean), grstd_cpu = upload(*gpu_, rstd),
           gdy = upload(*gpu_, dy), gdx = upload(*gpu_, dx), gdweight = upload(*gpu_, dweight),
           gdbias = upload(*gpu_, dbias);
    cpu_.layernorm_backward(x, weight, mean, rstd, dy, dx, dweight, dbias, kRows, kChannels);
    gpu_->layernorm_backward(cspan_of(gx), cspan_of(gweight), cspan_of(gmean_cpu),
                             cspan_of(grstd_cpu), cspan_of(gdy), span_of(gdx), span_of(gdweight),
                             span_of(gdbias), kRows, kChannels);
    expect_close(download(*gpu_, gdx), dx, kTolerance, "dx");
    expect_same_bits(download(*gpu_, gdweight), dweight, "dweight");
    expect_same_bits(download(*gpu_, gdbias), dbias, "dbias");
  }
}

TEST_F(GpuDeviceTest, AttentionMatchesCpu) {
  constexpr std::int64_t kBatch = 2, kSeq = 300, kChannels = 48, kHeads = 4;  // T > block size
  const auto qkv = random_floats(kBatch * kSeq * 3 * kChannels, 30, -2.0f, 2.0f),
             dout = random_floats(kBatch * kSeq * kChannels, 31);
  std::vector<float> stats(kBatch * kHeads * kSeq * kAttentionStatsPerRow),
      out(kBatch * kSeq * kChannels), dqkv(kBatch * kSeq * 3 * kChannels);
  cpu_.attention_forward(qkv, stats, out, kBatch, kSeq, kChannels, kHeads);
  cpu_.attention_backward(qkv, stats, out, dout, dqkv, kBatch, kSeq, kChannels, kHeads);
  Buffer gqkv = upload(*gpu_, qkv), gdout = upload(*gpu_, dout);
  Buffer gstats = gpu_->alloc(MemCategory::Activations, DType::F32,
                              {kBatch * kHeads * kSeq * kAttentionStatsPerRow});
  Buffer gout = gpu_->alloc(MemCategory::Activations, DType::F32, {kBatch * kSeq * kChannels});
  gpu_->attention_forward(cspan_of(gqkv), span_of(gstats), span_of(gout), kBatch, kSeq, kChannels,
                          kHeads);
  expect_close(download(*gpu_, gstats), stats, kTolerance, "stats");
  expect_close(download(*gpu_, gout), out, kTolerance, "out");
  // Backward from the CPU's stats and out, so only the backward kernels (and the rebuild) are
  // compared.
  Buffer gstats_cpu = upload(*gpu_, stats), gout_cpu = upload(*gpu_, out);
  Buffer gdqkv = upload(*gpu_, random_floats(dqkv.size(), 32));  // overwritten, not added to
  gpu_->attention_backward(cspan_of(gqkv), cspan_of(gstats_cpu), cspan_of(gout_cpu),
                           cspan_of(gdout), span_of(gdqkv), kBatch, kSeq, kChannels, kHeads);
  expect_close(download(*gpu_, gdqkv), dqkv, kTolerance, "dqkv");
}

// C [M, N] = A [M, K] * B^T (B stored [N, K], as a Linear's weight), summed in double and
// rounded once.
std::vector<float> product_reference(const std::vector<float>& a, const std::vector<float>& b,
                                     std::int64_t m_rows, std::int64_t n_cols, std::int64_t k) {
  std::vector<float> c(static_cast<std::size_t>(m_rows * n_cols));
  for (std::int64_t m = 0; m < m_rows; ++m) {
    for (std::int64_t n = 0; n < n_cols; ++n) {
      double sum = 0.0;
      for (std::int64_t i = 0; i < k; ++i) {
        sum += static_cast<double>(a[m * k + i]) * b[n * k + i];
      }
      c[m * n_cols + n] = static_cast<float>(sum);
    }
  }
  return c;
}

TEST_F(GpuDeviceTest, HalfMatmulMatchesDoubleReferenceOnRoundedInputs) {
  constexpr std::int64_t kM = 33, kN = 65, kK = 96;
  const auto a = random_floats(kM * kK, 33), b = random_floats(kN * kK, 34);
  for (const DType half : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(half));
    const std::vector<float> expected =
        product_reference(test::representable(a, half), test::representable(b, half), kM, kN, kK);
    Buffer ga = test::upload_as(*gpu_, a, half), gb = test::upload_as(*gpu_, b, half);
    Buffer gc = gpu_->alloc(MemCategory::Activations, DType::F32, {kM * kN});
    gpu_->matmul_half(half, false, true, kM, kN, kK, ga.as<std::uint16_t>().data(),
                      gb.as<std::uint16_t>().data(), gc.as<float>().data(), 0.0f);
    expect_close(download(*gpu_, gc), expected, 1e-4, "C");
  }
}

// With bf16 or fp16 GEMMs on, a Linear is the double-precision product of the operands rounded to
// that format, plus the bias; off again, it is the fp32 GEMM.
TEST_F(GpuDeviceTest, HalfGemmsRoundTheOperandsOfEveryLinear) {
  constexpr std::int64_t kRows = 17, kIn = 40, kOut = 24;
  const auto x = random_floats(kRows * kIn, 41), w = random_floats(kOut * kIn, 42);
  const auto bias = random_floats(kOut, 43);
  Buffer gx = upload(*gpu_, x), gw = upload(*gpu_, w), gb = upload(*gpu_, bias);
  Buffer gy = gpu_->alloc(MemCategory::Activations, DType::F32, {kRows * kOut});
  for (const DType half : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(half));
    std::vector<float> expected = product_reference(test::representable(x, half),
                                                    test::representable(w, half), kRows, kOut, kIn);
    for (std::int64_t r = 0; r < kRows; ++r) {
      for (std::int64_t o = 0; o < kOut; ++o) expected[r * kOut + o] += bias[o];
    }
    gpu_->set_half_gemms(half);
    gpu_->linear_forward(cspan_of(gx), cspan_of(gw), cspan_of(gb), span_of(gy), kRows, kIn, kOut);
    gpu_->set_half_gemms(DType::F32);
    expect_close(download(*gpu_, gy), expected, 1e-4, "16-bit linear");
  }
  std::vector<float> fp32(kRows * kOut);
  cpu_.linear_forward(x, w, bias, fp32, kRows, kIn, kOut);
  gpu_->linear_forward(cspan_of(gx), cspan_of(gw), cspan_of(gb), span_of(gy), kRows, kIn, kOut);
  expect_close(download(*gpu_, gy), fp32, 1e-5, "fp32 linear");
  EXPECT_THROW(gpu_->set_half_gemms(DType::I64), Error);
}

TEST_F(GpuDeviceTest, AttentionRejectsHeadsThatDoNotDivideChannels) {
  Buffer qkv = gpu_->alloc(MemCategory::Activations, DType::F32, {1 * 2 * 3 * 10});
  Buffer stats = gpu_->alloc(MemCategory::Activations, DType::F32, {1 * 3 * 2 * 2});
  Buffer out = gpu_->alloc(MemCategory::Activations, DType::F32, {1 * 2 * 10});
  EXPECT_THROW(gpu_->attention_forward(cspan_of(qkv), span_of(stats), span_of(out), 1, 2, 10, 3),
               Error);
}

}  // namespace
}  // namespace zl
