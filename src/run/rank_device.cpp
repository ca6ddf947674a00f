// rank_device.cpp — makes each rank's device and registers its memory with the simulator.
#include "run/rank_device.hpp"

#include "core/error.hpp"
#include "detached_collective_memory.hpp"
#include "links.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "ops/cpu/detached_cpu_device.hpp"

#ifdef ZL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "cuda/cuda_collective_memory.hpp"
#include "ops/cuda/cuda_device.hpp"
#endif

namespace zl {

namespace {

[[noreturn]] void no_cuda() {
  fail("--accelerator cuda: this zerolab was built without CUDA: install the CUDA toolkit, "
       "rebuild (cmake finds nvcc), or use --accelerator cpu");
}

}  // namespace

std::string_view accelerator_name(Accelerator accelerator) {
  switch (accelerator) {
    case Accelerator::Cuda:
      return "cuda";
    case Accelerator::CpuDetached:
      return "cpu-detached";
    default:
      return "cpu";
  }
}

std::unique_ptr<Device> make_rank_device(Accelerator accelerator, int device_index,
                                         DType precision, int cpu_threads, cpu::Grain grain,
                                         AttentionKind attention) {
  switch (accelerator) {
    case Accelerator::Cpu:
      return std::make_unique<CpuDevice>(cpu_threads, grain);
    case Accelerator::CpuDetached:
      detached_collective_memory();
      return std::make_unique<DetachedCpuDevice>(cpu_threads, grain);
    case Accelerator::Cuda:
#ifdef ZL_HAVE_CUDA
      ZL_CHECK(CudaDevice::device_count() > device_index,
               "--accelerator cuda: GPU {} is not there ({} visible): run on a machine with a "
               "CUDA GPU, or use --accelerator cpu",
               device_index, CudaDevice::device_count());
      {
        cuda_collective_memory();
        auto device = std::make_unique<CudaDevice>(device_index);
        device->set_half_gemms(precision);
        if (attention != AttentionKind::Default) device->set_attention(attention);
        return device;
      }
#else
      (void)device_index;
      (void)precision;
      (void)attention;
      no_cuda();
#endif
  }
  fail("unknown accelerator {}", static_cast<int>(accelerator));
}

std::optional<std::int64_t> free_device_bytes(Accelerator accelerator, int device_index) {
  if (accelerator != Accelerator::Cuda) return std::nullopt;
#ifdef ZL_HAVE_CUDA
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaSetDevice(device_index) != cudaSuccess ||
      cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();  // clear it: making the device reports the error in its own words
    return std::nullopt;
  }
  return static_cast<std::int64_t>(free_bytes);
#else
  (void)device_index;
  return std::nullopt;
#endif
}

AcceleratorInfo accelerator_info(Accelerator accelerator, int device_index) {
  if (accelerator == Accelerator::Cpu) return {"CPU", 0.0};
  if (accelerator == Accelerator::CpuDetached) return {"CPU (detached memory)", 0.0};
#ifdef ZL_HAVE_CUDA
  cudaDeviceProp props{};
  if (cudaGetDeviceProperties(&props, device_index) != cudaSuccess) {
    cudaGetLastError();  // clear it: the device's own calls report errors
    return {"unknown GPU", 0.0};
  }
  AcceleratorInfo info{props.name, 0.0};
  // Hopper parts (H100, H200) share the H100 SXM preset's dense bf16 peak (sim/links.cpp).
  if (info.name.find("H100") != std::string::npos || info.name.find("H200") != std::string::npos) {
    info.bf16_tflops = device_preset("h100").bf16_tflops;
  }
  return info;
#else
  (void)device_index;
  no_cuda();
#endif
}

}  // namespace zl
