// detached_cpu_device.cpp — the detached device's arena (one memfd, a PROT_NONE view handed out
// and a read-write view for the kernels, first-fit over page-rounded ranges whose pages are
// punched out on free), the process's list of live arenas, and the overrides, each one
// translation and CpuDevice's call.
#include "ops/cpu/detached_cpu_device.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <mutex>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace zl {

namespace {

constexpr std::size_t kPageBytes = 4096;
// Address space only: the memfd is sparse, and only live buffers' pages are backed.
constexpr std::size_t kArenaBytes = std::size_t{64} << 30;
// Below this the system is refusing us outright, not just the size.
constexpr std::size_t kMinArenaBytes = std::size_t{64} << 20;

std::size_t round_to_pages(std::size_t bytes) {
  return std::max(kPageBytes, (bytes + kPageBytes - 1) / kPageBytes * kPageBytes);
}

// The live devices, for host_view() from the simulator's threads.
struct Arenas {
  std::mutex mutex;
  std::vector<const DetachedCpuDevice*> devices;
};

Arenas& arenas() {
  static Arenas instance;
  return instance;
}

// "DetachedCpuDevice::linear_forward" from the calling member's name (__builtin_FUNCTION, which
// GCC and Clang both give): a kernel's override is do_linear_forward (ops/device.hpp), named as
// the caller called it.
std::string call_name(const char* where) {
  std::string_view name(where);
  if (name.starts_with("do_")) name.remove_prefix(3);
  return fmt::format("DetachedCpuDevice::{}", name);
}

}  // namespace

DetachedCpuDevice::DetachedCpuDevice(int threads, cpu::Grain grain) : CpuDevice(threads, grain) {
  fd_ = memfd_create("zerolab-detached-device", MFD_CLOEXEC);
  ZL_CHECK(fd_ >= 0, "DetachedCpuDevice: memfd_create failed: {}", std::strerror(errno));
  for (std::size_t bytes = kArenaBytes; bytes >= kMinArenaBytes; bytes /= 2) {
    if (ftruncate(fd_, static_cast<off_t>(bytes)) != 0) continue;
    void* kernel = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd_, 0);
    if (kernel == MAP_FAILED) continue;
    void* handed = mmap(nullptr, bytes, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd_, 0);
    if (handed == MAP_FAILED) {
      munmap(kernel, bytes);
      continue;
    }
    kernel_view_ = static_cast<std::byte*>(kernel);
    handed_out_ = static_cast<std::byte*>(handed);
    arena_bytes_ = bytes;
    break;
  }
  if (arena_bytes_ == 0) {
    close(fd_);
    fail("DetachedCpuDevice: could not map a memfd of even {} bytes twice: {}", kMinArenaBytes,
         std::strerror(errno));
  }
  free_ranges_.emplace(0, arena_bytes_);
  Arenas& live = arenas();
  std::lock_guard lock(live.mutex);
  live.devices.push_back(this);
}

DetachedCpuDevice::~DetachedCpuDevice() {
  release_typed_scratch();  // arena memory: freed before the arena goes
  {
    Arenas& live = arenas();
    std::lock_guard lock(live.mutex);
    std::erase(live.devices, this);
  }
  munmap(handed_out_, arena_bytes_);
  munmap(kernel_view_, arena_bytes_);
  close(fd_);
}

void* DetachedCpuDevice::allocate(std::size_t bytes) {
  const std::size_t need = round_to_pages(bytes);
  const auto fit = std::find_if(free_ranges_.begin(), free_ranges_.end(),
                                [need](const auto& range) { return range.second >= need; });
  ZL_CHECK(fit != free_ranges_.end(),
           "DetachedCpuDevice: no free range of {} bytes left in its {}-byte arena: free buffers "
           "sooner or allocate less",
           need, arena_bytes_);
  const auto [offset, free_bytes] = *fit;
  free_ranges_.erase(fit);
  if (free_bytes > need) free_ranges_.emplace(offset + need, free_bytes - need);
  // Free ranges are holes in the memfd, so these pages read as zero.
  return handed_out_ + offset;
}

void* DetachedCpuDevice::allocate_unset(std::size_t bytes) {
  void* ptr = allocate(bytes);
  if (bytes > 0) std::memset(translate(ptr, bytes), kUnsetByte, bytes);
  return ptr;
}

void DetachedCpuDevice::deallocate(void* ptr, std::size_t bytes) {
  const std::size_t size = round_to_pages(bytes);
  const std::optional<std::size_t> at = offset_of(ptr, handed_out_);
  ZL_CHECK(at && *at % kPageBytes == 0 && size <= arena_bytes_ - *at,
           "DetachedCpuDevice::deallocate was given {} bytes at {} that this device did not "
           "allocate",
           bytes, ptr);
  std::size_t offset = *at;
  // Punching a hole releases the pages and makes them read as zero when handed out again.
  if (fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                static_cast<off_t>(size)) != 0) {
    std::memset(kernel_view_ + offset, 0, size);  // kept resident, but still zero on reuse
  }
  std::size_t length = size;
  auto next = free_ranges_.lower_bound(offset);
  if (next != free_ranges_.begin()) {
    const auto previous = std::prev(next);
    if (previous->first + previous->second == offset) {
      offset = previous->first;
      length += previous->second;
      free_ranges_.erase(previous);
    }
  }
  if (next != free_ranges_.end() && offset + length == next->first) {
    length += next->second;
    free_ranges_.erase(next);
  }
  free_ranges_.emplace(offset, length);
}

void* DetachedCpuDevice::host_view(const void* device_ptr) {
  Arenas& live = arenas();
  std::lock_guard lock(live.mutex);
  for (const DetachedCpuDevice* device : live.devices) {
    if (const std::optional<std::size_t> at = device->offset_of(device_ptr, device->handed_out_)) {
      return device->kernel_view_ + *at;
    }
  }
  return nullptr;
}

std::optional<std::size_t> DetachedCpuDevice::offset_of(const void* ptr,
                                                        const std::byte* view) const {
  // Compared as integers: ordering pointers into different objects is unspecified in C++.
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  const auto base = reinterpret_cast<std::uintptr_t>(view);
  if (address < base || address - base >= arena_bytes_) return std::nullopt;
  return address - base;
}

void* DetachedCpuDevice::translate(const void* device, std::size_t bytes, const char* where) const {
  if (bytes == 0) return nullptr;
  if (const std::optional<std::size_t> at = offset_of(device, handed_out_)) {
    ZL_CHECK(bytes <= arena_bytes_ - *at,
             "{} was given {} bytes at {}, past the end of this device's memory", call_name(where),
             bytes, device);
    return kernel_view_ + *at;
  }
  ZL_CHECK(host_view(device) == nullptr,
           "{} was given another device's memory at {}: every buffer of a call must be this "
           "device's",
           call_name(where), device);
  fail(
      "{} was given host memory at {} ({} bytes) where device memory is needed: allocate it "
      "from this device and fill it with copy_from_host",
      call_name(where), device, bytes);
}

void DetachedCpuDevice::check_host(const void* host, std::size_t bytes, const char* where) {
  ZL_CHECK(bytes == 0 || host_view(host) == nullptr,
           "{} was given device memory at {} as its host buffer: use copy() between device "
           "buffers",
           call_name(where), host);
}

// ---- memory and step work ----

void DetachedCpuDevice::copy_from_host(void* device, const void* host, std::size_t bytes) {
  check_host(host, bytes);
  CpuDevice::copy_from_host(translate(device, bytes), host, bytes);
}

void DetachedCpuDevice::copy_to_host(void* host, const void* device, std::size_t bytes) {
  check_host(host, bytes);
  count_host_wait(0.0);
  CpuDevice::copy_to_host(host, translate(device, bytes), bytes);
}

void DetachedCpuDevice::copy(void* to, const void* from, std::size_t bytes) {
  CpuDevice::copy(translate(to, bytes), translate(from, bytes), bytes);
}

void DetachedCpuDevice::fill_zero(void* device, std::size_t bytes) {
  CpuDevice::fill_zero(translate(device, bytes), bytes);
}

void DetachedCpuDevice::convert(const void* in, DType in_dtype, void* out, DType out_dtype,
                                std::int64_t elems) {
  const auto count = static_cast<std::size_t>(elems);
  CpuDevice::convert(translate(in, count * dtype_bytes(in_dtype)), in_dtype,
                     translate(out, count * dtype_bytes(out_dtype)), out_dtype, elems);
}

void DetachedCpuDevice::add(void* acc, const void* addend, DType dtype, std::int64_t elems) {
  const std::size_t bytes = static_cast<std::size_t>(elems) * dtype_bytes(dtype);
  CpuDevice::add(translate(acc, bytes), translate(addend, bytes), dtype, elems);
}

void DetachedCpuDevice::scale(std::span<float> x, float factor) {
  CpuDevice::scale(view(x), factor);
}

void DetachedCpuDevice::divide(std::span<float> x, float divisor) {
  CpuDevice::divide(view(x), divisor);
}

void DetachedCpuDevice::round_to(std::span<float> x, DType dtype) {
  CpuDevice::round_to(view(x), dtype);
}

void DetachedCpuDevice::block_sumsq(std::span<const float> grads, std::span<double> partials) {
  CpuDevice::block_sumsq(view(grads), view(partials));
}

void DetachedCpuDevice::do_block_sumsq_unscaled(TensorIn grads, float divisor,
                                                std::span<double> partials) {
  CpuDevice::do_block_sumsq_unscaled(view(grads), divisor, view(partials));
}

void DetachedCpuDevice::do_tree_cover_sums(std::span<const double> leaves, std::int64_t first_leaf,
                                           std::span<double> sums) {
  CpuDevice::do_tree_cover_sums(view(leaves), first_leaf, view(sums));
}

void DetachedCpuDevice::do_adamw_update_unscaled(
    std::span<float> master, TensorIn grads, float divisor, float clip, std::span<float> exp_avg,
    std::span<float> exp_avg_sq, const AdamWScalars& scalars, void* rounded, DType rounded_dtype) {
  void* rounded_view =
      rounded == nullptr ? nullptr : translate(rounded, master.size() * dtype_bytes(rounded_dtype));
  CpuDevice::do_adamw_update_unscaled(view(master), view(grads), divisor, clip, view(exp_avg),
                                      view(exp_avg_sq), scalars, rounded_view, rounded_dtype);
}

void DetachedCpuDevice::adamw_update(std::span<float> params, std::span<const float> grads,
                                     std::span<float> exp_avg, std::span<float> exp_avg_sq,
                                     const AdamWScalars& scalars) {
  CpuDevice::adamw_update(view(params), view(grads), view(exp_avg), view(exp_avg_sq), scalars);
}

// ---- kernels ----

void DetachedCpuDevice::do_linear_forward(std::span<const float> x, std::span<const float> w,
                                          std::span<const float> b, std::span<float> y,
                                          std::int64_t rows, std::int64_t in, std::int64_t out) {
  CpuDevice::do_linear_forward(view(x), view(w), view(b), view(y), rows, in, out);
}

void DetachedCpuDevice::do_linear_backward(std::span<const float> x, std::span<const float> w,
                                           std::span<const float> dy, std::span<float> dw,
                                           std::span<float> db, std::span<float> dx,
                                           std::int64_t rows, std::int64_t in, std::int64_t out) {
  CpuDevice::do_linear_backward(view(x), view(w), view(dy), view(dw), view(db), view(dx), rows, in,
                                out);
}

void DetachedCpuDevice::do_gelu_forward(std::span<const float> x, std::span<float> y) {
  CpuDevice::do_gelu_forward(view(x), view(y));
}

void DetachedCpuDevice::do_gelu_backward(std::span<const float> x, std::span<const float> dy,
                                         std::span<float> dx) {
  CpuDevice::do_gelu_backward(view(x), view(dy), view(dx));
}

double DetachedCpuDevice::do_cross_entropy_forward_backward(
    std::span<const float> logits, std::span<const std::int64_t> labels, std::span<float> dlogits,
    std::int64_t rows, std::int64_t classes, std::int64_t padded_classes, std::int64_t mean_rows) {
  count_host_wait(0.0);
  return CpuDevice::do_cross_entropy_forward_backward(view(logits), view(labels), view(dlogits),
                                                      rows, classes, padded_classes, mean_rows);
}

void DetachedCpuDevice::do_add_mean_loss(std::span<const double> loss_sum, std::int64_t rows,
                                         std::span<float> total) {
  CpuDevice::do_add_mean_loss(view(loss_sum), rows, view(total));
}

void DetachedCpuDevice::do_cross_entropy_add_forward_backward(
    std::span<const float> logits, std::span<const std::int64_t> labels, std::span<float> dlogits,
    std::int64_t rows, std::int64_t classes, std::int64_t padded_classes, std::int64_t mean_rows,
    std::span<double> loss_sum) {
  CpuDevice::do_cross_entropy_add_forward_backward(view(logits), view(labels), view(dlogits), rows,
                                                   classes, padded_classes, mean_rows,
                                                   view(loss_sum));
}

void DetachedCpuDevice::do_embedding_forward(std::span<const std::int64_t> tokens,
                                             std::span<const float> wte, std::span<const float> wpe,
                                             std::span<float> x, std::int64_t batch,
                                             std::int64_t seq_len, std::int64_t channels,
                                             std::int64_t vocab) {
  CpuDevice::do_embedding_forward(view(tokens), view(wte), view(wpe), view(x), batch, seq_len,
                                  channels, vocab);
}

void DetachedCpuDevice::do_embedding_backward(std::span<const std::int64_t> tokens,
                                              std::span<const float> dx, std::span<float> dwte,
                                              std::span<float> dwpe, std::int64_t batch,
                                              std::int64_t seq_len, std::int64_t channels,
                                              std::int64_t vocab) {
  CpuDevice::do_embedding_backward(view(tokens), view(dx), view(dwte), view(dwpe), batch, seq_len,
                                   channels, vocab);
}

void DetachedCpuDevice::do_layernorm_forward(std::span<const float> x,
                                             std::span<const float> weight,
                                             std::span<const float> bias, std::span<float> y,
                                             std::span<float> mean, std::span<float> rstd,
                                             std::int64_t rows, std::int64_t channels) {
  CpuDevice::do_layernorm_forward(view(x), view(weight), view(bias), view(y), view(mean),
                                  view(rstd), rows, channels);
}

void DetachedCpuDevice::do_layernorm_backward(
    std::span<const float> x, std::span<const float> weight, std::span<const float> mean,
    std::span<const float> rstd, std::span<const float> dy, std::span<float> dx,
    std::span<float> dweight, std::span<float> dbias, std::int64_t rows, std::int64_t channels) {
  CpuDevice::do_layernorm_backward(view(x), view(weight), view(mean), view(rstd), view(dy),
                                   view(dx), view(dweight), view(dbias), rows, channels);
}

void DetachedCpuDevice::do_conv1d_forward(std::span<const float> x, std::span<const float> w,
                                          std::span<const float> b, std::span<float> y,
                                          std::int64_t rows, std::int64_t in, std::int64_t out) {
  CpuDevice::do_conv1d_forward(view(x), view(w), view(b), view(y), rows, in, out);
}

void DetachedCpuDevice::do_conv1d_backward(std::span<const float> x, std::span<const float> w,
                                           std::span<const float> dy, std::span<float> dw,
                                           std::span<float> db, std::span<float> dx,
                                           std::int64_t rows, std::int64_t in, std::int64_t out) {
  CpuDevice::do_conv1d_backward(view(x), view(w), view(dy), view(dw), view(db), view(dx), rows, in,
                                out);
}

void DetachedCpuDevice::do_gelu_tanh_forward(std::span<const float> x, std::span<float> y) {
  CpuDevice::do_gelu_tanh_forward(view(x), view(y));
}

void DetachedCpuDevice::do_gelu_tanh_backward(std::span<const float> x, std::span<const float> dy,
                                              std::span<float> dx) {
  CpuDevice::do_gelu_tanh_backward(view(x), view(dy), view(dx));
}

void DetachedCpuDevice::do_attention_forward(std::span<const float> qkv, std::span<float> stats,
                                             std::span<float> out, std::int64_t batch,
                                             std::int64_t seq_len, std::int64_t channels,
                                             std::int64_t heads) {
  CpuDevice::do_attention_forward(view(qkv), view(stats), view(out), batch, seq_len, channels,
                                  heads);
}

void DetachedCpuDevice::do_attention_backward(std::span<const float> qkv,
                                              std::span<const float> stats,
                                              std::span<const float> out,
                                              std::span<const float> dout, std::span<float> dqkv,
                                              std::int64_t batch, std::int64_t seq_len,
                                              std::int64_t channels, std::int64_t heads) {
  CpuDevice::do_attention_backward(view(qkv), view(stats), view(out), view(dout), view(dqkv), batch,
                                   seq_len, channels, heads);
}

}  // namespace zl
