// optimizer_swap.cpp — each unit's residency (on disk, coming in, held, going out), its host
// buffers made when it comes in and freed when its write-back ends, and the write-backs in flight
// kept in the order they started, the oldest ended first when buffer_count is reached. Each read
// and write is noted to the timeline when it starts and when the update waits for it.
#include "engines/optimizer_swap.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "engines/nvme_swap.hpp"

namespace zl {

namespace {

void alloc_unit(OptimizerState& state, Device& device, std::size_t unit) {
  const std::int64_t elems = state.nvme->unit_elems(unit);
  state.master[unit] = device.alloc(MemCategory::HostMaster, DType::F32, {elems});
  state.adam.exp_avg[unit] = device.alloc(MemCategory::HostOptimizer, DType::F32, {elems});
  state.adam.exp_avg_sq[unit] = device.alloc(MemCategory::HostOptimizer, DType::F32, {elems});
}

void free_unit(OptimizerState& state, std::size_t unit) {
  state.master[unit] = Buffer();
  state.adam.exp_avg[unit] = Buffer();
  state.adam.exp_avg_sq[unit] = Buffer();
}

bool pipelined(const OptimizerState& state) {
  return state.pipeline.read || state.pipeline.write;
}

// Pipelined, the timeline's notes (Comm::disk_io_started, disk_io_waited): a read or write of
// unit `unit` goes on the disk stream when it starts, and the update waits for it where it waits
// here. Unpipelined, each blocks the update, as record_swaps notes it.
void note_started(OptimizerState& state, std::size_t unit, IoDirection direction) {
  const std::int64_t bytes = state.nvme->io_bytes(unit, direction);
  std::int64_t& id = state.nvme->timeline_id(unit);
  id = 0;
  if (state.comm == nullptr || bytes == 0 || !pipelined(state)) return;
  id = state.comm->disk_io_started(disk_io_of(direction), bytes);
}

void note_waited(OptimizerState& state, std::size_t unit) {
  std::int64_t& id = state.nvme->timeline_id(unit);
  if (state.comm != nullptr && id != 0) state.comm->disk_io_waited(id);
  id = 0;
}

// What the swap file moved since the last record: into the traffic ledger, and unpipelined onto
// the timeline as blocking reads and writes.
void record_swaps(OptimizerState& state) {
  record_disk_io(state.comm, state.nvme->file(),
                 pipelined(state) ? DiskRecord::TrafficOnly : DiskRecord::Blocking);
}

void start_read(OptimizerState& state, std::size_t unit) {
  state.nvme->start_read(unit, state.master[unit].as<float>(), state.adam.exp_avg[unit].as<float>(),
                         state.adam.exp_avg_sq[unit].as<float>());
  state.nvme->residency(unit) = Residency::Reading;
  note_started(state, unit, IoDirection::Read);
}

// Ends the oldest write-back in flight and frees its buffers (they stay on error: the write may
// not have moved them).
void end_oldest_write(OptimizerState& state) {
  std::deque<std::size_t>& writing = state.nvme->writing();
  const std::size_t unit = writing.front();
  writing.pop_front();
  state.nvme->residency(unit) = Residency::OnDisk;
  state.nvme->finish_write(unit);
  note_waited(state, unit);
  free_unit(state, unit);
}

// Write-backs that may be in flight with the updating unit and a prefetched one in host memory.
std::size_t writes_allowed(const SwapPipeline& pipeline) {
  const int others = 1 + static_cast<int>(pipeline.read);
  return static_cast<std::size_t>(std::max(1, pipeline.buffer_count - others));
}

}  // namespace

void swap_in(OptimizerState& state, Device& device, std::size_t unit) {
  if (!state.nvme) return;
  NvmeSwap& nvme = *state.nvme;
  Residency& residency = nvme.residency(unit);
  if (residency == Residency::Held) {
    ++nvme.holders(unit);
    return;
  }
  if (residency == Residency::Writing) {  // its buffers still hold what is going out
    std::deque<std::size_t>& writing = nvme.writing();
    writing.erase(std::ranges::find(writing, unit));
    residency = Residency::OnDisk;
    nvme.finish_write(unit);
    note_waited(state, unit);
  } else {
    if (residency == Residency::OnDisk) {
      alloc_unit(state, device, unit);
      start_read(state, unit);
    }
    residency = Residency::OnDisk;  // until the read is checked
    nvme.finish_read(unit);
    note_waited(state, unit);
  }
  residency = Residency::Held;
  nvme.holders(unit) = 1;
  record_swaps(state);
}

void prefetch(OptimizerState& state, Device& device, std::size_t unit) {
  if (!state.nvme || !state.pipeline.read || unit >= state.adam.exp_avg.size()) return;
  if (state.nvme->residency(unit) != Residency::OnDisk) return;
  alloc_unit(state, device, unit);
  start_read(state, unit);
}

void swap_out(OptimizerState& state, std::size_t unit) {
  if (!state.nvme) return;
  NvmeSwap& nvme = *state.nvme;
  int& holders = nvme.holders(unit);
  ZL_CHECK(nvme.residency(unit) == Residency::Held && holders > 0,
           "swap_out of unit {}, which no one holds", unit);
  if (--holders > 0) return;
  nvme.start_write(unit, state.master[unit].as<float>(), state.adam.exp_avg[unit].as<float>(),
                   state.adam.exp_avg_sq[unit].as<float>());
  nvme.residency(unit) = Residency::Writing;
  nvme.writing().push_back(unit);
  note_started(state, unit, IoDirection::Write);
  const std::size_t allowed = state.pipeline.write ? writes_allowed(state.pipeline) : 0;
  while (nvme.writing().size() > allowed) end_oldest_write(state);
  record_swaps(state);
}

void settle_swaps(OptimizerState& state, bool unwinding) {
  if (!state.nvme) return;
  NvmeSwap& nvme = *state.nvme;
  const auto settle = [&](auto&& end_one) {
    if (!unwinding) return end_one();
    try {
      end_one();
    } catch (...) {  // NOLINT(bugprone-empty-catch): the first error is the one to report
    }
  };
  while (!nvme.writing().empty()) settle([&] { end_oldest_write(state); });
  for (std::size_t u = 0; u < state.adam.exp_avg.size(); ++u) {
    if (nvme.residency(u) != Residency::Reading) continue;
    nvme.residency(u) = Residency::OnDisk;
    settle([&] { nvme.finish_read(u); });
    note_waited(state, u);
    free_unit(state, u);
  }
  record_swaps(state);
}

SwapStepTimer::SwapStepTimer(const OptimizerState& state)
    : state_(state), started_ms_(steady_ms()) {
  if (state.nvme) io_before_ = state.nvme->file().totals();
}

void SwapStepTimer::record() {
  if (!state_.nvme || state_.comm == nullptr) return;
  const IoTotals io = state_.nvme->file().totals();
  state_.comm->traffic().record_swapped_update(
      {.updates = 1,
       .wall_ms = steady_ms() - started_ms_,
       .adamw_ms = adamw_ms_,
       .read_ms = io.read_ms - io_before_.read_ms,
       .write_ms = io.write_ms - io_before_.write_ms,
       .read_bytes = io.read_bytes - io_before_.read_bytes,
       .written_bytes = io.written_bytes - io_before_.written_bytes});
}

}  // namespace zl
