// cpu_step_ops.cpp — CpuDevice's memory calls and step work (ops/device.hpp) on host memory:
// copies are memcpy, conversions are core/dtype.hpp's, AdamW is the fused host kernel.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "core/host_convert.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "optim/adamw_fused.hpp"
#include "optim/grad_norm.hpp"

namespace zl {

namespace {

void check_training_dtype(DType dtype) {
  ZL_CHECK(is_training_dtype(dtype), "{} is not a training dtype: use fp32, bf16 or fp16",
           dtype_name(dtype));
}

// Gradient elements the unscaled reads build at a time: whole norm blocks, and enough for
// adamw_update_fused to share among threads.
constexpr std::size_t kUnscaleChunkElems = std::size_t{1} << 18;
static_assert(kUnscaleChunkElems % kNormBlockElems == 0, "a chunk is whole norm blocks");

// out[i] = grads[first + i] widened, divided by `divisor` unless it is 1, multiplied by `clip`
// unless it is 1: Device's unscaled gradient (ops/device.hpp).
void unscale_into(TensorIn grads, std::size_t first, std::span<float> out, float divisor,
                  float clip) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    float g = element_f32(grads.dtype, grads.data, first + i);
    if (divisor != 1.0f) g = g / divisor;
    if (clip != 1.0f) g = g * clip;
    out[i] = g;
  }
}

}  // namespace

void CpuDevice::copy_from_host(void* device, const void* host, std::size_t bytes) {
  if (bytes > 0 && device != host) std::memcpy(device, host, bytes);
}

void CpuDevice::copy_to_host(void* host, const void* device, std::size_t bytes) {
  if (bytes > 0 && device != host) std::memcpy(host, device, bytes);
}

void CpuDevice::copy(void* to, const void* from, std::size_t bytes) {
  if (bytes > 0 && to != from) std::memcpy(to, from, bytes);
}

void CpuDevice::fill_zero(void* device, std::size_t bytes) {
  if (bytes > 0) std::memset(device, 0, bytes);
}

void CpuDevice::convert(const void* in, DType in_dtype, void* out, DType out_dtype,
                        std::int64_t elems) {
  check_training_dtype(in_dtype);
  check_training_dtype(out_dtype);
  const auto count = static_cast<std::size_t>(elems);
  if (in_dtype == out_dtype) return CpuDevice::copy(out, in, count * dtype_bytes(in_dtype));
  convert_on_host(in, in_dtype, out, out_dtype, elems);
}

void CpuDevice::add(void* acc, const void* addend, DType dtype, std::int64_t elems) {
  check_training_dtype(dtype);
  const auto count = static_cast<std::size_t>(elems);
  if (dtype == DType::F32) {
    auto* a = static_cast<float*>(acc);
    const auto* b = static_cast<const float*>(addend);
    for (std::size_t i = 0; i < count; ++i) a[i] = a[i] + b[i];
    return;
  }
  for (std::size_t i = 0; i < count; ++i) {
    set_element_f32(dtype, acc, i, element_f32(dtype, acc, i) + element_f32(dtype, addend, i));
  }
}

void CpuDevice::scale(std::span<float> x, float factor) {
  for (float& value : x) value = value * factor;
}

void CpuDevice::divide(std::span<float> x, float divisor) {
  for (float& value : x) value = value / divisor;
}

void CpuDevice::round_to(std::span<float> x, DType dtype) {
  check_training_dtype(dtype);
  if (dtype == DType::F32) return;
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::uint16_t half = 0;
    set_element_f32(dtype, &half, 0, x[i]);
    x[i] = element_f32(dtype, &half, 0);
  }
}

void CpuDevice::block_sumsq(std::span<const float> grads, std::span<double> partials) {
  zl::block_sumsq(grads, partials);
}

void CpuDevice::adamw_update(std::span<float> params, std::span<const float> grads,
                             std::span<float> exp_avg, std::span<float> exp_avg_sq,
                             const AdamWScalars& scalars) {
  // ZL_ADAM_THREADS when set, else the device's threads: element-wise, so any count gives the
  // same bits.
  const int threads = adam_threads() > 1 ? adam_threads() : this->threads();
  adamw_update_fused(params, grads, exp_avg, exp_avg_sq, scalars, threads);
}

void CpuDevice::do_tree_cover_sums(std::span<const double> leaves, std::int64_t first_leaf,
                                   std::span<double> sums) {
  zl::tree_cover_sums(leaves, first_leaf, sums);
}

void CpuDevice::do_block_sumsq_unscaled(TensorIn grads, float divisor, std::span<double> partials) {
  const auto elems = static_cast<std::size_t>(grads.elems);
  // CpuDevice's own calls, not a subclass's: the detached device has translated every pointer.
  if (grads.dtype == DType::F32 && divisor == 1.0f) {
    return CpuDevice::block_sumsq(grads.f32(), partials);
  }
  std::vector<float> chunk(std::min(elems, kUnscaleChunkElems));
  for (std::size_t first = 0; first < elems; first += chunk.size()) {
    const std::span<float> g = std::span<float>(chunk).first(std::min(chunk.size(), elems - first));
    unscale_into(grads, first, g, divisor, 1.0f);
    zl::block_sumsq(g, partials.subspan(first / kNormBlockElems, g.size() / kNormBlockElems));
  }
}

void CpuDevice::do_adamw_update_unscaled(std::span<float> master, TensorIn grads, float divisor,
                                         float clip, std::span<float> exp_avg,
                                         std::span<float> exp_avg_sq, const AdamWScalars& scalars,
                                         void* rounded, DType rounded_dtype) {
  const std::size_t elems = master.size();
  auto round = [&](std::size_t first, std::size_t count) {
    if (rounded == nullptr) return;
    void* out = static_cast<char*>(rounded) + first * dtype_bytes(rounded_dtype);
    CpuDevice::convert(master.data() + first, DType::F32, out, rounded_dtype,
                       static_cast<std::int64_t>(count));
  };
  if (grads.dtype == DType::F32 && divisor == 1.0f && clip == 1.0f) {
    CpuDevice::adamw_update(master, grads.f32(), exp_avg, exp_avg_sq, scalars);
    return round(0, elems);
  }
  std::vector<float> chunk(std::min(elems, kUnscaleChunkElems));
  for (std::size_t first = 0; first < elems; first += chunk.size()) {
    const std::size_t count = std::min(chunk.size(), elems - first);
    const std::span<float> g = std::span<float>(chunk).first(count);
    unscale_into(grads, first, g, divisor, clip);
    CpuDevice::adamw_update(master.subspan(first, count), g, exp_avg.subspan(first, count),
                            exp_avg_sq.subspan(first, count), scalars);
    round(first, count);
  }
}

}  // namespace zl
