// adam_bench_cuda.cpp — times adamw_update_cuda on GPT-2-shaped tensors and a device-to-device
// copy of the same bytes on GPU 0, alternating on one stream, each between two CUDA events. The
// CUDA half is built only with ZL_HAVE_CUDA; without it the benchmark says so and throws.
#include "bench/adam_bench_cuda.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "model/gpt_config.hpp"

#ifdef ZL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "bench/adam_bench.hpp"
#include "bench/timing.hpp"
#include "ops/cuda/adamw_cuda.hpp"
#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/cuda_device.hpp"
#endif

namespace zl::bench {

std::vector<std::int64_t> gpt2_124m_tensor_elems(std::int64_t params_elems) {
  ZL_CHECK(params_elems > 0, "--params {} is invalid: give a positive count", params_elems);
  std::vector<std::int64_t> preset;
  // Hugging Face's tensor sizes (wte's 50257 rows, not the 50304 zerolab pads it to), as torch
  // holds them: the comparison with torch's AdamW updates the same elements.
  for (const auto& unit : gpt_units(gpt_preset("124M"))) {
    for (const auto& param : unit.params) preset.push_back(numel(param.real_shape()));
  }
  std::vector<std::int64_t> sizes;
  for (std::int64_t left = params_elems; left > 0;) {
    const std::int64_t elems = std::min(left, preset[sizes.size() % preset.size()]);
    sizes.push_back(elems);
    left -= elems;
  }
  return sizes;
}

std::int64_t gpt2_124m_params_elems() {
  std::int64_t total = 0;
  for (const auto& unit : gpt_units(gpt_preset("124M"))) total += unit.real_numel();
  return total;
}

#ifdef ZL_HAVE_CUDA

namespace {

// Tensors start on 256-byte boundaries inside each array, as separate cudaMallocs would.
constexpr std::int64_t kAlignElems = 64;

// One cudaMalloc, freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) {
    ZL_CUDA_CHECK(cudaMalloc(&ptr_, std::max<std::size_t>(bytes, 1)));
  }
  ~DeviceBuffer() { (void)cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};

// A pair of events around work queued on a stream.
class EventTimer {
 public:
  EventTimer() {
    ZL_CUDA_CHECK(cudaEventCreate(&start_));
    ZL_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~EventTimer() {
    (void)cudaEventDestroy(start_);
    (void)cudaEventDestroy(stop_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start(cudaStream_t stream) { ZL_CUDA_CHECK(cudaEventRecord(start_, stream)); }
  void stop(cudaStream_t stream) { ZL_CUDA_CHECK(cudaEventRecord(stop_, stream)); }
  // Waits for the stop event; the ms between the two.
  double ms() {
    ZL_CUDA_CHECK(cudaEventSynchronize(stop_));
    float elapsed_ms = 0.0f;
    ZL_CUDA_CHECK(cudaEventElapsedTime(&elapsed_ms, start_, stop_));
    return elapsed_ms;
  }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

// The CPU benchmark's values (adam_bench.cpp), copied up in chunks: p = x * 1e-3, g = x * 1e-5
// with x = (i % 2003) - 1001.
void fill_pattern(float* device, std::int64_t elems, float scale) {
  constexpr std::int64_t kChunkElems = std::int64_t{1} << 22;
  std::vector<float> host(static_cast<std::size_t>(std::min(elems, kChunkElems)));
  for (std::int64_t begin = 0; begin < elems; begin += kChunkElems) {
    const std::int64_t count = std::min(kChunkElems, elems - begin);
    for (std::int64_t i = 0; i < count; ++i) {
      host[static_cast<std::size_t>(i)] =
          (static_cast<float>((begin + i) % 2003) - 1001.0f) * scale;
    }
    ZL_CUDA_CHECK(cudaMemcpy(device + begin, host.data(), static_cast<std::size_t>(count) * 4,
                             cudaMemcpyHostToDevice));
  }
}

}  // namespace

AdamCudaBenchResult run_adam_bench_cuda(const AdamCudaBenchOptions& options) {
  ZL_CHECK(CudaDevice::device_count() > 0,
           "no CUDA GPU is visible to this process (CudaDevice::device_count() is 0): run on a "
           "GPU machine, or use --accelerator cpu");
  ZL_CHECK(options.repeats > 0, "--repeats {} is invalid: give a positive count", options.repeats);
  AdamCudaBenchResult result;
  result.params_elems = options.params_elems > 0 ? options.params_elems : gpt2_124m_params_elems();
  result.tensor_elems = gpt2_124m_tensor_elems(result.params_elems);
  result.warmup = kCudaAdamWarmupUpdates;
  result.repeats = options.repeats;
  result.copy_bytes = 14 * result.params_elems;

  ZL_CUDA_CHECK(cudaSetDevice(0));
  cudaDeviceProp properties{};
  ZL_CUDA_CHECK(cudaGetDeviceProperties(&properties, 0));
  result.device = properties.name;

  std::int64_t array_elems = 0;
  for (const std::int64_t elems : result.tensor_elems) {
    array_elems += (elems + kAlignElems - 1) / kAlignElems * kAlignElems;
  }
  const auto array_bytes = static_cast<std::size_t>(array_elems) * sizeof(float);
  const DeviceBuffer p(array_bytes), g(array_bytes), m(array_bytes), v(array_bytes);
  const DeviceBuffer copy_src(static_cast<std::size_t>(result.copy_bytes));
  const DeviceBuffer copy_dst(static_cast<std::size_t>(result.copy_bytes));
  fill_pattern(p.as<float>(), array_elems, 1e-3f);
  fill_pattern(g.as<float>(), array_elems, 1e-5f);
  ZL_CUDA_CHECK(cudaMemset(m.as<float>(), 0, array_bytes));
  ZL_CUDA_CHECK(cudaMemset(v.as<float>(), 0, array_bytes));
  ZL_CUDA_CHECK(cudaMemset(copy_src.as<void>(), 1, static_cast<std::size_t>(result.copy_bytes)));

  std::vector<AdamWTensor> tensors;
  std::int64_t offset = 0;
  for (const std::int64_t elems : result.tensor_elems) {
    tensors.push_back({.master = p.as<float>() + offset,
                       .grads = g.as<float>() + offset,
                       .exp_avg = m.as<float>() + offset,
                       .exp_avg_sq = v.as<float>() + offset,
                       .params_half = nullptr,
                       .elems = elems});
    offset += (elems + kAlignElems - 1) / kAlignElems * kAlignElems;
  }

  cudaStream_t stream = nullptr;
  ZL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  EventTimer adam_timer, copy_timer;
  std::vector<double> adam_ms, copy_ms;
  const AdamWConfig config;
  // Updates and copies alternate, so clock and power changes hit both alike.
  for (int r = 0; r < result.warmup + result.repeats; ++r) {
    adam_timer.start(stream);
    adamw_update_cuda(tensors, adamw_scalars(config, r + 1), stream);
    adam_timer.stop(stream);
    copy_timer.start(stream);
    ZL_CUDA_CHECK(cudaMemcpyAsync(copy_dst.as<void>(), copy_src.as<void>(),
                                  static_cast<std::size_t>(result.copy_bytes),
                                  cudaMemcpyDeviceToDevice, stream));
    copy_timer.stop(stream);
    const double update_ms = adam_timer.ms();
    const double copied_ms = copy_timer.ms();
    if (r < result.warmup) continue;
    adam_ms.push_back(update_ms);
    copy_ms.push_back(copied_ms);
  }
  ZL_CUDA_CHECK(cudaStreamDestroy(stream));

  const double adam_bytes = kAdamBytesPerParam * static_cast<double>(result.params_elems);
  result.ms = median_ms(adam_ms);
  result.best_ms = *std::min_element(adam_ms.begin(), adam_ms.end());
  result.gbps = gbps(adam_bytes, result.ms);
  result.best_gbps = gbps(adam_bytes, result.best_ms);
  result.copy_ms = median_ms(copy_ms);
  result.copy_gbps = gbps(2.0 * static_cast<double>(result.copy_bytes), result.copy_ms);
  return result;
}

#else

AdamCudaBenchResult run_adam_bench_cuda(const AdamCudaBenchOptions&) {
  fail(
      "this zerolab was built without CUDA (CMake found no nvcc): build it on a machine with the "
      "CUDA toolkit (docs/performance.md, GPU), or use --accelerator cpu");
}

#endif

}  // namespace zl::bench
