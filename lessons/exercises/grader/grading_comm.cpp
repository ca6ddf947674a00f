// grading_comm.cpp — the checks around async collectives. An input is compared byte for byte at
// wait() with the copy taken at its start; under AddressSanitizer a freed input is found by its
// poisoning first, so the check never reads freed memory there.
#include "grader/grading_comm.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/dtype.hpp"
#include "core/error.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define ZL_GRADER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZL_GRADER_ASAN 1
#endif
#endif
#ifdef ZL_GRADER_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace zl::exercise {

namespace {

std::size_t bytes_of(std::size_t count, DType dtype) {
  return count * dtype_bytes(dtype);
}

// True when `bytes` at `data` may not be read any more (freed, under AddressSanitizer).
bool freed(const void* data, std::size_t bytes) {
#ifdef ZL_GRADER_ASAN
  return __asan_region_is_poisoned(const_cast<void*>(data), bytes) != nullptr;
#else
  (void)data;
  (void)bytes;
  return false;
#endif
}

}  // namespace

void GradingComm::blocking(const char* name) {
  ++calls_;
  std::erase_if(pending_, [](const auto& pending) { return pending->waited; });
  if (pending_.empty()) return;
  const Pending& open = *pending_.front();
  fail(
      "{} (call #{}) was made while {} (call #{}) had not been waited: wait() for every async "
      "call before the next blocking one",
      name, calls_, open.name, open.number);
}

CommHandle GradingComm::watch(const char* name, const void* input, std::size_t bytes,
                              CommHandle inner) {
  auto pending = std::make_shared<Pending>();
  pending->number = ++calls_;
  pending->name = name;
  pending->input = input;
  const auto* first = static_cast<const std::uint8_t*>(input);
  pending->started_with.assign(first, first + bytes);
  pending_.push_back(pending);
  auto wait = [pending, inner = std::make_shared<CommHandle>(std::move(inner))] {
    inner->wait();
    pending->waited = true;
    const std::size_t size = pending->started_with.size();
    const bool changed = freed(pending->input, size) ||
                         std::memcmp(pending->input, pending->started_with.data(), size) != 0;
    ZL_CHECK(!changed,
             "the input of {} (call #{}) was freed or changed before its wait(): a collective "
             "reads its buffers until wait() returns, so keep them (and leave them alone) until "
             "then",
             pending->name, pending->number);
  };
  return CommHandle(std::move(wait));
}

void GradingComm::all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op) {
  blocking("all_reduce");
  inner_.all_reduce(data, count, dtype, op);
}

void GradingComm::reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                                 ReduceOp op) {
  blocking("reduce_scatter");
  inner_.reduce_scatter(send, recv, recv_count, dtype, op);
}

void GradingComm::all_gather(const void* send, void* recv, std::size_t send_count, DType dtype) {
  blocking("all_gather");
  inner_.all_gather(send, recv, send_count, dtype);
}

void GradingComm::broadcast(void* data, std::size_t count, DType dtype, int root) {
  blocking("broadcast");
  inner_.broadcast(data, count, dtype, root);
}

void GradingComm::barrier() {
  blocking("barrier");
  inner_.barrier();
}

CommHandle GradingComm::all_reduce_async(void* data, std::size_t count, DType dtype, ReduceOp op) {
  // In place: the buffer holds the result once the call has run; it must hold it until wait().
  CommHandle inner = inner_.all_reduce_async(data, count, dtype, op);
  return watch("all_reduce", data, bytes_of(count, dtype), std::move(inner));
}

CommHandle GradingComm::reduce_scatter_async(const void* send, void* recv, std::size_t recv_count,
                                             DType dtype, ReduceOp op) {
  CommHandle inner = inner_.reduce_scatter_async(send, recv, recv_count, dtype, op);
  return watch("reduce_scatter", send, bytes_of(recv_count * size(), dtype), std::move(inner));
}

CommHandle GradingComm::all_gather_async(const void* send, void* recv, std::size_t send_count,
                                         DType dtype) {
  CommHandle inner = inner_.all_gather_async(send, recv, send_count, dtype);
  return watch("all_gather", send, bytes_of(send_count, dtype), std::move(inner));
}

}  // namespace zl::exercise
