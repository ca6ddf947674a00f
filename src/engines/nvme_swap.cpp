// nvme_swap.cpp — the swap file's layout (units one after another, each master | m | v, each part
// starting on a page of its own, as O_DIRECT moves whole pages) and the checksum that makes a
// changed file an error.
#include "engines/nvme_swap.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <numeric>

#include "core/error.hpp"

namespace zl {

namespace {

std::uint64_t checksum_of(std::span<const float> master, std::span<const float> exp_avg,
                          std::span<const float> exp_avg_sq) {
  std::uint64_t hash = 0x6A09E667F3BCC909ull;
  for (const auto part : {master, exp_avg, exp_avg_sq}) {
    hash = swap_checksum(std::as_bytes(part), hash);
  }
  return hash;
}

// Bytes of the file one part (master, m or v) of `elems` fp32 elements takes: whole pages.
std::int64_t part_bytes(std::int64_t elems) {
  return page_padded(elems * static_cast<std::int64_t>(sizeof(float)));
}

// The file's bytes for units of `unit_elems`.
std::int64_t file_bytes(const std::vector<std::int64_t>& unit_elems) {
  std::int64_t bytes = 0;
  for (const std::int64_t elems : unit_elems) bytes += 3 * part_bytes(elems);
  return bytes;
}

}  // namespace

NvmeSwap::NvmeSwap(MemoryLedger& ledger, const std::filesystem::path& folder,
                   std::vector<std::int64_t> unit_elems, const AioSettings& aio)
    : ledger_(ledger),
      unit_elems_(std::move(unit_elems)),
      file_(unique_swap_path(folder), file_bytes(unit_elems_), aio),
      checksums_(unit_elems_.size(), 0),
      written_(unit_elems_.size(), 0),
      holders_(unit_elems_.size(), 0),
      residency_(unit_elems_.size(), Residency::OnDisk),
      timeline_ids_(unit_elems_.size(), 0),
      in_flight_(unit_elems_.size()) {
  std::int64_t offset = 0;
  for (const std::int64_t elems : unit_elems_) {
    offsets_.push_back(offset);
    offset += 3 * part_bytes(elems);
  }
  ledger_.book(MemCategory::NvmeMaster, master_bytes());
  ledger_.book(MemCategory::NvmeOptimizer, 2 * master_bytes());
}

NvmeSwap::~NvmeSwap() {
  ledger_.release(MemCategory::NvmeMaster, master_bytes());
  ledger_.release(MemCategory::NvmeOptimizer, 2 * master_bytes());
}

std::int64_t NvmeSwap::master_bytes() const {
  const std::int64_t elems =
      std::accumulate(unit_elems_.begin(), unit_elems_.end(), std::int64_t{0});
  return elems * static_cast<std::int64_t>(sizeof(float));
}

void NvmeSwap::check_sizes(std::size_t unit, std::size_t master, std::size_t exp_avg,
                           std::size_t exp_avg_sq) const {
  const auto elems = static_cast<std::size_t>(unit_elems_.at(unit));
  ZL_CHECK(master == elems && exp_avg == elems && exp_avg_sq == elems,
           "swap unit {}: {} master, {} m and {} v elements for a unit of {}", unit, master,
           exp_avg, exp_avg_sq, elems);
}

void NvmeSwap::start_write(std::size_t unit, std::span<const float> master,
                           std::span<const float> exp_avg, std::span<const float> exp_avg_sq) {
  check_sizes(unit, master.size(), exp_avg.size(), exp_avg_sq.size());
  InFlight& flight = in_flight_[unit];
  ZL_CHECK(flight.requests.empty(), "swap unit {} is already moving", unit);
  std::int64_t offset = offsets_[unit];
  for (const auto part : {master, exp_avg, exp_avg_sq}) {
    flight.requests.push_back(file_.start_write(offset, std::as_bytes(part)));
    offset += part_bytes(unit_elems_[unit]);
  }
  checksums_[unit] = checksum_of(master, exp_avg, exp_avg_sq);
  written_[unit] = 1;
}

void NvmeSwap::finish_write(std::size_t unit) {
  wait_requests(unit);
}

void NvmeSwap::wait_requests(std::size_t unit) {
  InFlight& flight = in_flight_.at(unit);
  const std::vector<SwapIo> requests = std::move(flight.requests);
  flight.requests.clear();
  // Every request is waited for, so none outlives the bytes it moves; the first error is kept.
  std::exception_ptr error;
  for (const SwapIo& io : requests) {
    try {
      file_.wait(io);
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

void NvmeSwap::start_read(std::size_t unit, std::span<float> master, std::span<float> exp_avg,
                          std::span<float> exp_avg_sq) {
  check_sizes(unit, master.size(), exp_avg.size(), exp_avg_sq.size());
  InFlight& flight = in_flight_[unit];
  ZL_CHECK(flight.requests.empty(), "swap unit {} is already moving", unit);
  flight.parts[0] = master;
  flight.parts[1] = exp_avg;
  flight.parts[2] = exp_avg_sq;
  if (written_[unit] == 0) {
    for (const auto part : {master, exp_avg, exp_avg_sq}) std::ranges::fill(part, 0.0f);
    return;
  }
  std::int64_t offset = offsets_[unit];
  for (const auto part : {master, exp_avg, exp_avg_sq}) {
    flight.requests.push_back(file_.start_read(offset, std::as_writable_bytes(part)));
    offset += part_bytes(unit_elems_[unit]);
  }
}

void NvmeSwap::finish_read(std::size_t unit) {
  wait_requests(unit);
  const InFlight& flight = in_flight_[unit];
  if (written_[unit] == 0) return;
  ZL_CHECK(checksum_of(flight.parts[0], flight.parts[1], flight.parts[2]) == checksums_[unit],
           "the swap file {} was changed under this run (unit {} reads back other bytes than "
           "were written): keep --nvme-path for this run alone and start it again",
           file_.path().string(), unit);
}

void record_disk_io(Comm* comm, SwapFile& file, DiskRecord how) {
  const IoTotals moved = file.take_unrecorded();
  if (comm == nullptr) return;
  const auto record = [&](DiskIo direction, std::int64_t bytes, double ms) {
    if (bytes == 0) return;
    if (how == DiskRecord::Blocking) {
      comm->disk_io(direction, bytes, ms);
    } else {
      comm->traffic().record_disk(direction, bytes, ms);
    }
  };
  record(DiskIo::Read, moved.read_bytes, moved.read_ms);
  record(DiskIo::Write, moved.written_bytes, moved.write_ms);
}

}  // namespace zl
