// optimizer_swap.hpp — ZeRO-Infinity's optimizer state moving between the NVMe tier and host
// memory, unit by unit. A unit is brought in for its holders (swap_in) and written back when the
// last lets go (swap_out). With pipeline_read the update reads the next unit while the current one
// updates (prefetch); with pipeline_write a unit's write-back goes on while the next one updates,
// at most buffer_count units in host memory at once; settle_swaps ends what is in flight. Without
// the tier every call here does nothing.
#pragma once

#include <cstddef>
#include <exception>

#include "core/io_queue.hpp"
#include "core/steady_ms.hpp"
#include "engines/optimizer_step.hpp"

namespace zl {

/// Brings unit `unit`'s master and moments from the NVMe tier into host memory (HostMaster,
/// HostOptimizer) for one more holder: from a read prefetch() started, from a write-back still in
/// flight (its buffers are taken back), or read now.
void swap_in(OptimizerState& state, Device& device, std::size_t unit);

/// With pipeline_read, starts reading unit `unit` (if there is one) into host memory while other
/// work goes on; swap_in(unit) takes it over.
void prefetch(OptimizerState& state, Device& device, std::size_t unit);

/// Lets go of unit `unit` for one holder; the last one writes it back to the tier: now, or with
/// pipeline_write, in flight until it is needed, more than buffer_count units would be in host
/// memory, or settle_swaps().
void swap_out(OptimizerState& state, std::size_t unit);

/// Ends every read and write in flight and frees their buffers (units prefetched but not taken
/// go back to the tier untouched); the traffic moved is recorded. With `unwinding`, errors are
/// dropped (the first one is already on its way).
void settle_swaps(OptimizerState& state, bool unwinding = false);

/// Calls settle_swaps() when it ends, dropping errors when an exception is already unwinding.
class SwapSettler {
 public:
  /// Settles `state`'s swaps at the end of the scope.
  explicit SwapSettler(OptimizerState& state) : state_(state) {}
  ~SwapSettler() noexcept(false) { settle_swaps(state_, std::uncaught_exceptions() != unwinding_); }
  SwapSettler(const SwapSettler&) = delete;
  SwapSettler& operator=(const SwapSettler&) = delete;

 private:
  OptimizerState& state_;
  int unwinding_ = std::uncaught_exceptions();
};

/// Times an update that streams the NVMe tier (nothing without it): its wall time, the part of
/// it the AdamW kernels ran, and the time the swap file's reads and writes were in flight, into
/// the traffic ledger (SwappedUpdates) by record(), once the swaps are settled.
class SwapStepTimer {
 public:
  /// Starts timing `state`'s update.
  explicit SwapStepTimer(const OptimizerState& state);
  /// Runs fn(), its time counted as the kernels'.
  template <class Fn>
  void kernels(Fn&& fn) {
    const double started_ms = steady_ms();
    fn();
    adamw_ms_ += steady_ms() - started_ms;
  }
  /// Records the update in state.comm's traffic ledger (nothing without the tier or a comm).
  void record();

 private:
  const OptimizerState& state_;
  double started_ms_ = 0.0;
  double adamw_ms_ = 0.0;
  IoTotals io_before_;
};

/// Runs fn() with every unit's master and moments in memory (from the NVMe tier, if any), then
/// writes them back; returns what fn returns.
template <class Fn>
auto with_state_resident(OptimizerState& state, Device& device, Fn&& fn) {
  SwapSettler settler(state);
  for (std::size_t u = 0; u < state.adam.exp_avg.size(); ++u) swap_in(state, device, u);
  struct Release {
    OptimizerState& state;
    int unwinding = std::uncaught_exceptions();
    ~Release() noexcept(false) {
      for (std::size_t u = 0; u < state.adam.exp_avg.size(); ++u) {
        if (std::uncaught_exceptions() == unwinding) {
          swap_out(state, u);
          continue;
        }
        try {  // fn failed: keep its error, write back what can be
          swap_out(state, u);
        } catch (...) {  // NOLINT(bugprone-empty-catch): the first error is the one to report
        }
      }
    }
  } release{state};
  return fn();
}

}  // namespace zl
