// 12_nodes.cpp — worlds of nodes. The same ZeRO-3 run on two nodes of W/2 ranks, NVLink inside a
// node and one InfiniBand NIC between them, three ways: ZeRO-3 over the whole world, hybrid
// sharding (HSDP: ZeRO-3 inside each node, DDP across) and ZeRO++'s hpZ (ZeRO-3 with a secondary
// shard inside the node for backward's gathers). Where each one's bytes go (rank 0's ledger by
// link level), what it holds for it, the comm time each gives on those links, the same bits
// from all three, and at real scale the comm each predicts for GPT-2 124M on 4 nodes of 8 H100s,
// beside ZeRO++ whole: hpZ with qwZ's int8 gathers and qgZ's int4 all-to-alls.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "comm/quantize.hpp"
#include "engines/estimate.hpp"
#include "engines/partition.hpp"
#include "engines/quantized_comm.hpp"
#include "lesson_support.hpp"
#include "run/compare.hpp"

using namespace zl;
using namespace zl::lessons;

namespace {

// One way of sharding and what rank 0 saw.
struct NodesRun {
  std::string name;
  TrainConfig config;
  TrainResult result;
  std::array<std::int64_t, kLinkLevelCount> sent_bytes{};  // by LinkLevel
  std::int64_t model_state_bytes = 0;
  double comm_ms = 0.0;  // per step, simulated on the run's links
};

NodesRun run_way(std::string name, const TrainConfig& config) {
  NodesRun run{.name = std::move(name), .config = config, .result = train(config)};
  const RankReport& rank0 = run.result.ranks[0];
  for (int level = 0; level < kLinkLevelCount; ++level) {
    run.sent_bytes[static_cast<std::size_t>(level)] =
        rank0.traffic.sent_bytes(static_cast<LinkLevel>(level));
  }
  run.model_state_bytes = rank0.memory.model_state_bytes();
  run.comm_ms = run.result.timelines[0].totals().comm_ms / static_cast<double>(config.steps);
  return run;
}

std::int64_t sent(const NodesRun& run, LinkLevel level) {
  return run.sent_bytes[static_cast<std::size_t>(level)];
}

// "12.5%" of `part` in `whole` (0% of nothing).
std::string share(std::int64_t part, std::int64_t whole) {
  return fmt::format(
      "{:.1f}%", whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
}

// Bytes that leave the node: on a link across, or on a ring through both nodes.
std::int64_t between(const NodesRun& run) {
  return sent(run, LinkLevel::Across) + sent(run, LinkLevel::Spanning);
}

std::int64_t total(const NodesRun& run) {
  return sent(run, LinkLevel::Inside) + between(run);
}

// What the table says, each figure computed from it: ZeRO-3, HSDP and hpZ, in that order, on
// two nodes of `gpus` ranks.
void explain_runs(const std::vector<NodesRun>& runs, int gpus) {
  const NodesRun& zero3 = runs[0];
  const NodesRun& hybrid = runs[1];
  const NodesRun& partitioned = runs[2];
  fmt::print(
      "\n{}\n",
      wrapped(fmt::format(
          "ZeRO-3 sends {} of its {} B between the nodes: every gather and reduce-scatter is the "
          "world's. hpZ keeps backward's gathers inside the node: {} B, {} of its {} B, and its "
          "bytes between the nodes fall from {} B to {} B, for {} B more model states than "
          "ZeRO-3 (its secondary shard). HSDP keeps {} of its {} B inside the node and sends {} "
          "B across, one all-reduce of each unit's gradient shard, for {} B more model states "
          "than ZeRO-3 (it shards among {} ranks, not {}).",
          share(between(zero3), total(zero3)), grouped(total(zero3)),
          grouped(sent(partitioned, LinkLevel::Inside)),
          share(sent(partitioned, LinkLevel::Inside), total(partitioned)),
          grouped(total(partitioned)), grouped(between(zero3)), grouped(between(partitioned)),
          grouped(partitioned.model_state_bytes - zero3.model_state_bytes),
          share(sent(hybrid, LinkLevel::Inside), total(hybrid)), grouped(total(hybrid)),
          grouped(sent(hybrid, LinkLevel::Across)),
          grouped(hybrid.model_state_bytes - zero3.model_state_bytes), gpus, zero3.config.world)));
  const auto fastest = std::ranges::min_element(
      runs, [](const NodesRun& a, const NodesRun& b) { return a.comm_ms < b.comm_ms; });
  fmt::print("{}\n", wrapped(fmt::format("On these links {} spends the least time communicating: "
                                         "{:.3f} ms a step against ZeRO-3's {:.3f} ms.",
                                         fastest->name, fastest->comm_ms, zero3.comm_ms)));
}

// hpZ's bytes inside the node are its backward gathers, Ψp (K-1)/K in fp32 a step; and every
// way trains the reference's bits.
bool check_runs(const std::vector<NodesRun>& runs, int gpus) {
  const NodesRun& partitioned = runs[2];
  const std::int64_t steps = partitioned.config.steps;
  const std::int64_t psi_bytes = 4 * total_padded_elems(partitioned.result.layout);
  const std::int64_t gathers = steps * psi_bytes * (gpus - 1) / gpus;
  const bool partition_ok = sent(partitioned, LinkLevel::Inside) == gathers;
  fmt::print(
      "{}: hpZ's bytes inside the node, {}, are its backward gathers, {} steps of 4Ψp({} - 1)/{} "
      "= {}\n",
      partition_ok ? "ok" : "MISMATCH", grouped(sent(partitioned, LinkLevel::Inside)), steps, gpus,
      gpus, grouped(gathers));
  bool same = true;
  for (const NodesRun& run : runs) same = matches_reference(run.config, run.result) && same;
  return partition_ok && same;
}

void print_runs(const std::vector<NodesRun>& runs) {
  fmt::print("{:<8}{:>14}{:>14}{:>14}{:>16}{:>14}\n", "", "inside B", "across B", "spanning B",
             "model states B", "comm ms/step");
  for (const NodesRun& run : runs) {
    fmt::print("{:<8}{:>14}{:>14}{:>14}{:>16}{:>14.3f}\n", run.name,
               grouped(sent(run, LinkLevel::Inside)), grouped(sent(run, LinkLevel::Across)),
               grouped(sent(run, LinkLevel::Spanning)), grouped(run.model_state_bytes),
               run.comm_ms);
  }
}

// Bytes `elems` values take quantized to `bits` in zerolab's blocks.
std::int64_t quantized(std::int64_t elems, QuantBits bits) {
  return quantized_bytes(elems, kQuantBlockElems, bits);
}

// The comm of one step of GPT-2 124M in bf16 on 4 nodes of 8 H100s with `nics` 400 Gb/s NICs a
// node, priced call by call as the timeline prices them (no overlap): ZeRO-3, HSDP, hpZ, and
// ZeRO++ whole (hpZ, qwZ's int8 forward gathers, qgZ's int4 all-to-alls inside then across).
std::array<double, 4> real_comm_ms(int nics) {
  constexpr int kWorld = 32, kGpus = 8;
  const LinkPreset inside = link_preset("h100-nvlink");
  const NodeLinks nodes{
      .gpus_per_node = kGpus, .across = link_preset("ib-400g"), .nics_per_node = nics};
  const std::vector<UnitSpec> units = checked_units(gpt_preset("124M"));
  const auto world_call = [&](CollectiveKind kind, std::int64_t elems, std::int64_t bytes) {
    return plan_collective(inside, nodes, kind, elems, bytes, kWorld).ms;
  };
  const auto group_call = [&](int ranks, int spans, CollectiveKind kind, std::int64_t elems,
                              std::int64_t bytes) {
    return plan_group_collective(inside, nodes, kWorld, ranks, spans, kind, elems, bytes).ms;
  };
  constexpr int kNodes = kWorld / kGpus;
  std::array<double, 4> ms{};
  for (const UnitLayout& unit : layout_units(units, kWorld)) {
    const std::int64_t elems = unit.padded_elems;
    ms[0] += 2 * world_call(CollectiveKind::AllGather, elems, 2) +
             world_call(CollectiveKind::ReduceScatter, elems, 2);
    ms[2] += world_call(CollectiveKind::AllGather, elems, 2) +
             group_call(kGpus, 1, CollectiveKind::AllGather, elems, 2) +
             world_call(CollectiveKind::ReduceScatter, elems, 2);
    const std::int64_t shard = unit.shard_elems;
    ms[3] += world_call(CollectiveKind::AllGather, kWorld * quantized(shard, QuantBits::Int8), 1) +
             group_call(kGpus, 1, CollectiveKind::AllGather, elems, 2) +
             group_call(kGpus, 1, CollectiveKind::AllToAll,
                        kGpus * quantized(kNodes * shard, QuantBits::Int4), 1) +
             group_call(kNodes, kNodes, CollectiveKind::AllToAll,
                        kNodes * quantized(shard, QuantBits::Int4), 1);
  }
  for (const UnitLayout& unit : layout_units(units, kGpus)) {
    const std::int64_t elems = unit.padded_elems;
    ms[1] +=
        2 * group_call(kGpus, 1, CollectiveKind::AllGather, elems, 2) +
        group_call(kGpus, 1, CollectiveKind::ReduceScatter, elems, 2) +
        group_call(kWorld / kGpus, kWorld / kGpus, CollectiveKind::AllReduce, unit.shard_elems, 4);
  }
  return ms;
}

void print_real_scale() {
  constexpr std::array<std::string_view, 4> kNames = {"ZeRO-3", "HSDP", "hpZ", "ZeRO++"};
  fmt::print(
      "GPT-2 124M in bf16 on 4 nodes of 8 H100s (NVLink inside, 400 Gb/s InfiniBand across),\n"
      "the comm of one step priced call by call as the timeline prices it, none of it hidden:\n\n");
  fmt::print("{:<22}{:>12}{:>12}{:>12}{:>12}\n", "NICs a node", kNames[0], kNames[1], kNames[2],
             kNames[3]);
  std::array<double, 2> spread{};  // slowest over fastest, with 1 and 8 NICs
  for (std::size_t i = 0; i < 2; ++i) {
    const int nics = i == 0 ? 1 : 8;
    const std::array<double, 4> ms = real_comm_ms(nics);
    fmt::print("{:<22}{:>9.2f} ms{:>9.2f} ms{:>9.2f} ms{:>9.2f} ms\n", nics, ms[0], ms[1], ms[2],
               ms[3]);
    const auto fastest = static_cast<std::size_t>(std::ranges::min_element(ms) - ms.begin());
    spread[i] = std::ranges::max(ms) / ms[fastest];
    fmt::print("  with {} NIC{} a node {} is fastest, {:.2f}x ZeRO-3's speed\n", nics,
               nics == 1 ? "" : "s", kNames[fastest], ms[0] / ms[fastest]);
  }
  fmt::print(
      "\n{}\n",
      wrapped(fmt::format(
          "ZeRO++ is hpZ with qwZ's int8 forward gathers and qgZ's int4 gradient all-to-alls "
          "(blocks of 256, a scale each): not bitwise, unlike the other three. One NIC a node is "
          "the slow link ZeRO++ was made for: every byte ZeRO-3 gathers crosses it. With a NIC "
          "a GPU the slowest of the four takes {:.2f}x the fastest's "
          "time, against {:.2f}x with one NIC a node. HSDP's all-reduce across the nodes runs in "
          "fp32, twice bf16's bytes, because the exact order rounds only once (docs/exactness.md). "
          "`zerolab train --gpus-per-node 8 --what-if-world 32` predicts a whole step, compute "
          "and overlap included (docs/timeline.md).",
          spread[1], spread[0])));
}

}  // namespace

int main(int argc, char** argv) {
  const LessonSizes defaults{.world = 8,
                             .min_world = 4,
                             .mlp = MlpConfig{.layers = 3, .width = 64, .in = 16, .classes = 64},
                             .rows = 8,
                             .steps = 3,
                             .seed = 0};
  return run_lesson(
      argc, argv, "Lesson 12: worlds of nodes, HSDP and hpZ", defaults,
      [](const LessonFlags& flags) {
        TrainConfig base;
        base.engine = EngineKind::Zero3;
        base.record_timeline = true;
        TrainConfig config = sized(base, flags);
        with_error_kind(ErrorKind::Usage, [&] {
          ZL_CHECK(config.world % 2 == 0,
                   "--world {} is not two nodes: give an even --world, two nodes of W/2 ranks",
                   config.world);
        });
        const int gpus = config.world / 2;
        config.gpus_per_node = gpus;
        config.nics_per_node = 1;
        TrainConfig hsdp = config;
        hsdp.features.shard_group_ranks = gpus;
        TrainConfig hpz = config;
        hpz.features.hpz_partition_ranks = gpus;

        heading("Lesson 12: two nodes, one slow link between them");
        const std::vector<NodesRun> runs = {run_way("ZeRO-3", config), run_way("HSDP", hsdp),
                                            run_way("hpZ", hpz)};
        print_model(config, runs[0].result);
        fmt::print(
            "\n{}\n\n",
            wrapped(fmt::format(
                "{} ranks on 2 nodes of {}: NVLink ({}) inside a node, one {} NIC between the "
                "nodes. Rank 0's bytes over {} steps, by the links they cross (inside one node, "
                "across from node to node, or spanning: a ring through both nodes' ranks, "
                "whose slowest hop is the NIC), its model states, and the comm time per step "
                "the timeline gives on these links:",
                config.world, gpus, config.link.name, config.link_across.name, config.steps)));
        print_runs(runs);
        explain_runs(runs, gpus);

        pause(flags, "for real scale");
        heading("At real scale");
        print_real_scale();

        heading("Checks");
        return check_runs(runs, gpus) ? 0 : 1;
      });
}
