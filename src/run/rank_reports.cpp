// rank_reports.cpp — RankTotals and RankFile to bytes and back: fixed-size numbers copied in
// order, strings as a length and their characters.
#include "run/rank_reports.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <numeric>
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

using CategoryBytes = std::array<std::int64_t, kMemCategoryCount>;
using KindBytes = std::array<std::int64_t, kActivationKindCount>;

// What a ledger's totals are made of, as sent: bytes per category and per activation kind.
struct LedgerTotals {
  CategoryBytes current{}, peak{};
  std::int64_t total_peak = 0, device_peak = 0, host_peak = 0;
  KindBytes activations{}, activations_at_peak{};
};

// Books `bytes` under `category`, or releases them; activations are split over the kinds of
// `kinds` in kind order, each kind at most its bytes there.
void book_split(MemoryLedger& ledger, MemCategory category, std::int64_t bytes,
                const KindBytes& kinds, bool release) {
  if (category != MemCategory::Activations) {
    release ? ledger.release(category, bytes) : ledger.book(category, bytes);
    return;
  }
  for (int k = 0; k < kActivationKindCount; ++k) {
    const std::int64_t share = std::min(bytes, kinds[k]);
    const auto kind = static_cast<ActivationKind>(k);
    release ? ledger.release(category, share, kind) : ledger.book(category, share, kind);
    bytes -= share;
  }
  ZL_CHECK(bytes == 0, "{}: activation kinds add up to less than their category", kTotalsWhat);
}

MemCategory category_of(int c) {
  return static_cast<MemCategory>(c);
}

// Books `bytes` over the host categories (`host`) or the device ones, each at most its peak,
// filled in category order; returns what each category got.
CategoryBytes fill_side(MemoryLedger& ledger, const LedgerTotals& sent, bool host,
                        std::int64_t bytes) {
  CategoryBytes booked{};
  for (int c = 0; c < kMemCategoryCount; ++c) {
    if (is_host(category_of(c)) != host) continue;
    booked[c] = std::min(sent.peak[c], bytes);
    bytes -= booked[c];
    book_split(ledger, category_of(c), booked[c], sent.activations_at_peak, false);
  }
  ZL_CHECK(bytes == 0, "{}: a {} peak is above its categories' peaks", kTotalsWhat,
           host ? "host" : "device");
  return booked;
}

void release_all(MemoryLedger& ledger, const LedgerTotals& sent, const CategoryBytes& booked) {
  for (int c = 0; c < kMemCategoryCount; ++c) {
    book_split(ledger, category_of(c), booked[c], sent.activations_at_peak, true);
  }
}

// A ledger with the totals of `sent`. First the total peak is reached, with as much of it on the
// device as the device peak allows and the rest on the host (the split at the real moment fits
// both peaks, so this one does too), each category at most its peak, and released; then the
// device peak and the host peak alone, and released; then each category reaches its peak alone
// (never more than its side's peak) and is released; last each category's current bytes are
// booked. Activations are booked by kind as they were at their peak, so the peak's breakdown is
// rebuilt too, and the current ones by kind.
MemoryLedger rebuild_ledger(const LedgerTotals& sent) {
  const auto activations = static_cast<std::size_t>(MemCategory::Activations);
  ZL_CHECK(std::accumulate(sent.activations.begin(), sent.activations.end(), std::int64_t{0}) ==
                   sent.current[activations] &&
               std::accumulate(sent.activations_at_peak.begin(), sent.activations_at_peak.end(),
                               std::int64_t{0}) == sent.peak[activations],
           "{}: the activation kinds do not add up to the activations' bytes", kTotalsWhat);
  const std::int64_t device_part = std::min(sent.device_peak, sent.total_peak);
  ZL_CHECK(sent.total_peak - device_part <= sent.host_peak,
           "{}: a total peak of {} bytes is above the device peak {} and the host peak {}",
           kTotalsWhat, sent.total_peak, sent.device_peak, sent.host_peak);
  MemoryLedger ledger;
  CategoryBytes at_total_peak = fill_side(ledger, sent, false, device_part);
  const CategoryBytes host_share = fill_side(ledger, sent, true, sent.total_peak - device_part);
  for (int c = 0; c < kMemCategoryCount; ++c) at_total_peak[c] += host_share[c];
  release_all(ledger, sent, at_total_peak);
  release_all(ledger, sent, fill_side(ledger, sent, false, sent.device_peak));
  release_all(ledger, sent, fill_side(ledger, sent, true, sent.host_peak));
  for (int c = 0; c < kMemCategoryCount; ++c) {
    book_split(ledger, category_of(c), sent.peak[c], sent.activations_at_peak, false);
    book_split(ledger, category_of(c), sent.peak[c], sent.activations_at_peak, true);
  }
  for (int c = 0; c < kMemCategoryCount; ++c) {
    book_split(ledger, category_of(c), sent.current[c], sent.activations, false);
  }
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
  out.put(memory.device_peak_bytes());
  out.put(memory.host_peak_bytes());
  for (int k = 0; k < kActivationKindCount; ++k) {
    out.put(memory.activation_bytes(static_cast<ActivationKind>(k)));
    out.put(memory.activation_bytes_at_peak(static_cast<ActivationKind>(k)));
  }
  const TrafficLedger& traffic = totals.report.traffic;
  for (int k = 0; k < kCollectiveKindCount; ++k) {
    const auto kind = static_cast<CollectiveKind>(k);
    out.put(traffic.sent_bytes(kind));
    out.put(traffic.recv_bytes(kind));
    out.put(traffic.calls(kind));
  }
  for (int l = 0; l < kLinkLevelCount; ++l) out.put(traffic.sent_bytes(static_cast<LinkLevel>(l)));
  out.put(traffic.to_host_bytes());
  out.put(traffic.to_device_bytes());
  for (const DiskIo direction : {DiskIo::Read, DiskIo::Write}) {
    out.put(traffic.disk_bytes(direction));
    out.put(traffic.disk_ms(direction));
  }
  out.put(static_cast<std::uint64_t>(totals.steps.size()));
  for (const StepTimes& step : totals.steps) out.put(step);
  return out.take();
}

RankTotals decode_rank_totals(std::string_view bytes) {
  Reader in(bytes, kTotalsWhat);
  RankTotals totals;
  totals.report.rank = in.get<std::int32_t>();
  LedgerTotals sent;
  for (int c = 0; c < kMemCategoryCount; ++c) {
    sent.current[c] = in.get<std::int64_t>();
    sent.peak[c] = in.get<std::int64_t>();
  }
  sent.total_peak = in.get<std::int64_t>();
  sent.device_peak = in.get<std::int64_t>();
  sent.host_peak = in.get<std::int64_t>();
  for (int k = 0; k < kActivationKindCount; ++k) {
    sent.activations[k] = in.get<std::int64_t>();
    sent.activations_at_peak[k] = in.get<std::int64_t>();
  }
  totals.report.memory = rebuild_ledger(sent);
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
  for (int l = 0; l < kLinkLevelCount; ++l) {
    traffic.record_level(static_cast<LinkLevel>(l), in.get<std::int64_t>());
  }
  traffic.record_to_host(in.get<std::int64_t>());
  traffic.record_to_device(in.get<std::int64_t>());
  for (const DiskIo direction : {DiskIo::Read, DiskIo::Write}) {
    const auto bytes = in.get<std::int64_t>();
    traffic.record_disk(direction, bytes, in.get<double>());
  }
  const auto steps = in.get<std::uint64_t>();
  for (std::uint64_t s = 0; s < steps; ++s) totals.steps.push_back(in.get<StepTimes>());
  in.expect_end();
  return totals;
}

std::string encode_rank_file(const RankFile& file) {
  Writer out;
  out.put_string(file.entry.name);
  out.put(file.entry.size_bytes);
  out.put_string(file.entry.sha256);
  out.put_string(file.error);
  return out.take();
}

RankFile decode_rank_file(std::string_view bytes) {
  Reader in(bytes, kEntryWhat);
  RankFile file;
  file.entry.name = in.get_string();
  file.entry.size_bytes = in.get<std::uint64_t>();
  file.entry.sha256 = in.get_string();
  file.error = in.get_string();
  in.expect_end();
  return file;
}

}  // namespace zl
