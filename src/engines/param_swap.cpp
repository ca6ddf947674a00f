// param_swap.cpp — the parameter swap file's layout (units one after another, each starting on a
// page of its own, as O_DIRECT moves whole pages), the pool of swap buffers and each unit's state
// (on disk, coming in, held, going out), and the checksum that makes a changed file an error.
// Every read and write goes on the timeline's disk stream when it starts and is waited for where
// its buffer is next needed; one that is waited for at once costs what a blocking one does.
#include "engines/param_swap.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/error.hpp"
#include "engines/nvme_swap.hpp"

namespace zl {

namespace {

std::int64_t file_bytes(const std::vector<std::int64_t>& unit_elems, DType dtype) {
  std::int64_t bytes = 0;
  for (const std::int64_t elems : unit_elems) {
    bytes += page_padded(elems * static_cast<std::int64_t>(dtype_bytes(dtype)));
  }
  return bytes;
}

}  // namespace

std::vector<bool> shards_on_disk(const std::vector<std::int64_t>& offloaded_elems,
                                 std::int64_t max_in_cpu_elems) {
  std::vector<bool> on_disk;
  std::int64_t kept_elems = 0;
  bool spilled = false;
  for (const std::int64_t elems : offloaded_elems) {
    spilled = spilled || (elems > 0 && kept_elems + elems > max_in_cpu_elems);
    on_disk.push_back(elems > 0 && spilled);
    if (!spilled) kept_elems += elems;
  }
  return on_disk;
}

std::int64_t swap_buffer_elems(const std::vector<std::int64_t>& unit_elems,
                               std::int64_t buffer_elems) {
  std::int64_t largest = 0;
  for (std::size_t u = 0; u < unit_elems.size(); ++u) {
    ZL_CHECK(unit_elems[u] <= buffer_elems,
             "offload_param.buffer_size {} cannot hold parameter unit {}'s shard of {} elements: "
             "raise it to at least {} (--param-buffer-size)",
             buffer_elems, u, unit_elems[u], unit_elems[u]);
    largest = std::max(largest, unit_elems[u]);
  }
  return largest;
}

ParamSwap::ParamSwap(Device& device, Comm* comm, const std::filesystem::path& folder, DType dtype,
                     std::vector<std::int64_t> unit_elems, ParamBuffers buffers,
                     const AioSettings& aio)
    : device_(device),
      comm_(comm),
      dtype_(dtype),
      unit_elems_(std::move(unit_elems)),
      pool_elems_(swap_buffer_elems(unit_elems_, buffers.max_elems)),
      file_(unique_swap_path(folder), file_bytes(unit_elems_, dtype_), aio, "--param-nvme-path"),
      buffer_of_(unit_elems_.size(), -1),
      state_(unit_elems_.size(), State::OnDisk),
      io_(unit_elems_.size()),
      timeline_ids_(unit_elems_.size(), 0),
      holders_(unit_elems_.size(), 0),
      dirty_(unit_elems_.size(), 0),
      written_(unit_elems_.size(), 0),
      checksums_(unit_elems_.size(), 0) {
  std::int64_t offset = 0;
  for (std::size_t u = 0; u < unit_elems_.size(); ++u) {
    offsets_.push_back(offset);
    offset += page_padded(unit_bytes(u));
  }
  for (int b = 0; pool_elems_ > 0 && b < buffers.count; ++b) {
    pool_.push_back(device_.alloc(MemCategory::HostParams, dtype_, {pool_elems_}));
    free_.push_back(buffers.count - 1 - b);  // taken from the back: buffer 0 first
  }
  device_.ledger().book(MemCategory::NvmeParams, total_bytes());
}

ParamSwap::~ParamSwap() {
  settle(/*unwinding=*/true);
  device_.ledger().release(MemCategory::NvmeParams, total_bytes());
}

std::int64_t ParamSwap::total_bytes() const {
  return std::accumulate(unit_elems_.begin(), unit_elems_.end(), std::int64_t{0}) *
         static_cast<std::int64_t>(dtype_bytes(dtype_));
}

std::int64_t ParamSwap::unit_bytes(std::size_t unit) const {
  return unit_elems_.at(unit) * static_cast<std::int64_t>(dtype_bytes(dtype_));
}

std::span<std::byte> ParamSwap::bytes_of(std::size_t unit) {
  auto* first =
      static_cast<std::byte*>(pool_.at(static_cast<std::size_t>(buffer_of_[unit])).data());
  return {first, static_cast<std::size_t>(unit_bytes(unit))};
}

TypedSpan ParamSwap::held_span(std::size_t unit) {
  return {bytes_of(unit).data(), unit_elems_[unit], dtype_};
}

TypedSpan ParamSwap::hold(std::size_t unit) {
  ZL_CHECK(on_disk(unit), "parameter unit {} is not on the NVMe tier", unit);
  if (holders_[unit] > 0) {
    ++holders_[unit];
    return held_span(unit);
  }
  if (state_[unit] == State::Writing) {  // its buffer still holds what is going out
    writing_.erase(std::ranges::find(writing_, unit));
    finish(unit);
  } else if (state_[unit] == State::Reading) {
    reading_.erase(std::ranges::find(reading_, unit));
    finish(unit);
    ++reads_ahead_taken_;
  } else {
    buffer_of_[unit] = take_buffer();
    if (written_[unit] != 0) {
      move_now(unit, IoDirection::Read);
    } else {
      const std::span<std::byte> bytes = bytes_of(unit);
      std::memset(bytes.data(), 0, bytes.size());
    }
  }
  state_[unit] = State::Held;
  holders_[unit] = 1;
  return held_span(unit);
}

void ParamSwap::release(std::size_t unit, bool written) {
  ZL_CHECK(on_disk(unit) && holders_.at(unit) > 0,
           "release of parameter unit {}, which no one holds", unit);
  dirty_[unit] = static_cast<char>(dirty_[unit] != 0 || written);
  if (--holders_[unit] > 0) return;
  if (dirty_[unit] == 0) {
    free_buffer(unit);
    return;
  }
  checksums_[unit] = swap_checksum(bytes_of(unit), 0);
  written_[unit] = 1;
  dirty_[unit] = 0;
  // A buffer stays free for the next hold: the oldest write ends when none would; with one
  // buffer, each write waits at once.
  if (free_.empty() && writing_.empty()) {
    move_now(unit, IoDirection::Write);
    free_buffer(unit);
    return;
  }
  start(unit, IoDirection::Write);
  writing_.push_back(unit);
  while (free_.empty()) end_oldest_write();
}

bool ParamSwap::read_ahead(std::size_t unit) {
  if (!on_disk(unit) || state_[unit] != State::OnDisk || written_[unit] == 0) return true;
  if (free_.size() < 2) return false;
  buffer_of_[unit] = free_.back();
  free_.pop_back();
  start(unit, IoDirection::Read);
  reading_.push_back(unit);
  return true;
}

void ParamSwap::settle(bool unwinding) {
  const auto settle_one = [&](auto&& end_one) {
    if (!unwinding) return end_one();
    try {
      end_one();
    } catch (...) {  // NOLINT(bugprone-empty-catch): the first error is the one to report
    }
  };
  while (!writing_.empty()) settle_one([&] { end_oldest_write(); });
  while (!reading_.empty()) settle_one([&] { drop_newest_read(); });
}

int ParamSwap::take_buffer() {
  if (free_.empty() && !writing_.empty()) end_oldest_write();
  if (free_.empty() && !reading_.empty()) drop_newest_read();
  ZL_CHECK(!free_.empty(),
           "offload_param.buffer_count {} is too small: more parameter units are held at once: "
           "raise it (--param-buffer-count)",
           pool_.size());
  const int buffer = free_.back();
  free_.pop_back();
  return buffer;
}

void ParamSwap::start(std::size_t unit, IoDirection direction) {
  const std::span<std::byte> bytes = bytes_of(unit);
  io_[unit] = direction == IoDirection::Read ? file_.start_read(offsets_[unit], bytes)
                                             : file_.start_write(offsets_[unit], bytes);
  state_[unit] = direction == IoDirection::Read ? State::Reading : State::Writing;
  if (comm_ != nullptr)
    timeline_ids_[unit] = comm_->disk_io_started(disk_io_of(direction), unit_bytes(unit));
}

void ParamSwap::move_now(std::size_t unit, IoDirection direction) {
  const bool alone = writing_.empty() && reading_.empty();
  const std::span<std::byte> bytes = bytes_of(unit);
  if (direction == IoDirection::Read) {
    file_.read(offsets_[unit], bytes);
  } else {
    file_.write(offsets_[unit], bytes);
  }
  if (alone) {  // the file moved nothing else since the last record: a blocking read or write
    record_disk_io(comm_, file_, DiskRecord::Blocking);
  } else {  // behind those in flight on the disk stream
    if (comm_ != nullptr) {
      comm_->disk_io_waited(comm_->disk_io_started(disk_io_of(direction), unit_bytes(unit)));
    }
    record_disk_io(comm_, file_, DiskRecord::TrafficOnly);
  }
  if (direction == IoDirection::Read) check_read(unit);
}

void ParamSwap::finish(std::size_t unit) {
  const bool read = state_[unit] == State::Reading;
  state_[unit] = State::Held;  // the buffer is the unit's either way
  wait_for(unit);
  if (read) check_read(unit);
}

void ParamSwap::wait_for(std::size_t unit) {
  const SwapIo io = io_[unit];
  io_[unit] = {};
  if (comm_ != nullptr && timeline_ids_[unit] != 0) comm_->disk_io_waited(timeline_ids_[unit]);
  timeline_ids_[unit] = 0;
  file_.wait(io);
  record_disk_io(comm_, file_, DiskRecord::TrafficOnly);
}

void ParamSwap::check_read(std::size_t unit) {
  ZL_CHECK(swap_checksum(bytes_of(unit), 0) == checksums_[unit],
           "the swap file {} was changed under this run (parameter unit {} reads back other "
           "bytes than were written): keep --param-nvme-path for this run alone and start it "
           "again",
           file_.path().string(), unit);
}

void ParamSwap::end_oldest_write() {
  const std::size_t unit = writing_.front();
  writing_.pop_front();
  state_[unit] = State::OnDisk;  // a failed write keeps its buffer: it may still be read from
  wait_for(unit);
  free_buffer(unit);
}

void ParamSwap::drop_newest_read() {
  const std::size_t unit = reading_.back();
  reading_.pop_back();
  finish(unit);
  free_buffer(unit);
}

void ParamSwap::free_buffer(std::size_t unit) {
  free_.push_back(buffer_of_[unit]);
  buffer_of_[unit] = -1;
  state_[unit] = State::OnDisk;
}

}  // namespace zl
