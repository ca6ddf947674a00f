// lesson_support.hpp — the narration every lesson shares (its flags: lesson_flags.hpp): pauses,
// engine events recorded per rank during a run, per-rank tables and bar charts of memory, the
// traffic comparison, and the two closing checks (ledgers vs estimate.hpp, run vs the reference).
// Nothing here shards or reduces: it reads and prints what the library reports.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/memory_ledger.hpp"
#include "lesson_flags.hpp"
#include "run/train.hpp"

namespace zl::lessons {

/// With --step: says what comes next and waits for Enter on stdin. Without it: nothing.
void pause(const LessonFlags& flags, std::string_view next);

/// Prints a section title with a rule under it.
void heading(std::string_view title);

/// 124439808 -> "124,439,808".
std::string grouped(std::int64_t value);

/// `text` with its spaces turned into line breaks so no line passes `width` columns (a word
/// longer than that stays whole); existing line breaks are kept.
std::string wrapped(std::string_view text, std::size_t width = 90);

/// Current bytes per category (indexed by MemCategory).
using CategoryBytes = std::array<std::int64_t, kMemCategoryCount>;

/// One engine event on one rank, with the rank's ledger at that moment.
struct Snapshot {
  std::string phase;
  int unit = -1;
  CategoryBytes bytes{};
};

/// Records every engine event of a run. train() calls the observer on each rank's own thread,
/// and each thread appends only to its own rank's vector, so no locking is needed.
class EventRecorder {
 public:
  explicit EventRecorder(int world);
  /// The observer to pass to train(); it refers to this recorder, which must outlive the run.
  RankObserver observer();
  /// Rank `rank`'s events in the last of `steps` steps (every step emits the same events).
  std::span<const Snapshot> last_step(int rank, std::int64_t steps) const;
  /// Every rank's bytes at event `index` of the last step.
  std::vector<CategoryBytes> at(std::size_t index, std::int64_t steps) const;
  int world() const { return static_cast<int>(per_rank_.size()); }

 private:
  std::vector<std::vector<Snapshot>> per_rank_;
};

/// Half-open range of events [begin, end) within one step.
struct EventRange {
  std::size_t begin = 0;
  std::size_t end = 0;
};

/// One past the last event named `phase` (0 if there is none).
std::size_t after_last(std::span<const Snapshot> events, std::string_view phase);

/// One stacked bar per rank, a glyph per category, with a legend. The bars are on the scale of
/// `full_bytes` or of the largest rank total, whichever is larger. Rows are labelled
/// "<row_label> <index>".
void print_bars(const std::vector<CategoryBytes>& per_rank, std::span<const MemCategory> categories,
                std::int64_t full_bytes = 0, std::string_view row_label = "rank");

/// `categories` with MemCategory::Master right after MemCategory::Optimizer when `config` trains in
/// mixed precision (the fp32 master is a ledger category of its own); as given in fp32.
std::vector<MemCategory> with_master(const TrainConfig& config,
                                     std::span<const MemCategory> categories);

/// A table of every rank's bytes per category (and their total), then print_bars.
void print_ranks(const std::vector<CategoryBytes>& per_rank,
                 std::span<const MemCategory> categories, std::int64_t full_bytes = 0);

/// Explains a phase ("forward", "all_reduce", ...) in a sentence or two.
using PhaseNotes = std::function<std::string_view(std::string_view phase)>;

/// One stop of the walk through a step: pauses (with --step), titles the range, prints `note`,
/// optionally lists the range's events on rank 0, then shows every rank after its last event.
/// An engine reports a reduce_scatter as it issues it, while the unit's full gradient is still
/// held; with `settled` the ranks are shown at the next event instead (the range's end: the
/// first event after the range), when the last buffer of the range has been freed.
void narrate(const LessonFlags& flags, const EventRecorder& recorder, std::int64_t steps,
             EventRange range, std::span<const MemCategory> categories, std::string_view note,
             bool event_rows = false, bool settled = false);

/// Prints the values a phase leaves on the ranks (lesson_values.hpp), after its note.
using PhaseValues = std::function<void(std::string_view phase)>;

/// narrate() for each run of one phase in the last step, with notes(phase) as the note, then
/// values(phase) when given. A stop whose bytes equal the previous stop's on every rank says so
/// in one line instead of repeating the table.
void narrate_phase_runs(const LessonFlags& flags, const EventRecorder& recorder, std::int64_t steps,
                        std::span<const MemCategory> categories, const PhaseNotes& notes,
                        const PhaseValues& values = {});

/// The model and its units as laid out for the run: numel, padded size and shard size, and Ψ.
void print_model(const TrainConfig& config, const TrainResult& result);

/// Every rank's bytes as the result's ledgers read them right after the last step.
std::vector<CategoryBytes> final_holdings(const TrainResult& result);

/// Bytes rank `rank` sent for model states: its measured total less the run's small bookkeeping
/// collectives — the logged loss average (sharding.hpp: one fp32 all_reduce per step) and, on
/// ZeRO stages, the gradient-norm partials (sharding.hpp: one fp64 per kNormBlockElems padded
/// elements, all-gathered once per step) — priced with the ledger's own ring_volume.
std::int64_t model_state_sent_bytes(const TrainConfig& config, const TrainResult& result, int rank);

/// One run in a traffic comparison.
struct TrafficRun {
  std::string name;
  const TrainConfig* config = nullptr;
  const TrainResult* result = nullptr;
};

/// Rank 0's sent bytes per collective for each run, the bookkeeping, and the model-state bytes.
void print_traffic(std::span<const TrafficRun> runs);

/// Rank 0's model-state bytes of a run and of DDP on the same config, side by side.
struct TrafficBeside {
  std::int64_t stage_bytes = 0;  ///< the run's (`name`)
  std::int64_t ddp_bytes = 0;    ///< DDP's
};

/// Trains DDP on `config`, prints its traffic beside the run's (`name`, `result`) with
/// print_traffic, and returns both runs' model-state bytes.
TrafficBeside traffic_beside_ddp(std::string_view name, const TrainConfig& config,
                                 const TrainResult& result);

/// Prints each rank's measured params, grads and optimizer bytes beside estimate.hpp's fp32
/// formula for the run's stage, with Ψ the padded element count; true when every number agrees.
bool check_model_states(const TrainConfig& config, const TrainResult& result);

/// Runs `config` with EngineKind::Reference and compares bit for bit with `result`. Prints
/// "matches the reference bit for bit" and returns true, or prints the first difference.
bool matches_reference(const TrainConfig& config, const TrainResult& result);

}  // namespace zl::lessons
