// lesson_support.hpp — the narration every lesson shares: the --step/--no-pause flags and pauses,
// engine events recorded per rank during a run, per-rank tables and bar charts of memory, the
// traffic comparison, and the two closing checks (ledgers vs estimate.hpp, run vs the reference).
// Nothing here shards or reduces: it reads and prints what the library reports.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/memory_ledger.hpp"
#include "run/train.hpp"

namespace zl::lessons {

/// The sizes a lesson lets the learner change, holding the lesson's defaults. A lesson offers the
/// flag of each field it sets and no other; after parsing each set field holds the value to use.
struct LessonSizes {
  std::optional<int> world = std::nullopt;  ///< --world: ranks W (N), from min_world up
  int min_world = 1;                        ///< the lowest --world the lesson accepts
  std::optional<int> stage = std::nullopt;  ///< --stage: ZeRO stage, from min_stage to 3
  int min_stage = 0;                        ///< the lowest --stage the lesson accepts
  /// --layers, --width, --in, --classes: the MLP's shape.
  std::optional<MlpConfig> mlp = std::nullopt;
  std::optional<std::int64_t> rows = std::nullopt;   ///< --rows: rows of each rank's micro-batch
  std::optional<std::int64_t> steps = std::nullopt;  ///< --steps: optimizer steps
  std::optional<std::uint64_t> seed = std::nullopt;  ///< --seed: parameter init and data
  /// --params: Ψ, the parameters of the estimated model.
  std::optional<std::int64_t> params = std::nullopt;
  /// Activation bytes per row of a lesson whose model has no size flags (0: too few to count);
  /// with --world and --rows it bounds how much memory the flags may ask for.
  std::int64_t row_bytes = 0;
};

/// What the command line asked for.
struct LessonFlags {
  bool step = false;     ///< wait for Enter between phases
  LessonSizes sizes;     ///< the lesson's sizes, as the flags set them
  bool defaults = true;  ///< no size flag changed a value: every size is the lesson's default
};

/// Parses --step, --no-pause (forces no pausing, wins over --step), --help (prints usage with the
/// offered sizes and their defaults, exits 0) and the size flags `defaults` offers; a bad value or
/// any other argument is one line on stderr and exit code 2. Then runs `lesson` and returns its
/// exit code; an exception (a zl::Error says what to do) becomes one line on stderr and exit 1.
int run_lesson(int argc, char** argv, std::string_view about, const LessonSizes& defaults,
               const std::function<int(const LessonFlags&)>& lesson);

/// `base` with the world, MLP shape, rows, steps and seed that `flags` holds (the fields the
/// lesson offers; the others stay as in `base`).
TrainConfig sized(TrainConfig base, const LessonFlags& flags);

/// With --step: says what comes next and waits for Enter on stdin. Without it: nothing.
void pause(const LessonFlags& flags, std::string_view next);

/// Prints a section title with a rule under it.
void heading(std::string_view title);

/// 124439808 -> "124,439,808".
std::string grouped(std::int64_t value);

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

/// Prints each rank's measured params, grads and optimizer bytes beside estimate.hpp's fp32
/// formula for the run's stage, with Ψ the padded element count; true when every number agrees.
bool check_model_states(const TrainConfig& config, const TrainResult& result);

/// Runs `config` with EngineKind::Reference and compares bit for bit with `result`. Prints
/// "matches the reference bit for bit" and returns true, or prints the first difference.
bool matches_reference(const TrainConfig& config, const TrainResult& result);

}  // namespace zl::lessons
