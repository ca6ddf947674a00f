// 06_offload.cpp — ZeRO-Offload: the optimizer's state (the fp32 master and Adam's moments, 12
// bytes per parameter of the own shard with mixed precision) leaves the device for host memory,
// and the update runs there. Each step the gradient shard goes down to the host and the updated
// 16-bit parameter shard comes back up. Same bits as on the device.
#include <fmt/format.h>

#include <array>

#include "lesson_scale.hpp"
#include "lesson_support.hpp"
#include "run/compare.hpp"

using namespace zl;
using namespace zl::lessons;

namespace {

// Why offload the optimizer state, with rank 0's own bytes of the run on the device: whether the
// fp32 master and Adam are the largest part of what it holds is read from the ledger.
std::string why_offload(int stage, const MemoryLedger& m) {
  const std::int64_t params = m.current_bytes(MemCategory::Params);
  const std::int64_t grads = m.current_bytes(MemCategory::Grads);
  const std::int64_t states =
      m.current_bytes(MemCategory::Master) + m.current_bytes(MemCategory::Optimizer);
  const std::string_view sharded = stage == 1   ? "the optimizer state"
                                   : stage == 2 ? "the gradients and the optimizer state"
                                                : "everything";
  const std::string largest = states >= params && states >= grads
                                  ? "the largest part of what it holds on the device"
                                  : fmt::format("not the largest part here: the bf16 {} are larger",
                                                params >= grads ? "parameters" : "gradients");
  return wrapped(fmt::format(
      "With mixed precision each parameter costs 2 (bf16 params) + 2 (bf16 grads) + 12 bytes "
      "(fp32 master, momentum, variance). ZeRO-{} shards {}. On rank 0 the fp32 master and Adam "
      "hold {} B against {} B of parameters and {} B of gradients: {}. ZeRO-Offload moves exactly "
      "that 12-byte part to the host, where memory is cheap, and runs AdamW on the CPU.",
      stage, sharded, grouped(states), grouped(params), grouped(grads), largest));
}
constexpr std::string_view kCopies =
    "The price is two copies per step over PCIe: the bf16 gradient shard down (2 bytes per\n"
    "element of the shard) and the updated bf16 parameter shard up (2 more). The collectives\n"
    "do not change.";

// Device-side and host-side model-state bytes of rank 0, as the ledger reads them.
void print_split(std::string_view name, const TrainResult& result) {
  const MemoryLedger& m = result.ranks[0].memory;
  const std::int64_t device_bytes = m.model_state_bytes();
  const std::int64_t host_bytes =
      m.current_bytes(MemCategory::HostMaster) + m.current_bytes(MemCategory::HostOptimizer);
  fmt::print("{:<16} device {:>10} B (params {}, grads {}, master {}, adam {})   host {:>10} B\n",
             name, grouped(device_bytes), grouped(m.current_bytes(MemCategory::Params)),
             grouped(m.current_bytes(MemCategory::Grads)),
             grouped(m.current_bytes(MemCategory::Master)),
             grouped(m.current_bytes(MemCategory::Optimizer)), grouped(host_bytes));
}

// Per GPU at real scale, with the optimizer offloaded at `stage`: what stays on the device,
// what moves to the host (never added together: they are different memories), and the bf16
// shard copied each way per step.
void print_real_offload(int stage) {
  fmt::print(
      "ZeRO-{} with the optimizer offloaded, per GPU, bf16 (1 GB = 1e9 bytes). The device and\n"
      "the host are different memories, so they are never added up:\n\n",
      stage);
  fmt::print("{:<13}{:>5}{:>14}{:>14}{:>14}{:>18}\n", "model", "W", "no offload", "device GB",
             "host GB", "PCIe each way MB");
  for (const RealModel& model : real_models()) {
    for (const int world : kRealWorlds) {
      const StateElems elems = real_elems(model, world);
      const LedgerEstimate e = estimate_ledger(elems, real_options(), stage);
      fmt::print("{:<13}{:>5}{:>14}{:>14}{:>14}{:>18}\n", model.name, world,
                 gb_text(e.total_bytes()), gb_text(e.params_bytes + e.grads_bytes),
                 gb_text(e.master_bytes + e.optimizer_bytes),
                 fmt::format("{:.1f}", 2.0 * static_cast<double>(elems.shard_elems) / 1e6));
    }
  }
  fmt::print(
      "\nThe host side is 12 bytes per element of the shard, so 8 GPUs of a node hold 12Ψ/8\n"
      "each there: a node's CPU memory has to hold 12Ψ in all.\n");
}

}  // namespace

int main(int argc, char** argv) {
  const LessonSizes defaults{.world = 4,
                             .stage = 2,
                             .min_stage = 1,
                             .mlp = MlpConfig{.layers = 3, .width = 64, .in = 16, .classes = 64},
                             .rows = 8,
                             .steps = 3,
                             .seed = 0};
  return run_lesson(
      argc, argv, "Lesson 06: ZeRO-Offload moves the optimizer state to the host", defaults,
      [](const LessonFlags& flags) {
        TrainConfig base;
        base.engine = engine_of_stage(*flags.sizes.stage);
        base.features.precision = DType::BF16;
        const TrainConfig config = sized(base, flags);

        heading("Lesson 06: ZeRO-Offload, the optimizer state on the host");
        const TrainResult on_device = train(config);
        fmt::print("{}\n\n", why_offload(stage_of(config.engine), on_device.ranks[0].memory));
        print_model(config, on_device);

        pause(flags, "for the same run with the optimizer offloaded");
        TrainConfig offload = config;
        offload.features.offload_optimizer = true;
        const TrainResult offloaded = train(offload);
        heading("Model states per rank after the step (rank 0)");
        print_split(fmt::format("ZeRO-{} bf16", stage_of(config.engine)), on_device);
        print_split("+ offload", offloaded);
        // Device and host are different memories: each gets its own table, never one total.
        const std::array device = {MemCategory::Params, MemCategory::Grads, MemCategory::Master,
                                   MemCategory::Optimizer};
        const std::array host = {MemCategory::HostMaster, MemCategory::HostOptimizer};
        fmt::print("\nWith offload, every rank's device memory:\n");
        print_ranks(final_holdings(offloaded), device);
        fmt::print("\nand its host memory:\n");
        print_ranks(final_holdings(offloaded), host);

        pause(flags, "for the copies");
        heading("Device-host copies");
        fmt::print("{}\n\n", kCopies);
        std::int64_t shard_bytes = 0;
        for (const auto& unit : offloaded.layout) shard_bytes += 2 * unit.shard_elems;
        const TrafficLedger& traffic = offloaded.ranks[0].traffic;
        fmt::print(
            "rank 0 over {} steps: {} B to the host, {} B back ({} B each way per step:\n"
            "the bf16 shard of every unit); collectives sent {} B, as without offload ({} B)."
            "\n\n",
            config.steps, grouped(traffic.to_host_bytes()), grouped(traffic.to_device_bytes()),
            grouped(shard_bytes), grouped(traffic.sent_bytes()),
            grouped(on_device.ranks[0].traffic.sent_bytes()));

        pause(flags, "for real scale");
        heading("At real scale");
        print_real_offload(stage_of(config.engine));

        heading("Checks");
        bool ok = true;
        for (const auto& rank : offloaded.ranks) {
          const MemoryLedger& off = rank.memory;
          const MemoryLedger& on = on_device.ranks[rank.rank].memory;
          ok =
              ok && off.current_bytes(MemCategory::Master) == 0 &&
              off.current_bytes(MemCategory::Optimizer) == 0 &&
              off.current_bytes(MemCategory::HostMaster) == on.current_bytes(MemCategory::Master) &&
              off.current_bytes(MemCategory::HostOptimizer) ==
                  on.current_bytes(MemCategory::Optimizer) &&
              rank.traffic.to_host_bytes() == config.steps * shard_bytes &&
              rank.traffic.to_device_bytes() == config.steps * shard_bytes;
        }
        fmt::print(
            "{}: no master or Adam bytes left on any device; the host holds exactly what the\n"
            "device held; each step copies one bf16 shard each way\n",
            ok ? "ok" : "MISMATCH");
        const bool same = !first_difference(offloaded, on_device).has_value();
        fmt::print("{}: offloaded and on-device runs are the same bits\n",
                   same ? "ok" : "DIFFERENT");
        const bool reference = matches_reference(offload, offloaded);
        return ok && same && reference ? 0 : 1;
      });
}
