// grading_comm.hpp — a Comm that passes every call on to a rank's own Comm and checks what a
// learner's engine can get wrong around async collectives, which the simulator itself would let
// pass (it moves an async call's data at issue): an input buffer freed, reused or written before
// its wait(), and a blocking call made while an async one is still unwaited.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.hpp"

namespace zl::exercise {

/// Forwards to `inner` (which must outlive it); its traffic stays in `inner`'s ledger. Throws
/// zl::Error naming the call (the simulator adds the rank) when an async call's input changed
/// between its start and its wait(), or when a blocking call comes while an async one is unwaited.
class GradingComm final : public Comm {
 public:
  /// Checks the calls the engine makes on `inner`.
  explicit GradingComm(Comm& inner) : inner_(inner) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }

  void all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                      ReduceOp op) override;
  void all_gather(const void* send, void* recv, std::size_t send_count, DType dtype) override;
  void broadcast(void* data, std::size_t count, DType dtype, int root) override;
  void barrier() override;

  CommHandle all_reduce_async(void* data, std::size_t count, DType dtype, ReduceOp op) override;
  CommHandle reduce_scatter_async(const void* send, void* recv, std::size_t recv_count, DType dtype,
                                  ReduceOp op) override;
  CommHandle all_gather_async(const void* send, void* recv, std::size_t send_count,
                              DType dtype) override;
  /// Passed on: the copy lands in `inner`'s ledger and timeline.
  void host_copy(HostCopy direction, std::int64_t bytes) override {
    inner_.host_copy(direction, bytes);
  }

 private:
  // An async call not yet waited: what its input held when it started.
  struct Pending {
    std::int64_t number = 0;
    std::string name;
    const void* input = nullptr;
    std::vector<std::uint8_t> started_with;
    bool waited = false;
  };

  // Counts a blocking call named `name` and refuses it while an async call is unwaited.
  void blocking(const char* name);
  // Counts an async call and keeps a copy of its `bytes` of input at `input` (the output too for
  // an in-place call, read after the call); returns the handle that checks it at wait().
  CommHandle watch(const char* name, const void* input, std::size_t bytes, CommHandle inner);

  Comm& inner_;
  std::int64_t calls_ = 0;
  std::vector<std::shared_ptr<Pending>> pending_;
};

}  // namespace zl::exercise
