// cuda_device_step.cpp — CudaDevice's step work (ops/device.hpp): conversions, adds, scaling and
// rounding of device buffers (cuda_step_kernels.cu), the gradient norm's block sums, and AdamW
// (adamw_cuda.cu), fused with the rounded copy of the master and with the unscaled, clipped reads
// of 16-bit gradients, each with the CPU's bits.
#include "core/error.hpp"
#include "ops/check_elems.hpp"
#include "ops/cuda/adamw_cuda.hpp"
#include "ops/cuda/cuda_device.hpp"
#include "ops/cuda/cuda_kernels.hpp"
#include "optim/grad_norm.hpp"

namespace zl {

namespace {

// The step work runs on the training dtypes only, as on the CPU.
void check_training_dtype(const char* kernel, DType dtype) {
  ZL_CHECK(is_training_dtype(dtype), "{}: {} is not a training dtype: use fp32, bf16 or fp16",
           kernel, dtype_name(dtype));
}

}  // namespace

// ---- a training step's elementwise work ----

void CudaDevice::convert(const void* in, DType in_dtype, void* out, DType out_dtype,
                         std::int64_t elems) {
  check_training_dtype("convert", in_dtype);
  check_training_dtype("convert", out_dtype);
  ZL_CHECK(elems >= 0, "convert of {} elements: pass a count >= 0", elems);
  if (in_dtype == out_dtype) {
    return copy(out, in, static_cast<std::size_t>(elems) * dtype_bytes(in_dtype));
  }
  select();
  cuda::convert(in, in_dtype, out, out_dtype, elems, stream_);
}

void CudaDevice::add(void* acc, const void* addend, DType dtype, std::int64_t elems) {
  check_training_dtype("add", dtype);
  ZL_CHECK(elems >= 0, "add of {} elements: pass a count >= 0", elems);
  select();
  cuda::add(acc, addend, dtype, elems, stream_);
}

void CudaDevice::scale(std::span<float> x, float factor) {
  select();
  cuda::scale(x.data(), factor, static_cast<std::int64_t>(x.size()), stream_);
}

void CudaDevice::divide(std::span<float> x, float divisor) {
  select();
  cuda::divide(x.data(), divisor, static_cast<std::int64_t>(x.size()), stream_);
}

void CudaDevice::round_to(std::span<float> x, DType dtype) {
  check_training_dtype("round_to", dtype);
  if (dtype == DType::F32) return;
  select();
  cuda::round_to(x.data(), dtype, static_cast<std::int64_t>(x.size()), stream_);
}

void CudaDevice::adamw_update_rounded(std::span<float> master, std::span<const float> grads,
                                      std::span<float> exp_avg, std::span<float> exp_avg_sq,
                                      const AdamWScalars& scalars, void* rounded,
                                      DType rounded_dtype) {
  if (!cuda::is_half(rounded_dtype)) {
    return Device::adamw_update_rounded(master, grads, exp_avg, exp_avg_sq, scalars, rounded,
                                        rounded_dtype);
  }
  adamw_one(master, grads, {.half = rounded_dtype}, exp_avg, exp_avg_sq, scalars,
            static_cast<std::uint16_t*>(rounded));
}

void CudaDevice::adamw_update(std::span<float> params, std::span<const float> grads,
                              std::span<float> exp_avg, std::span<float> exp_avg_sq,
                              const AdamWScalars& scalars) {
  adamw_one(params, grads, {}, exp_avg, exp_avg_sq, scalars, nullptr);
}

void CudaDevice::adamw_one(std::span<float> master, TensorIn grads, AdamWGradRead read,
                           std::span<float> exp_avg, std::span<float> exp_avg_sq,
                           const AdamWScalars& scalars, std::uint16_t* copy) {
  const auto elems = static_cast<std::int64_t>(master.size());
  check_elems("adamw_update", "grads", static_cast<std::size_t>(grads.elems), elems);
  check_elems("adamw_update", "exp_avg", exp_avg.size(), elems);
  check_elems("adamw_update", "exp_avg_sq", exp_avg_sq.size(), elems);
  if (elems == 0) return;
  select();
  // One 16-bit format per launch: the gradients' when they are 16-bit, else the copy's.
  const bool half_grads = cuda::is_half(grads.dtype);
  ZL_CHECK(!half_grads || copy == nullptr || grads.dtype == read.half,
           "adamw_update: {} gradients and a {} parameter copy: pass the copy in the gradients' "
           "format",
           dtype_name(grads.dtype), dtype_name(read.half));
  if (half_grads) read.half = grads.dtype;
  const AdamWTensor tensor{
      .master = master.data(),
      .grads = half_grads ? nullptr : grads.f32().data(),
      .grads_half = half_grads ? static_cast<const std::uint16_t*>(grads.data) : nullptr,
      .exp_avg = exp_avg.data(),
      .exp_avg_sq = exp_avg_sq.data(),
      .params_half = copy,
      .elems = elems};
  adamw_update_cuda(std::span<const AdamWTensor>(&tensor, 1), scalars, stream_, read);
}

void CudaDevice::block_sumsq(std::span<const float> grads, std::span<double> partials) {
  check_block_sumsq(grads.size(), partials.size());
  const auto blocks = static_cast<std::int64_t>(partials.size());
  if (blocks == 0) return;
  select();
  cuda::block_sumsq(grads.data(), partials.data(), blocks, kNormBlockElems, stream_);
}

void CudaDevice::do_tree_cover_sums(std::span<const double> leaves, std::int64_t first_leaf,
                                    std::span<double> sums) {
  if (sums.empty()) return;
  select();
  auto* scratch = static_cast<double*>(sums_scratch(
      static_cast<std::size_t>(cuda::tree_sum_scratch_elems(std::ssize(leaves))) * sizeof(double)));
  cuda::tree_cover_sums(leaves.data(), std::ssize(leaves), first_leaf, sums.data(), scratch,
                        stream_);
}

void CudaDevice::do_block_sumsq_unscaled(TensorIn grads, float divisor,
                                         std::span<double> partials) {
  const auto blocks = static_cast<std::int64_t>(partials.size());
  if (blocks == 0) return;
  select();
  cuda::block_sumsq(grads.data, grads.dtype, divisor, partials.data(), blocks, kNormBlockElems,
                    stream_);
}

void CudaDevice::do_adamw_update_unscaled(std::span<float> master, TensorIn grads, float divisor,
                                          float clip, std::span<float> exp_avg,
                                          std::span<float> exp_avg_sq, const AdamWScalars& scalars,
                                          void* rounded, DType rounded_dtype) {
  // A 16-bit copy in another format than 16-bit gradients is rounded after, as an fp32 one is
  // copied after.
  const bool fused_copy = rounded != nullptr && cuda::is_half(rounded_dtype) &&
                          (!cuda::is_half(grads.dtype) || grads.dtype == rounded_dtype);
  adamw_one(master, grads,
            {.divisor = divisor, .clip = clip, .half = fused_copy ? rounded_dtype : DType::BF16},
            exp_avg, exp_avg_sq, scalars,
            fused_copy ? static_cast<std::uint16_t*>(rounded) : nullptr);
  if (rounded != nullptr && !fused_copy) {
    convert(master.data(), DType::F32, rounded, rounded_dtype,
            static_cast<std::int64_t>(master.size()));
  }
}

}  // namespace zl
