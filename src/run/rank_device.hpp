// rank_device.hpp — the device a rank computes on (`--accelerator`): the CPU, a CUDA GPU, or the
// detached CPU device, a stand-in for a GPU whose memory the host cannot touch (tests). Making
// one also registers its memory with the simulator, so the sim backend's collectives run there.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "ops/cpu/cpu_grain.hpp"
#include "ops/device.hpp"

namespace zl {

/// Where a rank's buffers live and its kernels run.
enum class Accelerator : std::uint8_t {
  Cpu,          ///< CpuDevice: host memory, the bit-exact CPU kernels
  Cuda,         ///< CudaDevice: GPU memory, CUDA kernels and cuBLAS
  CpuDetached,  ///< DetachedCpuDevice: the CPU kernels on memory the host may not touch
};

/// "cpu", "cuda" or "cpu-detached".
std::string_view accelerator_name(Accelerator accelerator);

/// The device of one rank: a CudaDevice on GPU `device_index`, else a CPU device (the index is
/// unused) whose kernels run on `cpu_threads` threads at `grain`. Training in bf16 or fp16
/// (`precision`), the CudaDevice runs its GEMMs in that format on tensor cores with fp32
/// accumulation, as torch.autocast does (CudaDevice::set_half_gemms), and attention on its fast
/// kernels where they fit; the CPU devices always compute in fp32. Registers the device's memory
/// with the simulator (sim/collective_memory.hpp) on first use. A CudaDevice runs the `attention`
/// kernels asked for (CudaDevice::set_attention; Default leaves its own choice). Throws zl::Error
/// when zerolab was built without CUDA or there is no such GPU.
std::unique_ptr<Device> make_rank_device(Accelerator accelerator, int device_index,
                                         DType precision, int cpu_threads = 1,
                                         cpu::Grain grain = cpu::Grain::Normal,
                                         AttentionKind attention = AttentionKind::Default);

/// Bytes free now on GPU `device_index` (cudaMemGetInfo), or nothing for the CPU accelerators,
/// a build without CUDA, or a GPU the driver cannot report on.
std::optional<std::int64_t> free_device_bytes(Accelerator accelerator, int device_index);

/// What the step lines report about the device: its name, and its dense bf16 peak for MFU.
struct AcceleratorInfo {
  std::string name;          ///< "CPU", the detached CPU, or the GPU's name (cudaDeviceProp)
  double bf16_tflops = 0.0;  ///< dense bf16 peak (the device preset of an H100 or H200); 0: unknown
};

/// The device GPU `device_index` (or the CPU) is, for the step lines.
AcceleratorInfo accelerator_info(Accelerator accelerator, int device_index);

}  // namespace zl
