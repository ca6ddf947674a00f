// 05_overlap.cpp — what a collective costs (a ring all-reduce stepped through, algbw and busbw)
// and hiding it behind computation. Each stage runs with and without
// overlap_comm on 4 simulated ranks; the timelines are then replayed with a fixed compute model
// (FLOPs at a fixed rate, so the lesson's numbers never vary) and the collectives priced on a
// 400 Gb/s InfiniBand link, and drawn side by side: compute on one row, comm on the other.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <string>

#include "comm/traffic_ledger.hpp"
#include "lesson_scale.hpp"
#include "lesson_support.hpp"
#include "run/compare.hpp"
#include "timeline.hpp"

using namespace zl;
using namespace zl::lessons;

namespace {

constexpr std::string_view kIdea =
    "A rank computes on one stream and communicates on another. A blocking collective stops\n"
    "the compute stream until it is done: that wait is 'exposed' communication. With overlap_comm\n"
    "the engines start each unit's gradient reduction as soon as the unit's backward is done and\n"
    "keep computing the units below; ZeRO-1 and ZeRO-2 wait for each unit's parameter all-gather\n"
    "only when the next forward reaches it. The results are the same bits either way.";
constexpr std::string_view kModel =
    "Compute here is modelled, not measured: forward of a Linear layer is 2*B*in*out FLOPs,\n"
    "backward twice that, at 1 TFLOP/s; everything else costs nothing. Comm is alpha + bytes /\n"
    "bus bandwidth on ib-400g. The call sequence is the engines' own, recorded from real runs.";

constexpr std::string_view kGap =
    "What ZeRO-1 still exposes: the reduce-scatter of the first unit, which backward finishes\n"
    "last; the gradient norm, which needs every shard's partials before the update; and the\n"
    "first unit's all-gather, which the next forward needs before it can start. The logged\n"
    "loss is averaged right after backward, ahead of the all-gathers on the one comm stream.";

constexpr std::string_view kBandwidth =
    "How fast is a collective? nccl-tests reports two rates for an all-reduce of S bytes that\n"
    "took t seconds. algbw = S / t, the rate the buffer is reduced at. busbw = algbw x 2(N-1)/N,\n"
    "the rate each rank's link carried: in the ring above each rank sent 2(N-1) chunks of S/N,\n"
    "2S(N-1)/N bytes, in time t. busbw hardly changes with N, so it is what a link is rated\n"
    "by; the links here (ib-400g: 45 GB/s) are busbw. A reduce-scatter or an all-gather is one\n"
    "half of the ring, S(N-1)/N per rank. So per step, with Ψ parameters:\n"
    "  DDP       all_reduce of the gradients               2Ψ(N-1)/N\n"
    "  ZeRO-1/2  reduce_scatter of the gradients, then\n"
    "            all_gather of the parameters              Ψ(N-1)/N + Ψ(N-1)/N = 2Ψ(N-1)/N\n"
    "  ZeRO-3    all_gather in forward, again in backward,\n"
    "            reduce_scatter of the gradients           3Ψ(N-1)/N, 1.5x DDP\n"
    "and the lesson prices each call at alpha + those bytes / busbw.";

constexpr double kFlopsPerMs = 1e9;  // 1 TFLOP/s
// "Close to DDP": ZeRO-1 with overlap within 10% of DDP's step time (DDP overlapping too).
constexpr double kCloseToDdp = 1.10;

struct Run {
  std::string name;
  EngineKind engine;
  bool overlap;
  StepTimes last_step;
  std::vector<TimelineEvent> events;  // rank 0's, last step
  TrainConfig config;                 // as it ran
  TrainResult result;                 // its parameters, moments and losses
};

// The modelled duration of a compute span, from its label ("forward 2", "backward 0", ...).
double modelled_ms(const std::string& label, const MlpConfig& mlp, std::int64_t rows) {
  const auto space = label.find(' ');
  if (space == std::string::npos) return 0.0;
  const std::string phase = label.substr(0, space);
  int unit = 0;
  std::from_chars(label.data() + space + 1, label.data() + label.size(), unit);
  const std::int64_t in = unit == 0 ? mlp.in : mlp.width;
  const std::int64_t out = unit == mlp.layers - 1 ? mlp.classes : mlp.width;
  const double forward_flops = 2.0 * static_cast<double>(rows * in * out);
  if (phase == "forward") return forward_flops / kFlopsPerMs;
  if (phase == "backward") return 2.0 * forward_flops / kFlopsPerMs;
  return 0.0;
}

Run run(const TrainConfig& base, std::string name, EngineKind engine, bool overlap) {
  TrainConfig config = base;
  config.engine = engine;
  config.features.overlap_comm = overlap;
  // ZeRO-3 overlaps its gathers by prefetching the next unit while the current one computes.
  if (engine == EngineKind::Zero3 && overlap) config.features.prefetch_bucket_elems = 10'000'000;
  config.record_timeline = true;
  const TrainResult result = train(config);
  std::vector<std::vector<TimelineOp>> programs;
  for (const auto& timeline : result.timelines) {
    std::vector<TimelineOp> program = timeline.program;
    for (TimelineOp& op : program) {
      if (op.kind == TimelineOp::Kind::Compute) {
        op.compute_ms = modelled_ms(op.label, config.mlp, config.micro_batch);
      }
    }
    programs.push_back(std::move(program));
  }
  const auto replayed =
      replay(programs, config.link, config.host_link, config.disk_link, config.world,
             /*record_events=*/true);
  Run out{std::move(name), engine, overlap, replayed[0].steps.back(), {}, config, result};
  for (const auto& event : replayed[0].events) {
    if (event.step == out.last_step.step) out.events.push_back(event);
  }
  return out;
}

// The ring all-reduce the collectives are priced as, on `world` ranks with one small number per
// chunk: N-1 reduce-scatter steps (each rank passes one chunk on; the next adds its own), then
// N-1 all-gather steps (the reduced chunks go round). Returns the chunks each rank sent.
std::int64_t walk_ring(int world) {
  const auto n = static_cast<std::size_t>(world);
  std::vector<std::vector<int>> chunks(n, std::vector<int>(n));
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t c = 0; c < n; ++c) chunks[r][c] = static_cast<int>(r + 1 + 10 * c);
  }
  const auto print = [&](const std::string& title) {
    fmt::print("{}\n{:<8}", title, "");
    for (std::size_t c = 0; c < n; ++c) fmt::print("{:>9}", fmt::format("chunk {}", c));
    fmt::print("\n");
    for (std::size_t r = 0; r < n; ++r) {
      fmt::print("rank {:<3}", r);
      for (const int value : chunks[r]) fmt::print("{:>9}", value);
      fmt::print("\n");
    }
  };
  print("Each rank's buffer, cut into N chunks:");
  std::int64_t sent = 0;
  for (std::size_t step = 0; step + 1 < 2 * n - 1; ++step) {
    const bool reduce = step + 1 < n;
    std::string moves;
    auto next = chunks;
    for (std::size_t r = 0; r < n; ++r) {
      // Reduce-scatter step s: rank r sends chunk (r - s) mod N; all-gather step s: (r + 1 - s).
      const std::size_t s = reduce ? step : step - (n - 1);
      const std::size_t c = (r + n - s % n + (reduce ? 0 : 1)) % n;
      const std::size_t to = (r + 1) % n;
      next[to][c] = reduce ? next[to][c] + chunks[r][c] : chunks[r][c];
      moves += fmt::format("{}r{}->r{} c{}", r == 0 ? "" : ", ", r, to, c);
      ++sent;
    }
    chunks = next;
    fmt::print("\n");
    print(fmt::format(
        "step {} of {} ({}): {}", step + 1, 2 * (n - 1),
        reduce ? "reduce-scatter, the receiver adds" : "all-gather, the receiver copies", moves));
  }
  return sent / world;
}

// The ring walk on the lesson's world (4 ranks when it has more than 8, which would not fit a
// screen), and its check: the chunks each rank sent are the traffic ledger's all_reduce volume,
// 2(N-1)/N of the buffer. One rank has no ring, and the ledger says it sends nothing.
bool show_ring(int world) {
  if (world == 1) {
    const std::int64_t ledger_bytes = ring_volume(CollectiveKind::AllReduce, 1, 4, 0, 1).sent_bytes;
    fmt::print(
        "A ring all-reduce on 1 rank: there is no ring. The rank's buffer is already the sum over\n"
        "all ranks, so it sends nothing, 2(N-1)/N = 0 of the buffer.\n"
        "{}: the traffic ledger's all_reduce volume on one rank is {} bytes\n",
        ledger_bytes == 0 ? "ok" : "MISMATCH", ledger_bytes);
    return ledger_bytes == 0;
  }
  const int n = world <= 8 ? world : 4;
  fmt::print(
      "{}\n\n",
      wrapped(fmt::format(
          "A ring all-reduce on {} ranks{}, one number per chunk (rank r's chunk c starts as "
          "r+1+10c): each rank only ever talks to the next one, and sends one chunk per step.",
          n,
          n == world
              ? ""
              : fmt::format(" ({} would not fit the screen; the ring is the same)", world))));
  const std::int64_t chunks_sent = walk_ring(n);
  const std::int64_t ledger_bytes = ring_volume(CollectiveKind::AllReduce, n, 4, 0, n).sent_bytes;
  const bool ok = chunks_sent * 4 == ledger_bytes;
  fmt::print(
      "\nAfter N-1 = {} reduce-scatter steps each rank held one chunk summed over all ranks; "
      "after\n"
      "N-1 more every rank holds all of them (an average divides by N at the end).\n"
      "{}: each rank sent {} chunks of S/N, 2(N-1)/N of the buffer: {} bytes of a {}-byte buffer,\n"
      "the traffic ledger's all_reduce volume\n",
      n - 1, ok ? "ok" : "MISMATCH", chunks_sent, chunks_sent * 4, n * 4);
  return ok;
}

// A time axis under the timelines: a tick every 16 cells, labelled in ms.
void draw_axis(double span_ms, int width) {
  constexpr int kTick = 16;
  std::string ticks(static_cast<std::size_t>(width), '-');
  std::string labels;
  for (int x = 0; x < width; x += kTick) {
    ticks[static_cast<std::size_t>(x)] = '|';
    labels += fmt::format("{:<{}}", fmt::format("{:.3f}", span_ms * x / width), kTick);
  }
  fmt::print("{:<22} ms      {}\n{:<31}{}({:.3f} ms at the right edge)\n", "", ticks, "", labels,
             span_ms);
}

// One row per stream: '#' computing, '=' communicating, scaled so `span_ms` fills `width`.
void draw(const Run& run, double span_ms, int width) {
  std::string compute(static_cast<std::size_t>(width), '.');
  std::string comm(static_cast<std::size_t>(width), '.');
  const double start = run.last_step.start_ms;
  for (const auto& event : run.events) {
    if (event.dur_ms <= 0.0) continue;
    const bool is_comm = event.stream == Stream::Comm;
    if (!is_comm && event.call.number != 0) continue;  // waits leave the compute row empty
    std::string& row = is_comm ? comm : compute;
    const auto from = static_cast<int>((event.start_ms - start) / span_ms * width);
    const auto to = static_cast<int>((event.start_ms + event.dur_ms - start) / span_ms * width);
    for (int x = std::max(0, from); x <= std::min(width - 1, to); ++x) {
      row[static_cast<std::size_t>(x)] = is_comm ? '=' : '#';
    }
  }
  fmt::print("{:<22} compute {}\n{:<22} comm    {}\n", run.name, compute, "", comm);
}

// Each rank's bytes sent per step at real scale, bf16, and their time on `link` at its bus
// bandwidth: what overlap has to hide.
void print_real_traffic(const LinkPreset& link) {
  fmt::print(
      "Each rank sends 2Ψ(N-1)/N elements per step under DDP, ZeRO-1 and ZeRO-2 and 3Ψ(N-1)/N\n"
      "under ZeRO-3, 2 bytes each in bf16; at {}'s bus bandwidth of {} GB/s that takes:\n\n",
      link.name, link.busbw_gbps);
  fmt::print("{:<13}{:>5}{:>16}{:>12}{:>16}{:>12}\n", "model", "W", "DDP-ZeRO-2 GB", "ms",
             "ZeRO-3 GB", "ms");
  for (const RealModel& model : real_models()) {
    for (const int world : kRealWorlds) {
      const StateElems elems = real_elems(model, world);
      const double ring = static_cast<double>(elems.replica_elems) * (world - 1) / world * 2.0;
      const double two = 2.0 * ring;
      const double three = 3.0 * ring;
      fmt::print("{:<13}{:>5}{:>16.2f}{:>12.1f}{:>16.2f}{:>12.1f}\n", model.name, world, two / 1e9,
                 two / (link.busbw_gbps * 1e6), three / 1e9, three / (link.busbw_gbps * 1e6));
    }
  }
  fmt::print(
      "\nA step's computation has to last that long for overlap to hide all of it; ZeRO-3's\n"
      "bytes are 1.5x the others' at every size, as lesson 04 measured.\n");
}

// One unit's gradients of `elems` bf16 elements on `world` ranks and `link`, swept over sizes:
// DDP's one all-reduce against ZeRO-1's reduce-scatter plus all-gather, each call priced as the
// simulator prices it (alpha + wire bytes / busbw). Two calls pay alpha twice for the same bytes,
// which matters only while alpha is a large share. Returns false when a price breaks the rule.
bool print_alpha_beta_sweep(const LinkPreset& link, int world) {
  if (world == 1) return true;
  fmt::print("\n{}\n\n",
             wrapped(fmt::format(
                 "Why two collectives of half the bytes can cost more than one: each call costs "
                 "alpha + bytes / busbw ({} us and {} GB/s on {}). One unit of Ψ bf16 gradients on "
                 "{} ranks:",
                 link.alpha_us, link.busbw_gbps, link.name, world)));
  fmt::print("{:>15}{:>16}{:>26}{:>8}{:>14}\n", "Ψ", "DDP all_reduce", "ZeRO-1 RS + AG", "ratio",
             "alpha share");
  bool ok = true;
  double first_ratio = 0.0, last_ratio = 0.0, first_share = 0.0, last_share = 0.0;
  for (const std::int64_t elems : {1'000LL, 100'000LL, 10'000'000LL, 1'000'000'000LL}) {
    const std::int64_t buffer = (elems + world - 1) / world * world;  // padded to split evenly
    const double all_reduce =
        collective_ms(link, wire_bytes(CollectiveKind::AllReduce, buffer, 2, world), world);
    const double halves =
        collective_ms(link, wire_bytes(CollectiveKind::ReduceScatter, buffer, 2, world), world) +
        collective_ms(link, wire_bytes(CollectiveKind::AllGather, buffer, 2, world), world);
    const double ratio = halves / all_reduce;
    const double alpha_share = 2.0 * link.alpha_us / 1e3 / halves;
    fmt::print("{:>15}{:>13.4f} ms{:>23.4f} ms{:>7.2f}x{:>13.0f}%\n", grouped(elems), all_reduce,
               halves, ratio, 100.0 * alpha_share);
    ok = ok && ratio >= 1.0 && ratio <= 2.0;
    if (first_ratio == 0.0) first_ratio = ratio, first_share = alpha_share;
    last_ratio = ratio;
    last_share = alpha_share;
  }
  fmt::print("\n{}\n",
             wrapped(fmt::format(
                 "The two halves move the all-reduce's bytes, so only alpha separates them: "
                 "{:.2f}x at the smallest size, where alpha is {:.0f}% of the two calls, and "
                 "{:.2f}x at the largest, where it is {:.0f}%. {}",
                 first_ratio, 100.0 * first_share, last_ratio, 100.0 * last_share,
                 ok ? "ok: every ratio is between 1x (bytes alone) and 2x (alpha alone)"
                    : "MISMATCH: a ratio outside 1x-2x")));
  return ok;
}

// Rank 0's collective calls in a run's last step: how many, and of which kinds ("4 all_reduce,
// 1 all_gather"), in the order each kind first appears.
struct StepCalls {
  std::int64_t count = 0;
  std::string kinds;
};

StepCalls calls_in_step(const Run& run) {
  std::vector<std::pair<std::string, std::int64_t>> kinds;
  for (const TimelineEvent& event : run.events) {
    if (event.stream != Stream::Comm) continue;
    auto it = std::ranges::find(kinds, event.name, &std::pair<std::string, std::int64_t>::first);
    if (it == kinds.end()) it = kinds.insert(kinds.end(), {event.name, 0});
    ++it->second;
  }
  StepCalls calls;
  for (const auto& [name, count] : kinds) {
    calls.kinds += fmt::format("{}{} {}", calls.kinds.empty() ? "" : ", ", count, name);
    calls.count += count;
  }
  return calls;
}

// Why a stage's comm time differs from DDP's for the same gradient bytes: every call pays the
// link's alpha before its bytes, and ZeRO-1 makes more calls. Said with this run's numbers.
void explain_comm(const Run& ddp, const Run& zero1, const LinkPreset& link) {
  const double ddp_ms = ddp.last_step.comm_ms, zero1_ms = zero1.last_step.comm_ms;
  if (ddp_ms <= 0.0) return;
  const StepCalls ddp_calls = calls_in_step(ddp), zero1_calls = calls_in_step(zero1);
  const double alpha_ms = link.alpha_us / 1000.0;
  const auto alphas_ms = [&](const StepCalls& calls) {
    return static_cast<double>(calls.count) * alpha_ms;
  };
  fmt::print(
      "\n{}\n",
      wrapped(fmt::format(
          "ZeRO-1 sends about DDP's bytes, yet its comm takes {:.2f}x DDP's ({:.4f} against "
          "{:.4f} ms): every call pays the link's alpha ({} us on {}) before its bytes, and in a "
          "step ZeRO-1 makes {} calls ({}) where DDP makes {} ({}). The alphas are {:.4f} of "
          "ZeRO-1's ms and {:.4f} of DDP's; the bytes take {:.4f} and {:.4f}. The larger the "
          "buffers, the smaller alpha's share and the closer the two times (the real-scale table "
          "below prices the bytes alone).",
          zero1_ms / ddp_ms, zero1_ms, ddp_ms, link.alpha_us, link.name, zero1_calls.count,
          zero1_calls.kinds, ddp_calls.count, ddp_calls.kinds, alphas_ms(zero1_calls),
          alphas_ms(ddp_calls), zero1_ms - alphas_ms(zero1_calls), ddp_ms - alphas_ms(ddp_calls))));
}

// The lesson's timing claims about `runs` (blocking and overlapped, stage by stage); true when
// they hold. At sizes other than the defaults a claim that does not hold is a finding, not a
// failure: the caller holds only the default sizes to them.
bool check_timings(const std::vector<Run>& runs, bool defaults) {
  const double ddp = runs[1].last_step.step_ms;       // DDP overlaps, as PyTorch DDP does
  const double zero1 = runs[2].last_step.step_ms;     // ZeRO-1, blocking
  const double zero1_ov = runs[3].last_step.step_ms;  // ZeRO-1 with overlap
  // At other sizes a claim that does not hold is a finding, not a failure.
  const auto verdict = [&](bool holds) {
    return holds ? "ok" : defaults ? "UNEXPECTED" : "not at these sizes";
  };
  const bool slower = ddp < zero1;
  const bool closer = zero1_ov < zero1 && zero1_ov <= kCloseToDdp * ddp;
  bool hidden = true;
  for (std::size_t i = 0; i + 1 < runs.size(); i += 2) {
    hidden = hidden && runs[i + 1].last_step.exposed_comm_ms < runs[i].last_step.exposed_comm_ms;
  }
  fmt::print(
      "{}: DDP with overlap ({:.4f} ms) is faster than ZeRO-1 without ({:.4f} ms, "
      "{:.2f}x)\n",
      verdict(slower), ddp, zero1, zero1 / ddp);
  fmt::print("{}: ZeRO-1 with overlap ({:.4f} ms) is close to DDP: {:.2f}x, within {:.2f}x\n",
             verdict(closer), zero1_ov, zero1_ov / ddp, kCloseToDdp);
  fmt::print("{}: overlap lowers the exposed comm of every stage\n", verdict(hidden));
  // The timing claims are this lesson's sizes' (4 ranks, 512-wide layers); other sizes may
  // leave too little compute to hide behind, or (one rank) nothing to communicate.
  const bool timings = slower && closer && hidden;
  if (!timings && !defaults) {
    fmt::print("{}\n",
               wrapped(fmt::format(
                   "note: at these sizes the timings differ from the "
                   "default run's{}. Only the default sizes are held to "
                   "these claims.",
                   runs[2].last_step.comm_ms > 0.0 ? "" : " (one rank: no communication at all)")));
  }
  return timings;
}

}  // namespace

int main(int argc, char** argv) {
  const LessonSizes defaults{.world = 4,
                             .mlp = MlpConfig{.layers = 4, .width = 512, .in = 512, .classes = 512},
                             .rows = 128,
                             .steps = 2,
                             .seed = 0};
  return run_lesson(
      argc, argv, "Lesson 05: overlap communication with computation", defaults,
      [](const LessonFlags& flags) {
        TrainConfig base;
        base.link = link_preset("ib-400g");
        const TrainConfig config = sized(base, flags);

        heading("Lesson 05: what a collective costs, and hiding it");
        const bool ring_ok = show_ring(config.world);
        fmt::print("\n{}\n", kBandwidth);

        pause(flags, "for overlap");
        heading("Overlap");
        fmt::print("{}\n\n{}\n\n", kIdea, kModel);
        std::vector<Run> runs;
        runs.push_back(run(config, "DDP", EngineKind::Ddp, false));
        runs.push_back(run(config, "DDP + overlap", EngineKind::Ddp, true));
        runs.push_back(run(config, "ZeRO-1", EngineKind::Zero1, false));
        runs.push_back(run(config, "ZeRO-1 + overlap", EngineKind::Zero1, true));
        runs.push_back(run(config, "ZeRO-2", EngineKind::Zero2, false));
        runs.push_back(run(config, "ZeRO-2 + overlap", EngineKind::Zero2, true));
        runs.push_back(run(config, "ZeRO-3", EngineKind::Zero3, false));
        runs.push_back(run(config, "ZeRO-3 + prefetch", EngineKind::Zero3, true));

        fmt::print("{:<22} {:>10} {:>10} {:>10} {:>12}\n", "last step (rank 0)", "step ms",
                   "compute", "comm", "exposed comm");
        for (const Run& r : runs) {
          fmt::print("{:<22} {:>10.4f} {:>10.4f} {:>10.4f} {:>12.4f}\n", r.name,
                     r.last_step.step_ms, r.last_step.compute_ms, r.last_step.comm_ms,
                     r.last_step.exposed_comm_ms);
        }

        explain_comm(runs[0], runs[2], config.link);
        const bool sweep_ok = print_alpha_beta_sweep(config.link, config.world);

        pause(flags, "for the timelines");
        heading("Timelines of the last step, rank 0, on one time scale");
        double span_ms = 0.0;
        for (const Run& r : runs) span_ms = std::max(span_ms, r.last_step.step_ms);
        for (const Run& r : runs) draw(r, span_ms, 64);
        draw_axis(span_ms, 64);

        pause(flags, "for real scale");
        heading("At real scale");
        print_real_traffic(config.link);

        heading("Checks");
        const bool timings = check_timings(runs, flags.defaults);
        bool same_bits = true;
        for (std::size_t i = 0; i + 1 < runs.size(); i += 2)
          same_bits = same_bits && !first_difference(runs[i].result, runs[i + 1].result);
        fmt::print("{}: every stage trains the same bits with and without overlap\n",
                   same_bits ? "ok" : "DIFFERENT");
        const bool reference = matches_reference(runs[1].config, runs[1].result) &&
                               matches_reference(runs[7].config, runs[7].result);
        fmt::print("\n{}\n", runs[3].last_step.comm_ms > 0.0
                                 ? std::string(kGap)
                                 : std::string("With one rank nothing is sent: there is no "
                                               "communication to expose or to hide."));
        return (timings || !flags.defaults) && same_bits && reference && ring_ok && sweep_ok ? 0
                                                                                             : 1;
      });
}
