// cpu_device.hpp — the CPU Device: 64-byte aligned host memory (page-aligned from 1 MiB), GEMMs
// through Eigen at the CPU's vector width and every other kernel as plain loops in a fixed order,
// so equal inputs give equal bits at any address; the big kernels shared out over the device's
// own threads in pieces cut by shape alone, so equal inputs give equal bits with any thread count
// too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <unordered_set>

#include "ops/cpu/cpu_grain.hpp"
#include "ops/device.hpp"

namespace zl {

namespace cpu {
class CpuThreadPool;
}  // namespace cpu

/// Host memory and fp32 kernels of one rank. Not thread-safe: one CpuDevice per rank.
class CpuDevice : public Device {
 public:
  /// A device whose kernels run on `threads` threads (the caller and threads - 1 workers), cut
  /// into pieces at `grain`. The thread count never changes a result. Throws zl::Error for
  /// threads outside 1..1024.
  explicit CpuDevice(int threads = 1, cpu::Grain grain = cpu::Grain::Normal);
  ~CpuDevice() override;
  CpuDevice(const CpuDevice&) = delete;
  CpuDevice& operator=(const CpuDevice&) = delete;

  /// The threads the kernels run on.
  int threads() const;

  /// Freed blocks of at least this many bytes are kept for an allocation of the same size (the
  /// NVMe tier's units and the activations come back at the same sizes every step), so their
  /// pages are not faulted in and zeroed by the kernel again.
  static constexpr std::size_t kCacheMinBytes = std::size_t{1} << 20;
  /// At most this many bytes are kept; a block freed beyond it goes back to the system.
  static constexpr std::size_t kCacheMaxBytes = std::size_t{1} << 30;

  /// Returns `bytes` zeroed bytes aligned to 64 (a cache line, and enough for any SIMD load), or
  /// to 4096 when `bytes` is 1 MiB or more (a page, so that O_DIRECT moves them in place).
  void* allocate(std::size_t bytes) override;
  /// Returns `bytes` bytes aligned as allocate() aligns them, every byte kUnsetByte: each fp32,
  /// bf16 and fp16 element a NaN (an int64 one -1), so a kernel that reads one before writing it
  /// spreads NaN into the results every test compares.
  void* allocate_unset(std::size_t bytes) override;
  /// The byte allocate_unset fills with.
  static constexpr unsigned char kUnsetByte = 0xFF;
  /// allocate() or allocate_unset(); a block of 2 MiB or more for the host copies a swap file
  /// moves (HostMaster, HostOptimizer, HostParams) starts on a huge page and asks for huge pages,
  /// which a disk's O_DIRECT blocks move through fastest (core/huge_pages.hpp). Other blocks stay
  /// on small pages: a process's first touch of huge pages can cost more on a virtual machine.
  void* allocate_for(MemCategory category, std::size_t bytes, Contents contents) override;
  /// Frees what allocate returned (keeps it, if it is large and the cache has room).
  void deallocate(void* ptr, std::size_t bytes) override;

  // ---- memory and step work (ops/device.hpp): host memory, so copies are memcpy and the step
  // work is plain loops (cpu_step_ops.cpp); AdamW is optim/adamw_fused.hpp's kernel ----

  void copy_from_host(void* device, const void* host, std::size_t bytes) override;
  void copy_to_host(void* host, const void* device, std::size_t bytes) override;
  void copy(void* to, const void* from, std::size_t bytes) override;
  void fill_zero(void* device, std::size_t bytes) override;
  /// Nothing to wait for: every call is complete on return.
  void synchronize() override {}
  void convert(const void* in, DType in_dtype, void* out, DType out_dtype,
               std::int64_t elems) override;
  void add(void* acc, const void* addend, DType dtype, std::int64_t elems) override;
  void scale(std::span<float> x, float factor) override;
  void round_to(std::span<float> x, DType dtype) override;
  void divide(std::span<float> x, float divisor) override;
  void block_sumsq(std::span<const float> grads, std::span<double> partials) override;
  void adamw_update(std::span<float> params, std::span<const float> grads, std::span<float> exp_avg,
                    std::span<float> exp_avg_sq, const AdamWScalars& scalars) override;

 protected:
  /// The unscaled gradient built in host chunks of 2^18 elements, each chunk's blocks summed by
  /// block_sumsq: no copy of the gradient is ever whole (fp32 gradients not divided are read in
  /// place).
  void do_block_sumsq_unscaled(TensorIn grads, float divisor, std::span<double> partials) override;
  /// optim/grad_norm.hpp's tree_cover_sums.
  void do_tree_cover_sums(std::span<const double> leaves, std::int64_t first_leaf,
                          std::span<double> sums) override;
  /// The unscaled gradient built in host chunks (fp32 gradients read in place when nothing
  /// scales them), each chunk updated by adamw_update and rounded by convert.
  void do_adamw_update_unscaled(std::span<float> master, TensorIn grads, float divisor, float clip,
                                std::span<float> exp_avg, std::span<float> exp_avg_sq,
                                const AdamWScalars& scalars, void* rounded,
                                DType rounded_dtype) override;

  // ---- the kernels (ops/device.hpp), called once Device has checked their arguments ----

  /// y[rows, out] = x[rows, in] * w[out, in]^T, then + b[out] added row by row (unless b is
  /// empty).
  void do_linear_forward(std::span<const float> x, std::span<const float> w,
                         std::span<const float> b, std::span<float> y, std::int64_t rows,
                         std::int64_t in, std::int64_t out) override;
  /// dw[out, in] += dy^T x; db[out] += (dy[0, :] + dy[1, :] + ...) summed in row order unless db
  /// is empty; dx[rows, in] = dy w unless dx is empty.
  void do_linear_backward(std::span<const float> x, std::span<const float> w,
                          std::span<const float> dy, std::span<float> dw, std::span<float> db,
                          std::span<float> dx, std::int64_t rows, std::int64_t in,
                          std::int64_t out) override;
  /// y = 0.5 x (1 + erf(x / sqrt 2)), evaluated in double and rounded once to float.
  void do_gelu_forward(std::span<const float> x, std::span<float> y) override;
  /// dx = dy * (Phi(x) + x phi(x)), evaluated in double and rounded once to float.
  void do_gelu_backward(std::span<const float> x, std::span<const float> dy,
                        std::span<float> dx) override;
  /// Per row: max-subtracted log-sum-exp in double over the first `classes` columns; the row
  /// losses summed in row order and dlogits = (softmax - onehot) / mean_rows, 0 in the padded
  /// columns.
  double do_cross_entropy_forward_backward(std::span<const float> logits,
                                           std::span<const std::int64_t> labels,
                                           std::span<float> dlogits, std::int64_t rows,
                                           std::int64_t classes, std::int64_t padded_classes,
                                           std::int64_t mean_rows) override;
  /// loss_sum[0] = loss_sum[0] + CpuDevice's do_cross_entropy_forward_backward (the loss stays in
  /// device memory: for the detached device, which runs this on its read-write view).
  void do_add_mean_loss(std::span<const double> loss_sum, std::int64_t rows,
                        std::span<float> total) override;
  void do_cross_entropy_add_forward_backward(std::span<const float> logits,
                                             std::span<const std::int64_t> labels,
                                             std::span<float> dlogits, std::int64_t rows,
                                             std::int64_t classes, std::int64_t padded_classes,
                                             std::int64_t mean_rows,
                                             std::span<double> loss_sum) override;

  // ---- GPT-2 kernels (cpu_gpt_kernels.cpp, cpu_attention.cpp): plain loops in a fixed order,
  // sums in double and rounded once to float, except the Conv1D products, which go through
  // Eigen. ----

  /// x[b, t, :] = wte[token, :] + wpe[t, :], one float add per element.
  void do_embedding_forward(std::span<const std::int64_t> tokens, std::span<const float> wte,
                            std::span<const float> wpe, std::span<float> x, std::int64_t batch,
                            std::int64_t seq_len, std::int64_t channels,
                            std::int64_t vocab) override;
  /// Adds dx's rows into dwte and dwpe in the order b = 0.., t = 0.., one float add each.
  void do_embedding_backward(std::span<const std::int64_t> tokens, std::span<const float> dx,
                             std::span<float> dwte, std::span<float> dwpe, std::int64_t batch,
                             std::int64_t seq_len, std::int64_t channels,
                             std::int64_t vocab) override;
  /// Mean and variance (two passes) in double; mean and rstd rounded to float and used as stored
  /// for y, which is evaluated in double and rounded once.
  void do_layernorm_forward(std::span<const float> x, std::span<const float> weight,
                            std::span<const float> bias, std::span<float> y, std::span<float> mean,
                            std::span<float> rstd, std::int64_t rows,
                            std::int64_t channels) override;
  /// Row means and the dweight/dbias column sums in double (rows in order), each result rounded
  /// once (dx: its old value plus the double term).
  void do_layernorm_backward(std::span<const float> x, std::span<const float> weight,
                             std::span<const float> mean, std::span<const float> rstd,
                             std::span<const float> dy, std::span<float> dx,
                             std::span<float> dweight, std::span<float> dbias, std::int64_t rows,
                             std::int64_t channels) override;
  /// y = x * w through Eigen, then + b[out] added row by row.
  void do_conv1d_forward(std::span<const float> x, std::span<const float> w,
                         std::span<const float> b, std::span<float> y, std::int64_t rows,
                         std::int64_t in, std::int64_t out) override;
  /// dw += x^T dy and dx = dy w^T through Eigen; db += the columns of dy summed in row order.
  void do_conv1d_backward(std::span<const float> x, std::span<const float> w,
                          std::span<const float> dy, std::span<float> dw, std::span<float> db,
                          std::span<float> dx, std::int64_t rows, std::int64_t in,
                          std::int64_t out) override;
  /// Evaluated in double and rounded once to float.
  void do_gelu_tanh_forward(std::span<const float> x, std::span<float> y) override;
  /// Evaluated in double and rounded once to float.
  void do_gelu_tanh_backward(std::span<const float> x, std::span<const float> dy,
                             std::span<float> dx) override;
  /// Per (b, h, t): scores, the max-subtracted softmax and the weighted sum of values in double;
  /// the row's stats, its probabilities and out rounded once to float.
  void do_attention_forward(std::span<const float> qkv, std::span<float> stats,
                            std::span<float> out, std::int64_t batch, std::int64_t seq_len,
                            std::int64_t channels, std::int64_t heads) override;
  /// Per (b, h), in the CUDA tiled kernels' float operations and order (cpu_attention.cpp):
  /// delta_t from dout and out, each row's probabilities rebuilt from its scores and stats, then
  /// dq, dk and dv.
  void do_attention_backward(std::span<const float> qkv, std::span<const float> stats,
                             std::span<const float> out, std::span<const float> dout,
                             std::span<float> dqkv, std::int64_t batch, std::int64_t seq_len,
                             std::int64_t channels, std::int64_t heads) override;

  /// The device's threads, for the products (ops/cpu/cpu_gemm.hpp) and the kernels' pieces
  /// (ops/cpu/cpu_kernels.hpp).
  cpu::CpuThreadPool& pool() { return *pool_; }

 private:
  // A block of `bytes` (on huge pages or not, as `huge_pages` says) from the cache, or new; its
  // contents are whatever they were.
  void* take_block(std::size_t bytes, bool huge_pages = false);
  // take_block()'s block, zeroed or unset as `contents` says.
  void* fill_block(void* ptr, std::size_t bytes, Contents contents);

  std::unique_ptr<cpu::CpuThreadPool> pool_;
  std::multimap<std::size_t, void*> cached_;  // freed blocks by size
  std::size_t cached_bytes_ = 0;
  std::unordered_set<void*> huge_blocks_;  // the blocks that ask for huge pages, live or cached
};

}  // namespace zl
