// cpu_device.cpp — the CPU kernels. Products go through cpu_gemm.hpp (Eigen at the CPU's vector
// width, in tiles fixed by shape); bias sums, GELU and cross-entropy are plain loops whose
// summation order is written down, cut into pieces by shape alone for the device's threads. The
// GPT-2 kernels: cpu_gpt_kernels.cpp.
#include "ops/cpu/cpu_device.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <numbers>
#include <vector>

#include "core/error.hpp"
#include "core/huge_pages.hpp"
#include "ops/cpu/cpu_gemm.hpp"
#include "ops/cpu/cpu_kernels.hpp"
#include "ops/cpu/cpu_thread_pool.hpp"

namespace zl {

using cpu::for_each_piece;

namespace {

// Cache lines for every block; whole pages for large ones, so that a swap file's O_DIRECT blocks
// move straight in and out of them (IoQueue skips its staging copy for page-aligned blocks), and
// whole huge pages from 2 MiB up, so that a block may ask for them (huge_pages.hpp).
constexpr std::size_t kPageAlignFromBytes = 1 << 20;
std::align_val_t alignment_of(std::size_t bytes) {
  if (bytes >= kHugePageBytes) return std::align_val_t{kHugePageBytes};
  return std::align_val_t{bytes >= kPageAlignFromBytes ? 4096u : 64u};
}

// The host copies a swap file moves: the optimizer's units (engines/optimizer_swap.cpp) and
// ZeRO-3's parameter shards (engines/param_swap.cpp).
bool moved_by_swap_files(MemCategory category) {
  return category == MemCategory::HostMaster || category == MemCategory::HostOptimizer ||
         category == MemCategory::HostParams;
}

}  // namespace

CpuDevice::CpuDevice(int threads, cpu::Grain grain)
    : pool_(std::make_unique<cpu::CpuThreadPool>(threads, grain)) {}

CpuDevice::~CpuDevice() {
  release_typed_scratch();
  for (const auto& [bytes, ptr] : cached_) ::operator delete(ptr, alignment_of(bytes));
}

int CpuDevice::threads() const {
  return pool_->threads();
}

void* CpuDevice::take_block(std::size_t bytes, bool huge_pages) {
  const auto [first, last] = cached_.equal_range(bytes);
  for (auto cached = first; cached != last; ++cached) {
    void* ptr = cached->second;
    if (huge_blocks_.contains(ptr) != huge_pages) continue;
    cached_.erase(cached);
    cached_bytes_ -= bytes;
    return ptr;
  }
  void* ptr = ::operator new(bytes, alignment_of(bytes));
  if (huge_pages) {
    advise_huge_pages(ptr, bytes);
    huge_blocks_.insert(ptr);
  }
  return ptr;
}

void* CpuDevice::fill_block(void* ptr, std::size_t bytes, Contents contents) {
  std::memset(ptr, contents == Contents::Zero ? 0 : kUnsetByte, bytes);
  return ptr;
}

void* CpuDevice::allocate(std::size_t bytes) {
  return fill_block(take_block(bytes), bytes, Contents::Zero);
}

void* CpuDevice::allocate_unset(std::size_t bytes) {
  return fill_block(take_block(bytes), bytes, Contents::Unset);
}

void* CpuDevice::allocate_for(MemCategory category, std::size_t bytes, Contents contents) {
  if (bytes < kHugePageBytes || !moved_by_swap_files(category)) {
    return Allocator::allocate_for(category, bytes, contents);  // allocate() or allocate_unset()
  }
  return fill_block(take_block(bytes, /*huge_pages=*/true), bytes, contents);
}

void CpuDevice::deallocate(void* ptr, std::size_t bytes) {
  if (bytes >= kCacheMinBytes && cached_bytes_ + bytes <= kCacheMaxBytes) {
    cached_.emplace(bytes, ptr);
    cached_bytes_ += bytes;
    return;
  }
  if (bytes >= kHugePageBytes) huge_blocks_.erase(ptr);  // only such blocks may be in it
  // The unsized form: clang enables sized deallocation only with -fsized-deallocation.
  ::operator delete(ptr, alignment_of(bytes));
}

void CpuDevice::do_linear_forward(std::span<const float> x, std::span<const float> w,
                                  std::span<const float> b, std::span<float> y, std::int64_t rows,
                                  std::int64_t in, std::int64_t out) {
  // y is [rows, out] = x [rows, in] * w^T [in, out]
  cpu::gemm({.a = {x.data(), in, false},
             .b = {w.data(), in, true},
             .c = y.data(),
             .c_stride_elems = out,
             .m = rows,
             .n = out,
             .k = in},
            pool());
  if (!b.empty()) cpu::add_bias_rows(pool(), b, y, rows, out);
}

void CpuDevice::do_linear_backward(std::span<const float> x, std::span<const float> w,
                                   std::span<const float> dy, std::span<float> dw,
                                   std::span<float> db, std::span<float> dx, std::int64_t rows,
                                   std::int64_t in, std::int64_t out) {
  // dw is [out, in] += dy^T [out, rows] * x [rows, in]
  cpu::gemm({.a = {dy.data(), out, true},
             .b = {x.data(), in, false},
             .c = dw.data(),
             .c_stride_elems = in,
             .m = out,
             .n = in,
             .k = rows,
             .accumulate = true},
            pool());
  if (!db.empty()) cpu::add_column_sums(pool(), dy, db, rows, out);
  // dx is [rows, in] = dy [rows, out] * w [out, in]
  if (!dx.empty()) {
    cpu::gemm({.a = {dy.data(), out, false},
               .b = {w.data(), in, false},
               .c = dx.data(),
               .c_stride_elems = in,
               .m = rows,
               .n = in,
               .k = out},
              pool());
  }
}

void CpuDevice::do_gelu_forward(std::span<const float> x, std::span<float> y) {
  constexpr double kInvSqrt2 = 1.0 / std::numbers::sqrt2;
  for_each_piece(pool(), static_cast<std::int64_t>(x.size()),
                 [&](std::int64_t begin, std::int64_t end) {
                   for (std::int64_t i = begin; i < end; ++i) {
                     const double v = x[i];
                     y[i] = static_cast<float>(0.5 * v * (1.0 + std::erf(v * kInvSqrt2)));
                   }
                 });
}

void CpuDevice::do_gelu_backward(std::span<const float> x, std::span<const float> dy,
                                 std::span<float> dx) {
  constexpr double kInvSqrt2 = 1.0 / std::numbers::sqrt2;
  constexpr double kInvSqrt2Pi = std::numbers::inv_sqrtpi / std::numbers::sqrt2;
  for_each_piece(pool(), static_cast<std::int64_t>(x.size()),
                 [&](std::int64_t begin, std::int64_t end) {
                   for (std::int64_t i = begin; i < end; ++i) {
                     const double v = x[i];
                     const double cdf = 0.5 * (1.0 + std::erf(v * kInvSqrt2));  // Phi(x)
                     const double pdf = kInvSqrt2Pi * std::exp(-0.5 * v * v);   // phi(x)
                     dx[i] = static_cast<float>(static_cast<double>(dy[i]) * (cdf + v * pdf));
                   }
                 });
}

void CpuDevice::do_add_mean_loss(std::span<const double> loss_sum, std::int64_t rows,
                                 std::span<float> total) {
  total[0] = total[0] + static_cast<float>(loss_sum[0] / static_cast<double>(rows));
}

void CpuDevice::do_cross_entropy_add_forward_backward(
    std::span<const float> logits, std::span<const std::int64_t> labels, std::span<float> dlogits,
    std::int64_t rows, std::int64_t classes, std::int64_t padded_classes, std::int64_t mean_rows,
    std::span<double> loss_sum) {
  loss_sum[0] =
      loss_sum[0] + CpuDevice::do_cross_entropy_forward_backward(
                        logits, labels, dlogits, rows, classes, padded_classes, mean_rows);
}

double CpuDevice::do_cross_entropy_forward_backward(std::span<const float> logits,
                                                    std::span<const std::int64_t> labels,
                                                    std::span<float> dlogits, std::int64_t rows,
                                                    std::int64_t classes,
                                                    std::int64_t padded_classes,
                                                    std::int64_t mean_rows) {
  for (std::int64_t r = 0; r < rows; ++r) {
    ZL_CHECK(labels[r] >= 0 && labels[r] < classes,
             "cross_entropy: row {} has label {}, outside [0, {})", r, labels[r], classes);
  }
  std::vector<double> row_losses(static_cast<std::size_t>(rows));
  for_each_piece(
      pool(), rows, cpu::rows_per_piece(pool(), padded_classes),
      [&](std::int64_t begin, std::int64_t end) {
        std::vector<double> exps(static_cast<std::size_t>(classes));
        for (std::int64_t r = begin; r < end; ++r) {
          // logits row r is [padded_classes]: the classes, then padding the loss never reads
          const float* row = logits.data() + r * padded_classes;
          float* drow = dlogits.data() + r * padded_classes;
          const std::int64_t label = labels[r];
          // Subtracting the row max keeps every exp in (0, 1], so the sum cannot overflow.
          double max_logit = row[0];
          for (std::int64_t c = 1; c < classes; ++c)
            max_logit = std::max(max_logit, static_cast<double>(row[c]));
          double exp_sum = 0.0;
          for (std::int64_t c = 0; c < classes; ++c) {
            exps[c] = std::exp(row[c] - max_logit);
            exp_sum += exps[c];
          }
          row_losses[r] = std::log(exp_sum) - (row[label] - max_logit);
          for (std::int64_t c = 0; c < classes; ++c) {
            const double target = c == label ? 1.0 : 0.0;
            drow[c] =
                static_cast<float>((exps[c] / exp_sum - target) / static_cast<double>(mean_rows));
          }
          // The padded columns are not classes: no probability, so no gradient.
          std::fill(drow + classes, drow + padded_classes, 0.0f);
        }
      });
  // The row losses summed in row order.
  double loss_sum = 0.0;
  for (const double loss : row_losses) loss_sum += loss;
  return loss_sum;
}

}  // namespace zl
