// detached_cpu_device.hpp — a CPU device whose memory the host cannot touch: a stand-in for a GPU
// in tests. Its buffers live in a memfd mapped twice: the addresses it hands out are a PROT_NONE
// view, so host code that reads or writes a Buffer's elements crashes at once; its kernels run
// CpuDevice's code on a read-write view of the same pages, so the bits are CpuDevice's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "ops/cpu/cpu_device.hpp"

namespace zl {

/// CpuDevice's kernels and step work on memory that only the device's calls can reach. Every
/// pointer or span a call takes as device memory must lie in this device's memory: host memory
/// (or another device's) there throws zl::Error. Not thread-safe: one device per rank thread;
/// host_view() may be called from any thread.
class DetachedCpuDevice final : public CpuDevice {
 public:
  /// Creates the device's arena: a sparse memfd (64 GiB of address space, less where the system
  /// refuses that much) that holds only the pages of live buffers. Throws zl::Error if even a
  /// small one cannot be made. Its kernels run on `threads` threads at `grain`, as CpuDevice's.
  explicit DetachedCpuDevice(int threads = 1, cpu::Grain grain = cpu::Grain::Normal);
  /// Unmaps the arena; every buffer of this device must be freed first.
  ~DetachedCpuDevice() override;
  DetachedCpuDevice(const DetachedCpuDevice&) = delete;
  DetachedCpuDevice& operator=(const DetachedCpuDevice&) = delete;

  /// Returns `bytes` zeroed bytes of device memory, page-aligned (4 KiB); the host cannot touch
  /// them. Throws zl::Error when the arena has no free range that large.
  void* allocate(std::size_t bytes) override;
  /// allocate, with every byte CpuDevice::kUnsetByte (written through the read-write view).
  void* allocate_unset(std::size_t bytes) override;
  /// allocate or allocate_unset, for every category: all of this device's memory is its arena.
  void* allocate_for(MemCategory category, std::size_t bytes, Contents contents) override {
    return Allocator::allocate_for(category, bytes, contents);
  }
  /// Frees what allocate returned and gives its pages back to the system (they read as zero when
  /// handed out again).
  void deallocate(void* ptr, std::size_t bytes) override;

  /// Where the host can read and write the device memory at `device_ptr`: its address in the
  /// read-write view of the live DetachedCpuDevice that handed it out, or nullptr when none did.
  /// Thread-safe; for the simulator's collectives (sim/detached_collective_memory.hpp).
  static void* host_view(const void* device_ptr);

  /// Size of this device's arena in bytes: the most it can hand out at once.
  std::size_t arena_bytes() const { return arena_bytes_; }

  // ---- memory and step work: device pointers translated to the read-write view, then
  // CpuDevice's call ----

  /// CpuDevice::copy_from_host into device memory; `host` must not be device memory.
  void copy_from_host(void* device, const void* host, std::size_t bytes) override;
  /// CpuDevice::copy_to_host out of device memory; `host` must not be device memory. A host wait
  /// on a GPU (counted).
  void copy_to_host(void* host, const void* device, std::size_t bytes) override;
  /// Nothing to wait for, but a host wait on a GPU (counted).
  void synchronize() override { count_host_wait(0.0); }
  /// CpuDevice::copy between two buffers of this device.
  void copy(void* to, const void* from, std::size_t bytes) override;
  /// CpuDevice::fill_zero on this device's memory.
  void fill_zero(void* device, std::size_t bytes) override;
  /// CpuDevice::convert on this device's memory.
  void convert(const void* in, DType in_dtype, void* out, DType out_dtype,
               std::int64_t elems) override;
  /// CpuDevice::add on this device's memory.
  void add(void* acc, const void* addend, DType dtype, std::int64_t elems) override;
  /// CpuDevice::scale on this device's memory.
  void scale(std::span<float> x, float factor) override;
  /// CpuDevice::divide on this device's memory.
  void divide(std::span<float> x, float divisor) override;
  /// CpuDevice::round_to on this device's memory.
  void round_to(std::span<float> x, DType dtype) override;
  /// CpuDevice::block_sumsq, both spans device memory.
  void block_sumsq(std::span<const float> grads, std::span<double> partials) override;
  /// CpuDevice::adamw_update on four spans of this device's memory.
  void adamw_update(std::span<float> params, std::span<const float> grads, std::span<float> exp_avg,
                    std::span<float> exp_avg_sq, const AdamWScalars& scalars) override;

 protected:
  // ---- kernels, once Device has checked their arguments: every span is device memory, labels
  // and tokens included ----

  /// CpuDevice::block_sumsq_unscaled on this device's memory.
  void do_block_sumsq_unscaled(TensorIn grads, float divisor, std::span<double> partials) override;
  /// CpuDevice::tree_cover_sums on this device's memory.
  void do_tree_cover_sums(std::span<const double> leaves, std::int64_t first_leaf,
                          std::span<double> sums) override;
  /// CpuDevice::adamw_update_unscaled on this device's memory.
  void do_adamw_update_unscaled(std::span<float> master, TensorIn grads, float divisor, float clip,
                                std::span<float> exp_avg, std::span<float> exp_avg_sq,
                                const AdamWScalars& scalars, void* rounded,
                                DType rounded_dtype) override;

  /// CpuDevice::linear_forward on this device's memory.
  void do_linear_forward(std::span<const float> x, std::span<const float> w,
                         std::span<const float> b, std::span<float> y, std::int64_t rows,
                         std::int64_t in, std::int64_t out) override;
  /// CpuDevice::linear_backward on this device's memory.
  void do_linear_backward(std::span<const float> x, std::span<const float> w,
                          std::span<const float> dy, std::span<float> dw, std::span<float> db,
                          std::span<float> dx, std::int64_t rows, std::int64_t in,
                          std::int64_t out) override;
  /// CpuDevice::gelu_forward on this device's memory.
  void do_gelu_forward(std::span<const float> x, std::span<float> y) override;
  /// CpuDevice::gelu_backward on this device's memory.
  void do_gelu_backward(std::span<const float> x, std::span<const float> dy,
                        std::span<float> dx) override;
  /// CpuDevice::cross_entropy_forward_backward on this device's memory; the loss comes back to
  /// the host, a host wait on a GPU (counted).
  double do_cross_entropy_forward_backward(std::span<const float> logits,
                                           std::span<const std::int64_t> labels,
                                           std::span<float> dlogits, std::int64_t rows,
                                           std::int64_t classes, std::int64_t padded_classes,
                                           std::int64_t mean_rows) override;
  /// CpuDevice::add_mean_loss on this device's memory: no host wait.
  void do_add_mean_loss(std::span<const double> loss_sum, std::int64_t rows,
                        std::span<float> total) override;
  /// CpuDevice::cross_entropy_add_forward_backward on this device's memory: no host wait.
  void do_cross_entropy_add_forward_backward(std::span<const float> logits,
                                             std::span<const std::int64_t> labels,
                                             std::span<float> dlogits, std::int64_t rows,
                                             std::int64_t classes, std::int64_t padded_classes,
                                             std::int64_t mean_rows,
                                             std::span<double> loss_sum) override;
  /// CpuDevice::embedding_forward on this device's memory.
  void do_embedding_forward(std::span<const std::int64_t> tokens, std::span<const float> wte,
                            std::span<const float> wpe, std::span<float> x, std::int64_t batch,
                            std::int64_t seq_len, std::int64_t channels,
                            std::int64_t vocab) override;
  /// CpuDevice::embedding_backward on this device's memory.
  void do_embedding_backward(std::span<const std::int64_t> tokens, std::span<const float> dx,
                             std::span<float> dwte, std::span<float> dwpe, std::int64_t batch,
                             std::int64_t seq_len, std::int64_t channels,
                             std::int64_t vocab) override;
  /// CpuDevice::layernorm_forward on this device's memory.
  void do_layernorm_forward(std::span<const float> x, std::span<const float> weight,
                            std::span<const float> bias, std::span<float> y, std::span<float> mean,
                            std::span<float> rstd, std::int64_t rows,
                            std::int64_t channels) override;
  /// CpuDevice::layernorm_backward on this device's memory.
  void do_layernorm_backward(std::span<const float> x, std::span<const float> weight,
                             std::span<const float> mean, std::span<const float> rstd,
                             std::span<const float> dy, std::span<float> dx,
                             std::span<float> dweight, std::span<float> dbias, std::int64_t rows,
                             std::int64_t channels) override;
  /// CpuDevice::conv1d_forward on this device's memory.
  void do_conv1d_forward(std::span<const float> x, std::span<const float> w,
                         std::span<const float> b, std::span<float> y, std::int64_t rows,
                         std::int64_t in, std::int64_t out) override;
  /// CpuDevice::conv1d_backward on this device's memory.
  void do_conv1d_backward(std::span<const float> x, std::span<const float> w,
                          std::span<const float> dy, std::span<float> dw, std::span<float> db,
                          std::span<float> dx, std::int64_t rows, std::int64_t in,
                          std::int64_t out) override;
  /// CpuDevice::gelu_tanh_forward on this device's memory.
  void do_gelu_tanh_forward(std::span<const float> x, std::span<float> y) override;
  /// CpuDevice::gelu_tanh_backward on this device's memory.
  void do_gelu_tanh_backward(std::span<const float> x, std::span<const float> dy,
                             std::span<float> dx) override;
  /// CpuDevice::attention_forward on this device's memory.
  void do_attention_forward(std::span<const float> qkv, std::span<float> stats,
                            std::span<float> out, std::int64_t batch, std::int64_t seq_len,
                            std::int64_t channels, std::int64_t heads) override;
  /// CpuDevice::attention_backward on this device's memory.
  void do_attention_backward(std::span<const float> qkv, std::span<const float> stats,
                             std::span<const float> out, std::span<const float> dout,
                             std::span<float> dqkv, std::int64_t batch, std::int64_t seq_len,
                             std::int64_t channels, std::int64_t heads) override;

 private:
  // The read-write address of `bytes` bytes at `device` (which must all lie in this arena), for
  // the call named by `where`; nullptr for zero bytes. Throws zl::Error naming the call otherwise.
  void* translate(const void* device, std::size_t bytes,
                  const char* where = __builtin_FUNCTION()) const;

  // `device` as a span of the read-write view (empty spans stay empty, whatever their pointer).
  template <class T>
  std::span<T> view(std::span<T> device,
                    const char* where = __builtin_FUNCTION()) const {
    if (device.empty()) return {};
    return {static_cast<T*>(translate(device.data(), device.size_bytes(), where)), device.size()};
  }

  // `device` as a tensor of the read-write view (an empty one stays empty).
  TensorIn view(TensorIn device, const char* where = __builtin_FUNCTION()) const {
    if (device.empty()) return device;
    const auto bytes = static_cast<std::size_t>(device.elems) * dtype_bytes(device.dtype);
    return {translate(device.data, bytes, where), device.elems, device.dtype};
  }

  // Offset of `ptr` in this arena, if it points into the view that starts at `view`.
  std::optional<std::size_t> offset_of(const void* ptr, const std::byte* view) const;

  // Throws zl::Error when `host`, passed to the call `where` as host memory, is device memory.
  static void check_host(const void* host, std::size_t bytes,
                         const char* where = __builtin_FUNCTION());

  int fd_ = -1;
  std::size_t arena_bytes_ = 0;
  std::byte* handed_out_ = nullptr;                 // PROT_NONE: what allocate() returns
  std::byte* kernel_view_ = nullptr;                // PROT_READ | PROT_WRITE: what the kernels use
  std::map<std::size_t, std::size_t> free_ranges_;  // offset -> bytes, coalesced, page multiples
};

}  // namespace zl
