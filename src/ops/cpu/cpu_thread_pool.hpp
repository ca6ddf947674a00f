// cpu_thread_pool.hpp — the worker threads of one CpuDevice: run(tasks, fn) calls fn(0), ...,
// fn(tasks - 1) once each, spread over the workers and the calling thread. Which thread runs a
// task never changes a result: kernels cut their work into tasks by shape alone and write each
// task's result to its own place (combining partial results afterwards, in task order).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "ops/cpu/cpu_grain.hpp"

namespace zl::cpu {

/// threads - 1 workers that wait on a condition variable between runs, plus the caller.
class CpuThreadPool {
 public:
  /// Starts threads - 1 workers (none for 1), for kernels cut at `grain`. Throws zl::Error for
  /// threads outside 1..1024.
  explicit CpuThreadPool(int threads, Grain grain = Grain::Normal);
  /// Stops and joins the workers.
  ~CpuThreadPool();
  CpuThreadPool(const CpuThreadPool&) = delete;
  CpuThreadPool& operator=(const CpuThreadPool&) = delete;

  /// The threads that share a run's tasks, the caller included.
  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  /// How finely the kernels that run here cut their work.
  Grain grain() const { return grain_; }

  /// Calls task(i) for every i in [0, tasks) and returns when all have returned; the first
  /// exception a task throws is rethrown here (the other tasks still run). Not reentrant: one
  /// run at a time, from the device's own thread.
  void run(std::int64_t tasks, const std::function<void(std::int64_t)>& task);

 private:
  void work();
  void drain();

  Grain grain_;
  std::mutex mutex_;
  std::condition_variable wake_;  // a run started, or the pool is stopping
  std::condition_variable done_;  // a worker finished its part of a run
  const std::function<void(std::int64_t)>* task_ = nullptr;
  std::int64_t tasks_ = 0;
  std::int64_t next_task_ = 0;    // the next task index to hand out
  std::uint64_t generation_ = 0;  // runs started
  int busy_workers_ = 0;          // workers still inside the current run
  bool stopping_ = false;
  std::exception_ptr error_;
  std::vector<std::jthread> workers_;
};

/// Threads per rank when `ranks` ranks share this machine: the cores divided among them, >= 1.
int cpu_threads_per_rank(int ranks);

}  // namespace zl::cpu
