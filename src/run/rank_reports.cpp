// rank_reports.cpp — RankTotals and FileEntry to bytes and back: fixed-size numbers copied in
// order, strings as a length and their characters.
#include "run/rank_reports.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "core/error.hpp"

namespace zl {

namespace {

class Writer {
 public:
  template <class T>
  void put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes_.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  void put_string(std::string_view text) {
    put(static_cast<std::uint64_t>(text.size()));
    bytes_.append(text);
  }
  std::string take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

class Reader {
 public:
  Reader(std::string_view bytes, std::string_view what) : bytes_(bytes), what_(what) {}
  template <class T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T value;
    std::memcpy(&value, take(sizeof(T)).data(), sizeof(T));
    return value;
  }
  std::string get_string() { return std::string(take(get<std::uint64_t>())); }
  void expect_end() const {
    ZL_CHECK(bytes_.empty(), "{}: {} bytes left over after the last field", what_, bytes_.size());
  }

 private:
  std::string_view take(std::uint64_t size) {
    ZL_CHECK(size <= bytes_.size(), "{}: {} bytes expected but {} left", what_, size,
             bytes_.size());
    const std::string_view field = bytes_.substr(0, size);
    bytes_.remove_prefix(size);
    return field;
  }
  std::string_view bytes_;
  std::string_view what_;
};

constexpr std::string_view kTotalsWhat = "rank totals sent to rank 0";
constexpr std::string_view kEntryWhat = "checkpoint file entry sent to rank 0";

// A ledger with the given current and peak bytes per category and total peak. Bookings that reach
// the total peak come first (each category at most its peak, filled in order: the peaks add up to
// at least the total peak), are released, then each category reaches its peak alone (never more
// than the total peak) and is released, and last each category's current bytes are booked.
MemoryLedger rebuild_ledger(const std::array<std::int64_t, kMemCategoryCount>& current,
                            const std::array<std::int64_t, kMemCategoryCount>& peak,
                            std::int64_t total_peak) {
  MemoryLedger ledger;
  auto category = [](int c) { return static_cast<MemCategory>(c); };
  std::int64_t left = total_peak;
  std::array<std::int64_t, kMemCategoryCount> at_total_peak{};
  for (int c = 0; c < kMemCategoryCount; ++c) {
    at_total_peak[c] = std::min(peak[c], left);
    left -= at_total_peak[c];
    ledger.book(category(c), at_total_peak[c]);
  }
  ZL_CHECK(left == 0, "{}: a total peak of {} bytes is above the categories' peaks", kTotalsWhat,
           total_peak);
  for (int c = 0; c < kMemCategoryCount; ++c) ledger.release(category(c), at_total_peak[c]);
  for (int c = 0; c < kMemCategoryCount; ++c) {
    ledger.book(category(c), peak[c]);
    ledger.release(category(c), peak[c]);
  }
  for (int c = 0; c < kMemCategoryCount; ++c) ledger.book(category(c), current[c]);
  return ledger;
}

}  // namespace

std::string encode_rank_totals(const RankTotals& totals) {
  Writer out;
  out.put(static_cast<std::int32_t>(totals.report.rank));
  const MemoryLedger& memory = totals.report.memory;
  for (int c = 0; c < kMemCategoryCount; ++c) {
    out.put(memory.current_bytes(static_cast<MemCategory>(c)));
    out.put(memory.peak_bytes(static_cast<MemCategory>(c)));
  }
  out.put(memory.total_peak_bytes());
  const TrafficLedger& traffic = totals.report.traffic;
  for (int k = 0; k < kCollectiveKindCount; ++k) {
    const auto kind = static_cast<CollectiveKind>(k);
    out.put(traffic.sent_bytes(kind));
    out.put(traffic.recv_bytes(kind));
    out.put(traffic.calls(kind));
  }
  out.put(traffic.to_host_bytes());
  out.put(traffic.to_device_bytes());
  out.put(static_cast<std::uint64_t>(totals.steps.size()));
  for (const StepTimes& step : totals.steps) out.put(step);
  return out.take();
}

RankTotals decode_rank_totals(std::string_view bytes) {
  Reader in(bytes, kTotalsWhat);
  RankTotals totals;
  totals.report.rank = in.get<std::int32_t>();
  std::array<std::int64_t, kMemCategoryCount> current{}, peak{};
  for (int c = 0; c < kMemCategoryCount; ++c) {
    current[c] = in.get<std::int64_t>();
    peak[c] = in.get<std::int64_t>();
  }
  totals.report.memory = rebuild_ledger(current, peak, in.get<std::int64_t>());
  TrafficLedger& traffic = totals.report.traffic;
  for (int k = 0; k < kCollectiveKindCount; ++k) {
    const auto kind = static_cast<CollectiveKind>(k);
    const auto sent = in.get<std::int64_t>();
    const auto recv = in.get<std::int64_t>();
    const auto calls = in.get<std::int64_t>();
    // One call carries the volume, the others none: the totals are what the report reads.
    for (std::int64_t call = 0; call < calls; ++call) {
      traffic.record(kind, call == 0 ? RingVolume{sent, recv} : RingVolume{});
    }
    ZL_CHECK(calls > 0 || (sent == 0 && recv == 0), "{}: {} bytes of {} in no call", kTotalsWhat,
             sent + recv, collective_name(kind));
  }
  traffic.record_to_host(in.get<std::int64_t>());
  traffic.record_to_device(in.get<std::int64_t>());
  const auto steps = in.get<std::uint64_t>();
  for (std::uint64_t s = 0; s < steps; ++s) totals.steps.push_back(in.get<StepTimes>());
  in.expect_end();
  return totals;
}

std::string encode_file_entry(const FileEntry& entry) {
  Writer out;
  out.put_string(entry.name);
  out.put(entry.size_bytes);
  out.put_string(entry.sha256);
  return out.take();
}

FileEntry decode_file_entry(std::string_view bytes) {
  Reader in(bytes, kEntryWhat);
  FileEntry entry;
  entry.name = in.get_string();
  entry.size_bytes = in.get<std::uint64_t>();
  entry.sha256 = in.get_string();
  in.expect_end();
  return entry;
}

}  // namespace zl
