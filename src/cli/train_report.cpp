// train_report.cpp — what `zerolab train` reports after the run: the ledgers' table (with the
// host memory and copies of offload), the simulated timeline's totals, the --summary document and
// the --metrics lines.
#include "cli/train_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace zl {

namespace {

// GB/s (10^9 bytes a second) of `bytes` moved in `ms`; 0 with no time.
double gbps(std::int64_t bytes, double ms) {
  return ms > 0.0 ? static_cast<double>(bytes) / (ms * 1e6) : 0.0;
}

// A rank's swap-file traffic (ZeRO-Infinity's NVMe tier; zeros without it): bytes, the wall time
// the reads and writes were in flight and their GB/s, all of the run's (the files' first writes
// included), and the updates that streamed the optimizer's file: their wall time and, within it,
// the AdamW kernels' time and the file's reads' and writes' (less than their sum where the
// pipeline hid some), with their bytes and GB/s: the optimizer step's own swap speed.
nlohmann::json nvme_json(const TrafficLedger& traffic) {
  const SwappedUpdates& updates = traffic.swapped_updates();
  return {{"bytes_read", traffic.disk_bytes(DiskIo::Read)},
          {"bytes_written", traffic.disk_bytes(DiskIo::Write)},
          {"read_ms", traffic.disk_ms(DiskIo::Read)},
          {"write_ms", traffic.disk_ms(DiskIo::Write)},
          {"read_gbps", gbps(traffic.disk_bytes(DiskIo::Read), traffic.disk_ms(DiskIo::Read))},
          {"write_gbps", gbps(traffic.disk_bytes(DiskIo::Write), traffic.disk_ms(DiskIo::Write))},
          {"updates",
           {{"count", updates.updates},
            {"wall_ms", updates.wall_ms},
            {"adamw_ms", updates.adamw_ms},
            {"read_ms", updates.read_ms},
            {"write_ms", updates.write_ms},
            {"bytes_read", updates.read_bytes},
            {"bytes_written", updates.written_bytes},
            {"read_gbps", gbps(updates.read_bytes, updates.read_ms)},
            {"write_gbps", gbps(updates.written_bytes, updates.write_ms)}}}};
}

std::int64_t total_calls(const TrafficLedger& traffic) {
  std::int64_t calls = 0;
  for (int kind = 0; kind < kCollectiveKindCount; ++kind)
    calls += traffic.calls(static_cast<CollectiveKind>(kind));
  return calls;
}

// With the optimizer (and ZeRO-3's parameters) on the NVMe tier: each rank's swap file bytes, and
// the host peak of the master, moments and parameter shards, which come into host memory one unit
// at a time.
void print_disk(const TrainResult& result) {
  const bool any = std::ranges::any_of(result.ranks, [](const RankReport& rank) {
    return rank.memory.current_bytes(MemCategory::NvmeOptimizer) +
               rank.memory.current_bytes(MemCategory::NvmeParams) >
           0;
  });
  if (!any) return;
  fmt::print(
      "\nswap files on disk (bytes; what the steps read and wrote, and at what GB/s)\n{:>4} {:>14} "
      "{:>17} {:>14} {:>17} {:>20} {:>17} {:>12} {:>12} {:>10} {:>10}\n",
      "rank", "nvme_master_B", "nvme_optimizer_B", "nvme_params_B", "host_master_pk_B",
      "host_optimizer_pk_B", "host_params_pk_B", "read_B", "written_B", "read_GB/s", "write_GB/s");
  for (const auto& rank : result.ranks) {
    const MemoryLedger& memory = rank.memory;
    const nlohmann::json io = nvme_json(rank.traffic);
    fmt::print(
        "{:>4} {:>14} {:>17} {:>14} {:>17} {:>20} {:>17} {:>12} {:>12} {:>10.3f} {:>10.3f}\n",
        rank.rank, memory.current_bytes(MemCategory::NvmeMaster),
        memory.current_bytes(MemCategory::NvmeOptimizer),
        memory.current_bytes(MemCategory::NvmeParams), memory.peak_bytes(MemCategory::HostMaster),
        memory.peak_bytes(MemCategory::HostOptimizer), memory.peak_bytes(MemCategory::HostParams),
        io["bytes_read"].get<std::int64_t>(), io["bytes_written"].get<std::int64_t>(),
        io["read_gbps"].get<double>(), io["write_gbps"].get<double>());
  }
}

// With ZeRO-Offload or parameter offload: what each rank holds in host memory and the bytes
// copied between host and device over the steps.
void print_host_memory(const TrainResult& result) {
  const bool any = std::ranges::any_of(result.ranks, [](const RankReport& rank) {
    return rank.traffic.to_device_bytes() + rank.traffic.to_host_bytes() > 0;
  });
  if (!any) return;
  fmt::print(
      "\nhost memory and host-device copies (bytes)\n{:>4} {:>14} {:>14} {:>16} {:>16} {:>12} "
      "{:>12}\n",
      "rank", "host_params_B", "host_master_B", "host_optimizer_B", "host_grads_pk_B",
      "to_device_B", "to_host_B");
  for (const auto& rank : result.ranks) {
    const MemoryLedger& memory = rank.memory;
    fmt::print("{:>4} {:>14} {:>14} {:>16} {:>16} {:>12} {:>12}\n", rank.rank,
               memory.current_bytes(MemCategory::HostParams),
               memory.current_bytes(MemCategory::HostMaster),
               memory.current_bytes(MemCategory::HostOptimizer),
               memory.peak_bytes(MemCategory::HostGrads), rank.traffic.to_device_bytes(),
               rank.traffic.to_host_bytes());
  }
  print_disk(result);
}

// The simulated totals of the run: each rank's, and the largest over the ranks.
StepTimes slowest(const TrainResult& result) {
  StepTimes most;
  for (const auto& rank : result.timelines) {
    const StepTimes sum = rank.totals();
    most.compute_ms = std::max(most.compute_ms, sum.compute_ms);
    most.comm_ms = std::max(most.comm_ms, sum.comm_ms);
    most.exposed_comm_ms = std::max(most.exposed_comm_ms, sum.exposed_comm_ms);
    most.copy_ms = std::max(most.copy_ms, sum.copy_ms);
    most.step_ms = std::max(most.step_ms, sum.step_ms);
  }
  return most;
}

nlohmann::json timeline_json(const StepTimes& sum) {
  return {{"compute_ms", sum.compute_ms},
          {"comm_ms", sum.comm_ms},
          {"exposed_comm_ms", sum.exposed_comm_ms},
          {"copy_ms", sum.copy_ms},
          {"sim_ms", sum.step_ms}};
}

// A JSON number, or null for NaN and infinities (which JSON cannot hold).
std::string json_number(double value) {
  return std::isfinite(value) ? fmt::format("{}", value) : "null";
}

}  // namespace

void print_summary(const TrainConfig& config, const TrainResult& result) {
  fmt::print("\nengine {} with W={}: {} parameters, {} with padding\n", engine_label(config),
             config.world, total_real_numel(result.layout), total_padded_elems(result.layout));
  fmt::print(
      "{:>4} {:>11} {:>11} {:>11} {:>11} {:>13} {:>13} {:>12} {:>13} {:>12} {:>11} {:>11} {:>6}\n",
      "rank", "params_B", "grads_B", "master_B", "optimizer_B", "gathered_pk_B", "activ_peak_B",
      "total_peak_B", "device_peak_B", "host_peak_B", "sent_B", "recv_B", "calls");
  for (const auto& rank : result.ranks) {
    const MemoryLedger& memory = rank.memory;
    fmt::print(
        "{:>4} {:>11} {:>11} {:>11} {:>11} {:>13} {:>13} {:>12} {:>13} {:>12} {:>11} {:>11} "
        "{:>6}\n",
        rank.rank, memory.current_bytes(MemCategory::Params),
        memory.current_bytes(MemCategory::Grads), memory.current_bytes(MemCategory::Master),
        memory.current_bytes(MemCategory::Optimizer), memory.peak_bytes(MemCategory::Gathered),
        memory.peak_bytes(MemCategory::Activations), memory.total_peak_bytes(),
        memory.device_peak_bytes(), memory.host_peak_bytes(), rank.traffic.sent_bytes(),
        rank.traffic.recv_bytes(), total_calls(rank.traffic));
  }
  print_host_memory(result);
  fmt::print("\nactivations at their peak, by kind, and checkpoints on the host (bytes)\n{:>4}",
             "rank");
  for (int k = 0; k < kActivationKindCount; ++k) {
    fmt::print(" {:>11}", activation_kind_name(static_cast<ActivationKind>(k)));
  }
  fmt::print(" {:>16}", mem_category_name(MemCategory::HostActivations));
  for (const auto& rank : result.ranks) {
    fmt::print("\n{:>4}", rank.rank);
    for (int k = 0; k < kActivationKindCount; ++k) {
      fmt::print(" {:>11}", rank.memory.activation_bytes_at_peak(static_cast<ActivationKind>(k)));
    }
    fmt::print(" {:>16}", rank.memory.peak_bytes(MemCategory::HostActivations));
  }
  fmt::print("\n");
}

std::string_view device_name(const TrainConfig& config) {
  return config.device ? std::string_view(config.device->name) : std::string_view("cpu");
}

void print_timeline(const TrainConfig& config, const TrainResult& result) {
  fmt::print("\nsimulated timeline, link {} ({} us + bytes / {} GB/s), device {}", config.link.name,
             config.link.alpha_us, config.link.busbw_gbps, device_name(config));
  if (result.cpu_gflops > 0.0) {
    fmt::print(" (CPU time x {:.3g}: CPU GEMM {:.1f} GFLOP/s measured)", result.compute_scale,
               result.cpu_gflops);
  }
  if (node_count(config.world, config.gpus_per_node) > 1) {
    const int gpus = config.gpus_per_node;
    const int nics = nics_a_node(node_links(config), config.world);
    fmt::print(
        "\n{} nodes of {} GPU{}, each with {} {} NIC{} ({} us + bytes / {} GB/s); each collective "
        "priced as the cheaper of one ring and inside, across, inside (docs/timeline.md)",
        config.world / gpus, gpus, gpus == 1 ? "" : "s", nics, config.link_across.name,
        nics == 1 ? "" : "s", config.link_across.alpha_us, config.link_across.busbw_gbps);
  }
  fmt::print("\nhost link {} ({} us + bytes / {} GB/s) for the host copies of offload\n",
             config.host_link.name, config.host_link.latency_us, config.host_link.gbps);
  const bool disk = std::ranges::any_of(result.ranks, [](const RankReport& rank) {
    return rank.traffic.disk_bytes(DiskIo::Read) + rank.traffic.disk_bytes(DiskIo::Write) > 0;
  });
  if (disk) {
    fmt::print(
        "disk link {} ({} us + bytes / {} GB/s) for the swap files' reads and writes, "
        "counted in copy_ms\n",
        config.disk_link.name, config.disk_link.latency_us, config.disk_link.gbps);
  }
  fmt::print("{:>4} {:>13} {:>13} {:>16} {:>13} {:>13}\n", "rank", "compute_ms", "comm_ms",
             "exposed_comm_ms", "copy_ms", "sim_ms");
  for (const auto& rank : result.timelines) {
    const StepTimes sum = rank.totals();
    fmt::print("{:>4} {:>13.3f} {:>13.3f} {:>16.3f} {:>13.3f} {:>13.3f}\n", rank.rank,
               sum.compute_ms, sum.comm_ms, sum.exposed_comm_ms, sum.copy_ms, sum.step_ms);
  }
}

nlohmann::json summary_json(const TrainConfig& config, const TrainResult& result) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& rank : result.ranks) {
    const MemoryLedger& memory = rank.memory;
    nlohmann::json current, peaks, activations_at_peak, calls, sent, recv, by_level;
    for (int c = 0; c < kMemCategoryCount; ++c) {
      const auto category = static_cast<MemCategory>(c);
      current[std::string(mem_category_name(category))] = memory.current_bytes(category);
      peaks[std::string(mem_category_name(category))] = memory.peak_bytes(category);
    }
    for (int k = 0; k < kActivationKindCount; ++k) {
      const auto kind = static_cast<ActivationKind>(k);
      activations_at_peak[std::string(activation_kind_name(kind))] =
          memory.activation_bytes_at_peak(kind);
    }
    for (int k = 0; k < kCollectiveKindCount; ++k) {
      const auto kind = static_cast<CollectiveKind>(k);
      calls[std::string(collective_name(kind))] = rank.traffic.calls(kind);
      sent[std::string(collective_name(kind))] = rank.traffic.sent_bytes(kind);
      recv[std::string(collective_name(kind))] = rank.traffic.recv_bytes(kind);
    }
    for (int l = 0; l < kLinkLevelCount; ++l) {
      const auto level = static_cast<LinkLevel>(l);
      by_level[std::string(link_level_name(level))] = rank.traffic.sent_bytes(level);
    }
    ranks.push_back({{"rank", rank.rank},
                     {"bytes",
                      {{"params", memory.current_bytes(MemCategory::Params)},
                       {"grads", memory.current_bytes(MemCategory::Grads)},
                       {"optimizer", memory.current_bytes(MemCategory::Optimizer)},
                       {"master", memory.current_bytes(MemCategory::Master)},
                       {"gathered_peak", memory.peak_bytes(MemCategory::Gathered)},
                       {"total_peak", memory.total_peak_bytes()},
                       {"device_peak", memory.device_peak_bytes()},
                       {"host_peak", memory.host_peak_bytes()},
                       {"current", current},
                       {"peak", peaks},
                       {"activations_at_peak", activations_at_peak}}},
                     {"comm",
                      {{"sent", rank.traffic.sent_bytes()},
                       {"recv", rank.traffic.recv_bytes()},
                       {"to_host", rank.traffic.to_host_bytes()},
                       {"to_device", rank.traffic.to_device_bytes()},
                       {"calls", calls},
                       {"sent_by_collective", sent},
                       {"sent_by_link_level", by_level},
                       {"recv_by_collective", recv}}},
                     {"nvme", nvme_json(rank.traffic)}});
    ranks.back().update(timeline_json(result.timelines.at(ranks.size() - 1).totals()));
  }
  const bool is_reference = config.engine == EngineKind::Reference;
  std::int64_t host_waits = 0;  // the most of any step on rank 0
  for (const StepRecord& step : result.steps) host_waits = std::max(host_waits, step.host_waits);
  nlohmann::json summary = {
      {"engine", engine_name(config.engine)},
      {"stage", is_reference ? nlohmann::json(nullptr) : nlohmann::json(stage_of(config.engine))},
      {"world", config.world},
      {"steps", config.steps},
      {"params", total_real_numel(result.layout)},
      {"padded_params", total_padded_elems(result.layout)},
      {"host_waits_per_step", host_waits},
      {"ranks", ranks},
      {"timeline",
       {{"link", config.link.name},
        {"alpha_us", config.link.alpha_us},
        {"busbw_gbps", config.link.busbw_gbps},
        {"gpus_per_node", config.gpus_per_node},
        {"link_across", config.link_across.name},
        {"nics_per_node", config.nics_per_node},
        {"host_link", config.host_link.name},
        {"host_latency_us", config.host_link.latency_us},
        {"host_gbps", config.host_link.gbps},
        {"disk_link", config.disk_link.name},
        {"disk_latency_us", config.disk_link.latency_us},
        {"disk_gbps", config.disk_link.gbps},
        {"device", device_name(config)},
        {"compute_scale", result.compute_scale},
        {"time", "simulated"}}}};
  summary.update(timeline_json(slowest(result)));
  return summary;
}

std::string metrics_lines(const TrainConfig& config, const TrainResult& result) {
  const std::string_view rate_key =
      config.model == ModelKind::Gpt ? "tokens_per_s" : "samples_per_s";
  std::string lines;
  for (const auto& record : result.steps) {
    const double per_s = static_cast<double>(record.tokens) / (record.step_ms / 1000.0);
    lines += fmt::format(
        R"({{"step": {}, "loss": {}, "grad_norm": {}, "step_ms": {:.3f}, "skipped": {}, )"
        R"("sim_step_ms": {:.6f}, "compute_ms": {:.6f}, "comm_ms": {:.6f}, )"
        R"("exposed_comm_ms": {:.6f}, "copy_ms": {:.6f}, "wall_ms": {:.3f}, "{}": {}, "lr": {}, )"
        R"("loss_scale": {}, "host_waits": {}, "host_wait_ms": {:.3f}, "drain_ms": {:.3f}}})"
        "\n",
        record.step + 1, std::isfinite(record.loss) ? fmt::format("{}", record.loss) : "null",
        json_number(record.grad_norm), record.step_ms, record.skipped, record.sim_step_ms,
        record.compute_ms, record.comm_ms, record.exposed_comm_ms, record.copy_ms, record.wall_ms,
        rate_key, json_number(std::round(per_s * 10.0) / 10.0), record.lr,
        record.loss_scale ? json_number(*record.loss_scale) : "null", record.host_waits,
        record.host_wait_ms, record.drain_ms);
  }
  return lines;
}

}  // namespace zl
