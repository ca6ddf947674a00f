// visit_gathers.cpp — the visits' gathers, in order, with the prefetch budget.
#include "engines/visit_gathers.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace zl {

VisitGathers::VisitGathers(const std::vector<int>& forward_order,
                           const std::vector<UnitLayout>& layout, std::vector<bool> kept_whole,
                           std::int64_t prefetch_elems, bool within_pass, Start start,
                           ReadAhead read_ahead)
    : visits_(forward_order),
      layout_(layout),
      kept_whole_(std::move(kept_whole)),
      prefetch_elems_(prefetch_elems),
      within_pass_(within_pass),
      start_(std::move(start)),
      read_ahead_(std::move(read_ahead)) {
  visits_.insert(visits_.end(), forward_order.rbegin(), forward_order.rend());
}

void VisitGathers::begin_micro_batch() {
  next_visit_ = 0;
  read_ahead_from(0);
}

UnitParams VisitGathers::next(int unit) {
  const std::size_t visit = next_visit_++;
  ZL_CHECK(visit < visits_.size() && visits_[visit] == unit,
           "visit {} of a micro-batch runs unit {}, not the forward order's", visit, unit);
  UnitParams params;
  if (!ahead_.empty() && ahead_.front().visit == visit) {
    ahead_.front().gather.flight.wait();  // with overlap_comm the gather ran meanwhile
    params.owned = std::move(ahead_.front().gather.params);
    ahead_.pop_front();
  } else {
    VisitGather now = start_(unit, visit >= visits_.size() / 2, /*ahead=*/false);
    now.flight.wait();
    params.owned = std::move(now.params);
  }
  params.view = view_of(params.owned);
  prefetch_after(visit);
  read_ahead_from(ahead_.empty() ? visit + 1 : ahead_.back().visit + 1);
  return params;
}

void VisitGathers::read_ahead_from(std::size_t first) {
  if (!read_ahead_) return;
  const std::size_t half = visits_.size() / 2;
  for (std::size_t next = first; next < visits_.size(); ++next) {
    const int u = visits_[next];
    if (kept_whole_[static_cast<std::size_t>(u)]) continue;
    if (!read_ahead_(u, next >= half)) return;
  }
}

void VisitGathers::prefetch_after(std::size_t visit) {
  std::int64_t budget_elems = prefetch_elems_;
  const std::size_t half = visits_.size() / 2;
  const std::size_t end = within_pass_ && visit < half ? half : visits_.size();
  for (std::size_t next = visit + 1; next < end; ++next) {
    const int u = visits_[next];
    if (kept_whole_[static_cast<std::size_t>(u)]) continue;
    budget_elems -= layout_[static_cast<std::size_t>(u)].padded_elems;
    if (budget_elems < 0) return;
    const bool have =
        std::ranges::any_of(ahead_, [next](const Ahead& ahead) { return ahead.visit == next; });
    if (!have) ahead_.push_back({next, start_(u, next >= half, /*ahead=*/true)});
  }
}

}  // namespace zl
