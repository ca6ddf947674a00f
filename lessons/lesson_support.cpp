// lesson_support.cpp — pauses, recorded events, tables, bars and the closing checks.
#include "lesson_support.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "engines/estimate.hpp"
#include "engines/sharding.hpp"
#include "optim/grad_norm.hpp"
#include "run/compare.hpp"

namespace zl::lessons {

namespace {

// The current bytes of every category of a ledger.
CategoryBytes current_bytes(const MemoryLedger& ledger) {
  CategoryBytes bytes{};
  for (int c = 0; c < kMemCategoryCount; ++c)
    bytes[c] = ledger.current_bytes(static_cast<MemCategory>(c));
  return bytes;
}

// "backward u2", or just the phase when the event has no unit.
std::string label(const Snapshot& event) {
  return event.unit < 0 ? event.phase : fmt::format("{} u{}", event.phase, event.unit);
}

// Runs of consecutive events with the same phase: forward u0..u2 is one run.
std::vector<EventRange> phase_runs(std::span<const Snapshot> events) {
  std::vector<EventRange> runs;
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (runs.empty() || events[i].phase != events[runs.back().begin].phase) runs.push_back({i, i});
    runs.back().end = i + 1;
  }
  return runs;
}

// "forward u0, u1, u2" or "backward u2, u1 + reduce_scatter u2, u1": the phases of a range in
// order of first appearance, each with its units.
std::string describe(std::span<const Snapshot> events, EventRange range) {
  std::vector<std::string> phases;
  std::vector<std::string> units;
  for (std::size_t i = range.begin; i < range.end; ++i) {
    const auto known = std::ranges::find(phases, events[i].phase);
    const auto at = static_cast<std::size_t>(known - phases.begin());
    if (known == phases.end()) {
      phases.push_back(events[i].phase);
      units.emplace_back();
    }
    if (events[i].unit >= 0)
      units[at] += fmt::format("{}u{}", units[at].empty() ? " " : ", ", events[i].unit);
  }
  std::string text;
  for (std::size_t p = 0; p < phases.size(); ++p)
    text += (p == 0 ? "" : " + ") + phases[p] + units[p];
  return text;
}

// Wide enough for the category's name and for byte counts.
std::size_t column_width(MemCategory category) {
  return std::max<std::size_t>(10, mem_category_name(category).size() + 2);
}

// A first column titled `first`, then one per category (and "total").
void print_header(std::string_view first, std::size_t first_width,
                  std::span<const MemCategory> categories, bool with_total) {
  fmt::print("{:<{}}", first, first_width);
  for (const auto c : categories) fmt::print("{:>{}}", mem_category_name(c), column_width(c));
  fmt::print("{}\n", with_total ? fmt::format("{:>10}", "total") : "");
}

// The glyph that stands for a category in the stacked bars, indexed by MemCategory.
constexpr std::array<std::string_view, kMemCategoryCount> kGlyphs = {"█", "▓", "▞", "▒", "▚", "▪",
                                                                     "░", "◆", "◇", "·", "◦", "▫",
                                                                     "▴", "▵"};

// Sum over the shown categories.
std::int64_t total_of(const CategoryBytes& bytes, std::span<const MemCategory> categories) {
  std::int64_t total = 0;
  for (const auto c : categories) total += bytes[static_cast<std::size_t>(c)];
  return total;
}

// One row per rank, one column per category, and the total of those columns.
void print_holdings(const std::vector<CategoryBytes>& per_rank,
                    std::span<const MemCategory> categories) {
  print_header("rank (bytes)", 12, categories, true);
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    fmt::print("{:>4}        ", r);
    std::int64_t total = 0;
    for (const auto c : categories) {
      const std::int64_t bytes = per_rank[r][static_cast<std::size_t>(c)];
      fmt::print("{:>{}}", bytes, column_width(c));
      total += bytes;
    }
    fmt::print("{:>10}\n", total);
  }
}

// One row per event of `range` on one rank, one column per category.
void print_event_rows(std::span<const Snapshot> events, EventRange range,
                      std::span<const MemCategory> categories) {
  print_header("event (bytes)", 20, categories, false);
  for (std::size_t i = range.begin; i < range.end; ++i) {
    fmt::print("{:<20}", label(events[i]));
    for (const auto c : categories)
      fmt::print("{:>{}}", events[i].bytes[static_cast<std::size_t>(c)], column_width(c));
    fmt::print("\n");
  }
}

}  // namespace

void pause(const LessonFlags& flags, std::string_view next) {
  if (!flags.step) return;
  fmt::print("\n[Enter] {} ", next);
  std::fflush(stdout);
  std::string line;
  std::getline(std::cin, line);  // at end of input this returns at once, so a lesson never hangs
}

void heading(std::string_view title) {
  // One dash per character: count UTF-8 lead bytes, not continuation bytes (10xxxxxx).
  const auto chars = std::ranges::count_if(
      title, [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
  fmt::print("\n{}\n{}\n", title, std::string(static_cast<std::size_t>(chars), '-'));
}

std::string grouped(std::int64_t value) {
  const std::string digits = std::to_string(value);
  const std::size_t sign = value < 0 ? 1 : 0;
  std::string text;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    const std::size_t left = digits.size() - i;  // digits from here to the end
    if (i > sign && left % 3 == 0) text.push_back(',');
    text.push_back(digits[i]);
  }
  return text;
}

std::string wrapped(std::string_view text, std::size_t width) {
  std::string out;
  std::size_t line = 0;  // columns on the current line (code points, as the terminal shows them)
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find_first_of(" \n", start), text.size());
    const std::string_view word = text.substr(start, end - start);
    const auto columns = static_cast<std::size_t>(std::ranges::count_if(
        word, [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
    if (line > 0 && line + 1 + columns > width) {
      out.push_back('\n');
      line = 0;
    } else if (line > 0) {
      out.push_back(' ');
      ++line;
    }
    out.append(word);
    line += columns;
    if (end < text.size() && text[end] == '\n') {
      out.push_back('\n');
      line = 0;
    }
    start = end + 1;
  }
  return out;
}

EventRecorder::EventRecorder(int world) : per_rank_(static_cast<std::size_t>(world)) {}

RankObserver EventRecorder::observer() {
  return [this](int rank, const EngineEvent& event, const MemoryLedger& ledger) {
    per_rank_[static_cast<std::size_t>(rank)].push_back(
        {std::string(event.phase), event.unit, current_bytes(ledger)});
  };
}

std::span<const Snapshot> EventRecorder::last_step(int rank, std::int64_t steps) const {
  const auto& events = per_rank_.at(static_cast<std::size_t>(rank));
  const auto per_step = events.size() / static_cast<std::size_t>(steps);
  ZL_CHECK(per_step * static_cast<std::size_t>(steps) == events.size(),
           "rank {} recorded {} events over {} steps: every step should emit the same events", rank,
           events.size(), steps);
  return std::span(events).last(per_step);
}

std::vector<CategoryBytes> EventRecorder::at(std::size_t index, std::int64_t steps) const {
  std::vector<CategoryBytes> per_rank;
  for (int r = 0; r < world(); ++r) per_rank.push_back(last_step(r, steps)[index].bytes);
  return per_rank;
}

std::size_t after_last(std::span<const Snapshot> events, std::string_view phase) {
  for (std::size_t i = events.size(); i > 0; --i) {
    if (events[i - 1].phase == phase) return i;
  }
  return 0;
}

void print_bars(const std::vector<CategoryBytes>& per_rank, std::span<const MemCategory> categories,
                std::int64_t full_bytes, std::string_view row_label) {
  constexpr std::int64_t kCells = 48;
  for (const auto& bytes : per_rank) full_bytes = std::max(full_bytes, total_of(bytes, categories));
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    std::string line;
    for (const auto c : categories) {
      const std::int64_t bytes = per_rank[r][static_cast<std::size_t>(c)];
      // Round to cells, but never hide a category that holds something.
      const std::int64_t cells =
          bytes == 0 ? 0
                     : std::max<std::int64_t>(1, (bytes * kCells + full_bytes / 2) / full_bytes);
      for (std::int64_t i = 0; i < cells; ++i) line += kGlyphs[static_cast<std::size_t>(c)];
    }
    fmt::print("{} {}  {} {}\n", row_label, r, line, grouped(total_of(per_rank[r], categories)));
  }
  std::string legend;
  for (const auto c : categories)
    legend += fmt::format("  {} {}", kGlyphs[static_cast<std::size_t>(c)], mem_category_name(c));
  fmt::print("legend:{}\n", legend);
}

void print_ranks(const std::vector<CategoryBytes>& per_rank,
                 std::span<const MemCategory> categories, std::int64_t full_bytes) {
  print_holdings(per_rank, categories);
  fmt::print("\n");
  print_bars(per_rank, categories, full_bytes);
}

void narrate(const LessonFlags& flags, const EventRecorder& recorder, std::int64_t steps,
             EventRange range, std::span<const MemCategory> categories, std::string_view note,
             bool event_rows, bool settled) {
  const auto events = recorder.last_step(0, steps);
  ZL_CHECK(range.begin < range.end && range.end + (settled ? 1 : 0) <= events.size(),
           "no engine events in [{}, {}) of a step of {}: did the engine's events change?",
           range.begin, range.end, events.size());
  const std::size_t shown = settled ? range.end : range.end - 1;
  const std::string title = describe(events, range);
  pause(flags, "for " + title);
  heading(title);
  fmt::print("{}\n\n", note);
  if (event_rows) {
    print_event_rows(events, range, categories);
    if (settled) {
      fmt::print(
          "\nA reduce_scatter row is the moment it is issued: the unit's full gradient is\n"
          "freed right after. Every rank once it is, as {} begins:\n",
          label(events[shown]));
    } else {
      fmt::print("\nevery rank after {}:\n", label(events[shown]));
    }
  }
  // One scale for the whole step, so bars of different phases can be compared.
  std::int64_t full_bytes = 0;
  for (int r = 0; r < recorder.world(); ++r) {
    for (const auto& event : recorder.last_step(r, steps))
      full_bytes = std::max(full_bytes, total_of(event.bytes, categories));
  }
  print_ranks(recorder.at(shown, steps), categories, full_bytes);
}

void narrate_phase_runs(const LessonFlags& flags, const EventRecorder& recorder, std::int64_t steps,
                        std::span<const MemCategory> categories, const PhaseNotes& notes,
                        const PhaseValues& values) {
  const auto events = recorder.last_step(0, steps);
  const auto runs = phase_runs(events);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const EventRange range = runs[i];
    const std::string_view phase = events[range.begin].phase;
    const bool unchanged =
        i > 0 && recorder.at(range.end - 1, steps) == recorder.at(runs[i - 1].end - 1, steps);
    if (!unchanged) {
      narrate(flags, recorder, steps, range, categories, notes(phase));
    } else {
      const std::string title = describe(events, range);
      pause(flags, "for " + title);
      heading(title);
      fmt::print("{}\n\nBytes: every rank holds exactly what it held after {}.\n", notes(phase),
                 label(events[runs[i - 1].end - 1]));
    }
    if (values) {
      fmt::print("\n");
      values(phase);
    }
  }
}

std::vector<MemCategory> with_master(const TrainConfig& config,
                                     std::span<const MemCategory> categories) {
  std::vector<MemCategory> out;
  for (const MemCategory category : categories) {
    out.push_back(category);
    if (category == MemCategory::Optimizer && config.features.precision != DType::F32) {
      out.push_back(MemCategory::Master);
    }
  }
  return out;
}

void print_model(const TrainConfig& config, const TrainResult& result) {
  const MlpConfig& mlp = config.mlp;
  std::string shape = fmt::format("{}", mlp.in);
  for (int i = 1; i < mlp.layers; ++i) shape += fmt::format(" -> {}", mlp.width);
  fmt::print(
      "model: MLP {} -> {} ({} Linear layers, one unit each), {} ranks, {} rows per rank, "
      "{} steps\n\n",
      shape, mlp.classes, mlp.layers, config.world, config.micro_batch, config.steps);
  fmt::print("{:<12}{:>10}{:>10}{:>10}\n", "unit", "numel", "padded", "shard");
  for (const auto& unit : result.layout) {
    fmt::print("{:<12}{:>10}{:>10}{:>10}\n", unit.name, unit.numel, unit.padded_elems,
               unit.shard_elems);
  }
  fmt::print("Ψ = {} parameters, {} with each unit padded to a multiple of W·{} = {}\n",
             grouped(total_numel(result.layout)), grouped(total_padded_elems(result.layout)),
             kNormBlockElems, config.world * kNormBlockElems);
  const DType precision = config.features.precision;
  fmt::print("{}\n",
             wrapped(precision == DType::F32
                         ? "Trained in fp32: 4 + 4 + 8 bytes per parameter (parameters, gradients, "
                           "Adam's m and v; no master copy). Lesson 00, the real-scale tables and "
                           "most articles count mixed precision's 2 + 2 + 12 (a 16-bit parameter "
                           "and gradient, an fp32 master, m and v): the same 16 bytes, split "
                           "differently (--bf16 trains that way)."
                         : fmt::format("Trained in {} with an fp32 master (mixed precision): "
                                       "2 + 2 + 12 bytes per parameter (a {} parameter and "
                                       "gradient, then an fp32 master, m and v in the master "
                                       "and optimizer columns), the split of lesson 00 and the "
                                       "real-scale tables. Without --bf16: fp32's 4 + 4 + 8.",
                                       dtype_name(precision), dtype_name(precision))));
}

std::vector<CategoryBytes> final_holdings(const TrainResult& result) {
  std::vector<CategoryBytes> per_rank;
  for (const auto& rank : result.ranks) per_rank.push_back(current_bytes(rank.memory));
  return per_rank;
}

std::int64_t model_state_sent_bytes(const TrainConfig& config, const TrainResult& result,
                                    int rank) {
  const int world = config.world;
  const auto f32_bytes = static_cast<std::int64_t>(dtype_bytes(DType::F32));
  const auto f64_bytes = static_cast<std::int64_t>(dtype_bytes(DType::F64));
  std::int64_t bookkeeping =
      ring_volume(CollectiveKind::AllReduce, 1, f32_bytes, rank, world).sent_bytes;
  if (config.engine != EngineKind::Ddp) {
    const std::int64_t sums = norm_sums_per_rank(result.layout, world) * world;  // all ranks'
    bookkeeping += ring_volume(CollectiveKind::AllGather, sums, f64_bytes, rank, world).sent_bytes;
  }
  return result.ranks.at(static_cast<std::size_t>(rank)).traffic.sent_bytes() -
         config.steps * bookkeeping;
}

void print_traffic(std::span<const TrafficRun> runs) {
  fmt::print("{:<30}", "rank 0 sent (bytes)");
  for (const auto& run : runs) fmt::print("{:>14}", run.name);
  fmt::print("\n");
  for (const auto kind :
       {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter, CollectiveKind::AllGather}) {
    fmt::print("  {:<28}", collective_name(kind));
    for (const auto& run : runs)
      fmt::print("{:>14}", run.result->ranks[0].traffic.sent_bytes(kind));
    fmt::print("\n");
  }
  fmt::print("  {:<28}", "total");
  for (const auto& run : runs) fmt::print("{:>14}", run.result->ranks[0].traffic.sent_bytes());
  fmt::print("\n  {:<28}", "less loss/norm bookkeeping");
  for (const auto& run : runs) {
    fmt::print("{:>14}", model_state_sent_bytes(*run.config, *run.result, 0) -
                             run.result->ranks[0].traffic.sent_bytes());
  }
  fmt::print("\n  {:<28}", "model states");
  for (const auto& run : runs)
    fmt::print("{:>14}", model_state_sent_bytes(*run.config, *run.result, 0));
  fmt::print("\n");
}

TrafficBeside traffic_beside_ddp(std::string_view name, const TrainConfig& config,
                                 const TrainResult& result) {
  TrainConfig ddp_config = config;
  ddp_config.engine = EngineKind::Ddp;
  const TrainResult ddp = train(ddp_config);
  const std::array runs = {TrafficRun{"DDP", &ddp_config, &ddp},
                           TrafficRun{std::string(name), &config, &result}};
  print_traffic(runs);
  return {.stage_bytes = model_state_sent_bytes(config, result, 0),
          .ddp_bytes = model_state_sent_bytes(ddp_config, ddp, 0)};
}

bool check_model_states(const TrainConfig& config, const TrainResult& result) {
  const int stage = stage_of(config.engine);
  const StateDtype dtype =
      config.features.precision == DType::F32 ? StateDtype::Fp32 : StateDtype::Mixed;
  const EstimateConfig estimate_config{
      .params = total_padded_elems(result.layout),
      .world = config.world,
      .dtype = dtype,
      .optimizer_bytes_per_param = default_optimizer_bytes_per_param(dtype)};
  const StageEstimate estimate = estimate_stage(estimate_config, stage);
  fmt::print("estimate.hpp, stage {} in {}: {} with Ψ = {} padded elements, N = {}\n", stage,
             dtype_name(dtype), estimate.formula, grouped(estimate_config.params), config.world);
  // The optimizer term counts Adam's moments and, under mixed precision, the fp32 master copy.
  fmt::print("{:<14}{:>12}{:>12}{:>12}\n", "", "params", "grads",
             dtype == StateDtype::Mixed ? "master+opt" : "optimizer");
  fmt::print("{:<14}{:>12}{:>12}{:>12}\n", "estimate", estimate.params_bytes, estimate.grads_bytes,
             estimate.optimizer_bytes);
  bool all_equal = true;
  for (const auto& rank : result.ranks) {
    const MemoryLedger& ledger = rank.memory;
    const std::int64_t optimizer =
        ledger.current_bytes(MemCategory::Optimizer) + ledger.current_bytes(MemCategory::Master);
    const bool equal = ledger.current_bytes(MemCategory::Params) == estimate.params_bytes &&
                       ledger.current_bytes(MemCategory::Grads) == estimate.grads_bytes &&
                       optimizer == estimate.optimizer_bytes;
    fmt::print("{:<14}{:>12}{:>12}{:>12}  {}\n", fmt::format("rank {} ledger", rank.rank),
               ledger.current_bytes(MemCategory::Params), ledger.current_bytes(MemCategory::Grads),
               optimizer, equal ? "= estimate" : "DIFFERS from the estimate");
    all_equal = all_equal && equal;
  }
  return all_equal;
}

bool matches_reference(const TrainConfig& config, const TrainResult& result) {
  TrainConfig reference = config;
  reference.engine = EngineKind::Reference;
  const auto difference = first_difference(result, train(reference));
  const std::string run =
      fmt::format("{} on {} ranks over {} steps", engine_label(config), config.world, config.steps);
  if (difference) {
    fmt::print("{} does NOT match the reference: {}\n", run, *difference);
    return false;
  }
  fmt::print(
      "{} matches the reference bit for bit (parameters, Adam moments, every loss and "
      "gradient norm)\n",
      run);
  return true;
}

}  // namespace zl::lessons
