// nvme_swap.cpp — the swap file's layout (units one after another, each master | m | v, each part
// starting on a page of its own, as O_DIRECT moves whole pages) and the checksum that makes a
// changed file an error.
#include "engines/nvme_swap.hpp"

#include <algorithm>
#include <cstring>
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
  return SwapFile::aligned(elems * static_cast<std::int64_t>(sizeof(float)));
}

// The file's bytes for units of `unit_elems`.
std::int64_t file_bytes(const std::vector<std::int64_t>& unit_elems) {
  std::int64_t bytes = 0;
  for (const std::int64_t elems : unit_elems) bytes += 3 * part_bytes(elems);
  return bytes;
}

}  // namespace

NvmeSwap::NvmeSwap(MemoryLedger& ledger, const std::filesystem::path& folder,
                   std::vector<std::int64_t> unit_elems)
    : ledger_(ledger),
      unit_elems_(std::move(unit_elems)),
      file_(unique_swap_path(folder), file_bytes(unit_elems_)),
      checksums_(unit_elems_.size(), 0),
      written_(unit_elems_.size(), 0),
      holders_(unit_elems_.size(), 0) {
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

void NvmeSwap::write(std::size_t unit, std::span<const float> master,
                     std::span<const float> exp_avg, std::span<const float> exp_avg_sq) {
  check_sizes(unit, master.size(), exp_avg.size(), exp_avg_sq.size());
  std::int64_t offset = offsets_[unit];
  for (const auto part : {master, exp_avg, exp_avg_sq}) {
    file_.write(offset, std::as_bytes(part));
    offset += part_bytes(unit_elems_[unit]);
  }
  checksums_[unit] = checksum_of(master, exp_avg, exp_avg_sq);
  written_[unit] = 1;
}

void NvmeSwap::read(std::size_t unit, std::span<float> master, std::span<float> exp_avg,
                    std::span<float> exp_avg_sq) {
  check_sizes(unit, master.size(), exp_avg.size(), exp_avg_sq.size());
  if (written_[unit] == 0) {
    for (const auto part : {master, exp_avg, exp_avg_sq}) std::ranges::fill(part, 0.0f);
    return;
  }
  std::int64_t offset = offsets_[unit];
  for (const auto part : {master, exp_avg, exp_avg_sq}) {
    file_.read(offset, std::as_writable_bytes(part));
    offset += part_bytes(unit_elems_[unit]);
  }
  ZL_CHECK(checksum_of(master, exp_avg, exp_avg_sq) == checksums_[unit],
           "the swap file {} was changed under this run (unit {} reads back other bytes than "
           "were written): keep --nvme-path for this run alone and start it again",
           file_.path().string(), unit);
}

void record_disk_io(Comm* comm, const SwapTotals& before, const SwapTotals& now) {
  if (comm == nullptr) return;
  if (now.read_bytes > before.read_bytes) {
    comm->disk_io(DiskIo::Read, now.read_bytes - before.read_bytes, now.read_ms - before.read_ms);
  }
  if (now.written_bytes > before.written_bytes) {
    comm->disk_io(DiskIo::Write, now.written_bytes - before.written_bytes,
                  now.write_ms - before.write_ms);
  }
}

}  // namespace zl
