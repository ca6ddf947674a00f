// cuda_device_checks.cpp — the checks CUDA kernels make on the device: a label or token out of
// range is flagged by the kernel that meets it (its first index, in one word per pending check)
// and read back with the next host wait the step makes anyway, so checking never makes the host
// wait. The error then names the first failing check in launch order, with the CPU's message.
#include <limits>

#include "core/error.hpp"
#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/cuda_device.hpp"

namespace zl {

namespace {

constexpr unsigned long long kNoBadIndex = std::numeric_limits<unsigned long long>::max();

}  // namespace

void CudaDevice::create_checks() {
  ZL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&check_flags_),
                           kCheckSlots * sizeof(unsigned long long)));
  ZL_CUDA_CHECK(cudaMemset(check_flags_, 0xFF, kCheckSlots * sizeof(unsigned long long)));
  ZL_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&check_flags_host_),
                               kCheckSlots * sizeof(unsigned long long)));
}

void CudaDevice::destroy_checks() {
  cudaFree(check_flags_);
  cudaFreeHost(check_flags_host_);
}

unsigned long long* CudaDevice::check_slot(const PendingCheck& check) {
  if (pending_checks_.size() == kCheckSlots) wait_on_host();  // reads and resets every slot
  pending_checks_.push_back(check);
  return check_flags_ + (pending_checks_.size() - 1);
}

void CudaDevice::report_checks() {
  const std::vector<PendingCheck> checks = std::move(pending_checks_);
  pending_checks_.clear();
  ZL_CUDA_CHECK(
      cudaMemsetAsync(check_flags_, 0xFF, checks.size() * sizeof(unsigned long long), stream_));
  for (std::size_t i = 0; i < checks.size(); ++i) {
    if (check_flags_host_[i] == kNoBadIndex) continue;
    const PendingCheck& check = checks[i];
    const auto bad = static_cast<std::int64_t>(check_flags_host_[i]);
    std::int64_t id = 0;
    ZL_CUDA_CHECK(cudaMemcpy(&id, check.ids + bad, sizeof(id), cudaMemcpyDeviceToHost));
    if (check.seq_len == 0) {
      fail("{}: row {} has label {}, outside [0, {})", check.kernel, bad, id, check.limit);
    }
    fail(
        "{}: token {} at row {}, position {} is outside the vocabulary [0, {}): use token ids "
        "below --vocab",
        check.kernel, id, bad / check.seq_len, bad % check.seq_len, check.limit);
  }
}

}  // namespace zl
