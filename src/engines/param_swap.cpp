// param_swap.cpp — the parameter swap file's layout (units one after another, each starting on a
// page of its own, as O_DIRECT moves whole pages), holding by count, and the checksum that makes
// a changed file an error.
#include "engines/param_swap.hpp"

#include <algorithm>
#include <numeric>
#include <span>

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

std::span<std::byte> bytes_of(Buffer& buffer) {
  return {static_cast<std::byte*>(buffer.data()), static_cast<std::size_t>(buffer.bytes())};
}

}  // namespace

ParamSwap::ParamSwap(Device& device, Comm* comm, const std::filesystem::path& folder, DType dtype,
                     std::vector<std::int64_t> unit_elems, const AioSettings& aio)
    : device_(device),
      comm_(comm),
      dtype_(dtype),
      unit_elems_(std::move(unit_elems)),
      file_(unique_swap_path(folder), file_bytes(unit_elems_, dtype_), aio, "--param-nvme-path"),
      resident_(unit_elems_.size()),
      holders_(unit_elems_.size(), 0),
      dirty_(unit_elems_.size(), 0),
      written_(unit_elems_.size(), 0),
      checksums_(unit_elems_.size(), 0) {
  std::int64_t offset = 0;
  for (std::size_t u = 0; u < unit_elems_.size(); ++u) {
    offsets_.push_back(offset);
    offset += page_padded(unit_bytes(u));
  }
  device_.ledger().book(MemCategory::NvmeParams, total_bytes());
}

ParamSwap::~ParamSwap() {
  device_.ledger().release(MemCategory::NvmeParams, total_bytes());
}

std::int64_t ParamSwap::total_bytes() const {
  return std::accumulate(unit_elems_.begin(), unit_elems_.end(), std::int64_t{0}) *
         static_cast<std::int64_t>(dtype_bytes(dtype_));
}

std::int64_t ParamSwap::unit_bytes(std::size_t unit) const {
  return unit_elems_.at(unit) * static_cast<std::int64_t>(dtype_bytes(dtype_));
}

TypedSpan ParamSwap::hold(std::size_t unit) {
  ZL_CHECK(on_disk(unit), "parameter unit {} is not on the NVMe tier", unit);
  if (holders_[unit]++ == 0) {
    resident_[unit] = device_.alloc(MemCategory::HostParams, dtype_, {unit_elems_[unit]});
    const std::span<std::byte> bytes = bytes_of(resident_[unit]);
    if (written_[unit] != 0) {
      file_.read(offsets_[unit], bytes);
      record_disk_io(comm_, file_);
      ZL_CHECK(swap_checksum(bytes, 0) == checksums_[unit],
               "the swap file {} was changed under this run (parameter unit {} reads back other "
               "bytes than were written): keep --param-nvme-path for this run alone and start it "
               "again",
               file_.path().string(), unit);
    }
  }
  return view_of(resident_[unit]);
}

void ParamSwap::release(std::size_t unit, bool written) {
  ZL_CHECK(on_disk(unit) && holders_.at(unit) > 0,
           "release of parameter unit {}, which no one holds", unit);
  dirty_[unit] = static_cast<char>(dirty_[unit] != 0 || written);
  if (--holders_[unit] > 0) return;
  if (dirty_[unit] != 0) {
    const std::span<std::byte> bytes = bytes_of(resident_[unit]);
    file_.write(offsets_[unit], bytes);
    record_disk_io(comm_, file_);
    checksums_[unit] = swap_checksum(bytes, 0);
    written_[unit] = 1;
    dirty_[unit] = 0;
  }
  resident_[unit] = Buffer();
}

}  // namespace zl
