// 11_infinity.cpp — ZeRO-Infinity: the optimizer's state (the fp32 master and Adam's moments)
// goes one tier further than ZeRO-Offload, from host memory to a swap file on NVMe. The same run
// three times, the state on the device, in host memory and on disk (and at ZeRO-3 a fourth, with
// the parameter shards on disk too): each tier's bytes from rank 0's ledger, the swap reads and
// writes the disk tier measured, the same bits every time, and at real scale the largest model
// each placement fits on one node.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <string>
#include <vector>

#include "engines/estimate.hpp"
#include "lesson_scale.hpp"
#include "lesson_support.hpp"
#include "run/compare.hpp"

using namespace zl;
using namespace zl::lessons;

namespace {

// One tier's run and where rank 0's model states rest after it.
struct TierRun {
  std::string name;
  TrainResult result;
  std::int64_t device_bytes = 0, host_bytes = 0, disk_bytes = 0;
};

TierRun run_tier(std::string name, const TrainConfig& config) {
  TierRun run{.name = std::move(name), .result = train(config)};
  const MemoryLedger& m = run.result.ranks[0].memory;
  run.device_bytes = m.model_state_bytes();
  run.host_bytes = m.current_bytes(MemCategory::HostMaster) +
                   m.current_bytes(MemCategory::HostOptimizer) +
                   m.current_bytes(MemCategory::HostParams);
  run.disk_bytes = m.current_bytes(MemCategory::NvmeMaster) +
                   m.current_bytes(MemCategory::NvmeOptimizer) +
                   m.current_bytes(MemCategory::NvmeParams);
  return run;
}

// The host memory of ZeRO-3's parameter swap buffers in `result` (its shards all on disk):
// offload_param.buffer_count buffers of the largest shard, in the training dtype.
std::int64_t swap_buffer_bytes(const TrainResult& result, const TrainingFeatures& features) {
  std::int64_t largest_elems = 0;
  for (const UnitLayout& unit : result.layout) {
    largest_elems = std::max(largest_elems, unit.shard_elems);
  }
  return features.param_buffer_count * largest_elems *
         static_cast<std::int64_t>(dtype_bytes(features.precision));
}

// The swap folder of this run: made here, removed with everything in it when the lesson ends.
struct SwapFolder {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("zerolab-lesson11-" + std::to_string(::getpid()));
  SwapFolder() { std::filesystem::create_directories(path); }
  ~SwapFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

// At real scale: one node of 16 GPUs of 32 GB with 1.5 TB of host memory and 28 TB of NVMe (96
// GB and 1,750 GB a GPU), bf16; the largest ZeRO-3 model each placement fits, in words computed
// from the numbers.
void print_wall() {
  const PlaceBudget node{.device_bytes = 32'000'000'000,
                         .host_bytes = 96'000'000'000,
                         .disk_bytes = 1'750'000'000'000};
  EstimateOptions options;
  options.precision = DType::BF16;
  struct Placement {
    std::string_view name;
    OffloadTier optimizer;
  };
  const Placement placements[] = {{"the device alone", OffloadTier::None},
                                  {"the optimizer in host memory", OffloadTier::Cpu},
                                  {"the optimizer on NVMe", OffloadTier::Nvme}};
  fmt::print(
      "One node: 16 GPUs of 32 GB, 1.5 TB of host memory and 28 TB of NVMe, so 32, 96 and 1,750\n"
      "GB for each GPU's rank. The largest model whose ZeRO-3 states fit, in bf16 (model states\n"
      "only: activations come on top):\n\n");
  std::array<std::int64_t, std::size(placements)> largest{};
  for (std::size_t i = 0; i < std::size(placements); ++i) {
    options.optimizer_tier = placements[i].optimizer;
    largest[i] = largest_fitting_params(16, options, 3, node);
    const LedgerEstimate at = estimate_ledger(state_elems(largest[i], 16), options, 3);
    fmt::print("  {:<30}{:>7.1f}B ({:.1f}x): device {} GB, host {} GB, disk {} GB\n",
               placements[i].name, static_cast<double>(largest[i]) / 1e9,
               static_cast<double>(largest[i]) / static_cast<double>(largest[0]),
               gb_text(at.total_bytes()), gb_text(at.host_bytes()), gb_text(at.disk_bytes()));
  }
  // bytes a parameter on the device, from a model whose shards are whole parameters
  const StateElems probe = state_elems(1'600'000, 16);
  options.optimizer_tier = OffloadTier::None;
  const std::int64_t alone = estimate_ledger(probe, options, 3).total_bytes() / probe.shard_elems;
  options.optimizer_tier = OffloadTier::Cpu;
  const std::int64_t offloaded =
      estimate_ledger(probe, options, 3).total_bytes() / probe.shard_elems;
  const std::string tiers =
      largest[1] == largest[2]
          ? "host memory and NVMe fit the same model here: the device is full first either way"
          : fmt::format("NVMe fits {:.1f}x what host memory fits: host memory is full first",
                        static_cast<double>(largest[2]) / static_cast<double>(largest[1]));
  fmt::print("\n{}\n",
             wrapped(fmt::format(
                 "Offloaded, the GPU keeps {} of the {} bytes a parameter takes at ZeRO-3, so the "
                 "device alone stops {:.1f}x sooner; {}. Host memory shared by more GPUs, or "
                 "holding ZeRO-3's parameters too, fills first, and then the disk's tier is what "
                 "lets the model grow: `zerolab estimate --params 7e9 --world 16 --device-gb 32 "
                 "--host-gb 96 --disk-gb 1750` shows every placement.",
                 offloaded, alone,
                 static_cast<double>(largest[1]) / static_cast<double>(largest[0]), tiers)));
}

}  // namespace

int main(int argc, char** argv) {
  const LessonSizes defaults{.world = 4,
                             .stage = 3,
                             .min_stage = 1,
                             .mlp = MlpConfig{.layers = 3, .width = 64, .in = 16, .classes = 64},
                             .rows = 8,
                             .steps = 3,
                             .seed = 0};
  return run_lesson(
      argc, argv, "Lesson 11: ZeRO-Infinity moves the optimizer state to NVMe", defaults,
      [](const LessonFlags& flags) {
        TrainConfig base;
        base.engine = engine_of_stage(*flags.sizes.stage);
        base.features.precision = DType::BF16;
        const TrainConfig config = sized(base, flags);
        const SwapFolder folder;

        heading("Lesson 11: ZeRO-Infinity, the optimizer state on NVMe");
        TrainConfig in_host = config;
        in_host.features.offload_optimizer = true;
        TrainConfig on_disk = in_host;
        on_disk.features.nvme_path = folder.path.string();
        std::vector<TierRun> runs = {run_tier("on the device", config),
                                     run_tier("in host memory", in_host),
                                     run_tier("on NVMe", on_disk)};
        // ZeRO-3 alone keeps parameter shards: with them on NVMe too (offload_param's nvme)
        const bool zero3 = config.engine == EngineKind::Zero3;
        TrainConfig params_on_disk = on_disk;
        params_on_disk.features.offload_param = true;
        params_on_disk.features.param_nvme_path = folder.path.string();
        if (zero3) runs.push_back(run_tier("both on NVMe", params_on_disk));
        print_model(config, runs[0].result);
        fmt::print("\nRank 0's model states after {} steps, by where they rest:\n\n", config.steps);
        fmt::print("{:<16}{:>14}{:>14}{:>14}\n", "optimizer", "device B", "host B", "disk B");
        for (const TierRun& run : runs) {
          fmt::print("{:<16}{:>14}{:>14}{:>14}\n", run.name, grouped(run.device_bytes),
                     grouped(run.host_bytes), grouped(run.disk_bytes));
        }
        fmt::print("\n{}\n", wrapped(fmt::format(
                                 "The fp32 master and Adam's moments, {} B on rank 0, leave the "
                                 "device for host memory and then for the disk; the device keeps "
                                 "{} B either way. On NVMe a unit's state is in host memory only "
                                 "while its update runs.",
                                 grouped(runs[1].host_bytes), grouped(runs[1].device_bytes))));
        if (zero3) {
          fmt::print("{}\n",
                     wrapped(fmt::format(
                         "With ZeRO-3's parameter shards on NVMe too (both on NVMe), {} B "
                         "more go to the disk and the device keeps {} B, its gradient "
                         "shards. A unit's parameters pass through host memory for each "
                         "gather and for its update, in {} swap buffers of the largest "
                         "shard (offload_param.buffer_count): {} B, all they keep there "
                         "between steps.",
                         grouped(runs[3].disk_bytes - runs[2].disk_bytes),
                         grouped(runs[3].device_bytes), params_on_disk.features.param_buffer_count,
                         grouped(swap_buffer_bytes(runs[3].result, params_on_disk.features)))));
        }

        pause(flags, "for the disk's reads and writes");
        heading("The swap file");
        const TrafficLedger& traffic = runs[2].result.ranks[0].traffic;
        const std::int64_t read = traffic.disk_bytes(DiskIo::Read);
        const std::int64_t written = traffic.disk_bytes(DiskIo::Write);
        const double read_ms = traffic.disk_ms(DiskIo::Read);
        const double write_ms = traffic.disk_ms(DiskIo::Write);
        // GB/s of `bytes` in `ms` (0 when nothing was timed)
        const auto gbps = [](std::int64_t bytes, double ms) {
          return ms > 0.0 ? static_cast<double>(bytes) / (ms * 1e6) : 0.0;
        };
        fmt::print(
            "{}\n",
            wrapped(fmt::format(
                "Rank 0 read {} B and wrote {} B of its swap file over {} steps: {} B each way "
                "per update (a unit's master, momentum and variance read before its update and "
                "written back after it, {} B of state on rank 0), and {} B more written, the "
                "initial master. Measured on this machine: {:.2f} ms reading and {:.2f} ms "
                "writing, {:.2f} and {:.2f} GB/s; `zerolab bench nvme --path DIR` measures what a "
                "folder's disk can do.",
                grouped(read), grouped(written), config.steps, grouped(read / config.steps),
                grouped(runs[2].disk_bytes), grouped(written - read), read_ms, write_ms,
                gbps(read, read_ms), gbps(written, write_ms))));

        pause(flags, "for real scale");
        heading("At real scale");
        print_wall();

        heading("Checks");
        bool ok = true;
        for (std::size_t r = 0; r < runs[0].result.ranks.size(); ++r) {
          const MemoryLedger& device = runs[0].result.ranks[r].memory;
          const MemoryLedger& host = runs[1].result.ranks[r].memory;
          const MemoryLedger& nvme = runs[2].result.ranks[r].memory;
          const std::int64_t master = host.current_bytes(MemCategory::HostMaster);
          const std::int64_t adam = host.current_bytes(MemCategory::HostOptimizer);
          ok = ok && adam == device.current_bytes(MemCategory::Optimizer) &&
               nvme.current_bytes(MemCategory::NvmeMaster) == master &&
               nvme.current_bytes(MemCategory::NvmeOptimizer) == adam &&
               nvme.current_bytes(MemCategory::HostMaster) == 0 &&
               nvme.current_bytes(MemCategory::HostOptimizer) == 0;
          if (zero3) {
            const MemoryLedger& both = runs[3].result.ranks[r].memory;
            ok = ok &&
                 both.current_bytes(MemCategory::NvmeParams) ==
                     device.current_bytes(MemCategory::Params) &&
                 both.current_bytes(MemCategory::HostParams) ==
                     swap_buffer_bytes(runs[3].result, params_on_disk.features) &&
                 both.current_bytes(MemCategory::Params) == 0;
          }
        }
        fmt::print("{}\n", wrapped(fmt::format(
                               "{}: on every rank the disk holds exactly what host memory "
                               "held{}, and no master or Adam byte{} is left in host memory "
                               "between steps",
                               ok ? "ok" : "MISMATCH",
                               zero3 ? " (and the parameter shards the device held)" : "",
                               zero3 ? " or parameter but the swap buffers" : "")));
        bool same = true;
        for (std::size_t i = 1; i < runs.size(); ++i) {
          same = same && !first_difference(runs[i].result, runs[0].result).has_value();
        }
        fmt::print("{}: the {} placements train the same bits\n", same ? "ok" : "DIFFERENT",
                   runs.size() == 4 ? "four" : "three");
        const bool reference = matches_reference(on_disk, runs[2].result);
        return ok && same && reference ? 0 : 1;
      });
}
