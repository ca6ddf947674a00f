// cpu_thread_pool.cpp — the workers of a CpuDevice: a generation counter wakes them for a run,
// a shared index hands out the tasks, and the caller waits until every worker has left the run.
#include "ops/cpu/cpu_thread_pool.hpp"

#include <algorithm>
#include <utility>

#include "core/error.hpp"

namespace zl::cpu {

CpuThreadPool::CpuThreadPool(int threads, Grain grain) : grain_(grain) {
  ZL_CHECK(threads >= 1 && threads <= 1024,
           "--threads {} is invalid: use a thread count from 1 to 1024", threads);
  workers_.reserve(static_cast<std::size_t>(threads - 1));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

CpuThreadPool::~CpuThreadPool() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  workers_.clear();  // jthreads join
}

void CpuThreadPool::run(std::int64_t tasks, const std::function<void(std::int64_t)>& task) {
  if (tasks <= 0) return;
  if (workers_.empty() || tasks == 1) {
    for (std::int64_t i = 0; i < tasks; ++i) task(i);
    return;
  }
  {
    const std::lock_guard lock(mutex_);
    task_ = &task;
    tasks_ = tasks;
    next_task_ = 0;
    error_ = nullptr;
    busy_workers_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  drain();
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return busy_workers_ == 0; });
  task_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

// Takes tasks of the current run until none is left.
void CpuThreadPool::drain() {
  for (;;) {
    std::int64_t index = 0;
    const std::function<void(std::int64_t)>* task = nullptr;
    {
      const std::lock_guard lock(mutex_);
      if (next_task_ >= tasks_) return;
      index = next_task_++;
      task = task_;
    }
    try {
      (*task)(index);
    } catch (...) {
      const std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }
}

void CpuThreadPool::work() {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    drain();
    {
      const std::lock_guard lock(mutex_);
      --busy_workers_;
    }
    done_.notify_one();
  }
}

int cpu_threads_per_rank(int ranks) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, ranks));
}

}  // namespace zl::cpu
