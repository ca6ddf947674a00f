// arbitrary.hpp — RapidCheck generators for zerolab's domain: small MLP shapes (sizes not
// divisible by W included), worlds of 1..8 ranks, a few steps and random AdamW settings.
// Small values come first, so a failing property shrinks to the smallest config.
#pragma once

#include <rapidcheck.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "run/train.hpp"

namespace zl {

inline std::ostream& operator<<(std::ostream& os, const TrainConfig& c) {
  return os << "TrainConfig{world=" << c.world << " gpus_per_node=" << c.gpus_per_node
            << " steps=" << c.steps << " micro_batch=" << c.micro_batch
            << " mlp{layers=" << c.mlp.layers << " width=" << c.mlp.width << " in=" << c.mlp.in
            << " classes=" << c.mlp.classes << "} lr=" << c.adamw.lr << " betas=(" << c.adamw.beta1
            << ", " << c.adamw.beta2 << ") eps=" << c.adamw.eps << " wd=" << c.adamw.weight_decay
            << " seed=" << c.seed << "}";
}

}  // namespace zl

namespace rc {

/// GPUs a node for a world of `world`: kOneNode first (what shrinking goes to), then every
/// divisor of the world, so worlds of 4, 6 and 8 draw nodes that split them (two-level sums).
inline Gen<int> gen_gpus_per_node(int world) {
  std::vector<int> choices = {zl::kOneNode};
  for (int g = 1; g <= world; ++g) {
    if (world % g == 0) choices.push_back(g);
  }
  return gen::elementOf(choices);
}

/// ZeRO++'s hpZ partition for `config`'s world: a divisor above 1 that a node's ranks divide or
/// are a multiple of (the node, part of one, or whole nodes: the gathers copy bits wherever they
/// run), or 1 for a world of one (hpZ off).
inline Gen<int> gen_hpz_partition(const zl::TrainConfig& config) {
  const int node = zl::ranks_per_node(config.world, config.gpus_per_node);
  std::vector<int> choices;
  for (int k = 2; k <= config.world; ++k) {
    if (config.world % k == 0 && (node % k == 0 || k % node == 0)) choices.push_back(k);
  }
  return choices.empty() ? gen::just(1) : gen::elementOf(choices);
}

template <>
struct Arbitrary<zl::TrainConfig> {
  static Gen<zl::TrainConfig> arbitrary() {
    return gen::mapcat(flat(), [](zl::TrainConfig config) {
      return gen::map(gen_gpus_per_node(config.world), [config](int gpus_per_node) {
        zl::TrainConfig placed = config;
        placed.gpus_per_node = gpus_per_node;
        return placed;
      });
    });
  }

 private:
  // Everything but the nodes.
  static Gen<zl::TrainConfig> flat() {
    return gen::apply(
        [](int world, int steps, int micro_batch, int layers, int width, int in, int classes, double lr,
           double beta1, double beta2, double eps, double weight_decay, unsigned seed) {
          zl::TrainConfig config;
          config.world = world;
          config.steps = steps;
          config.micro_batch = micro_batch;
          config.mlp = {.layers = layers, .width = width, .in = in, .classes = classes};
          config.adamw = {.lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = eps, .weight_decay = weight_decay};
          config.seed = seed;
          return config;
        },
        gen::inRange(1, 9), gen::inRange(1, 6), gen::inRange(1, 6), gen::inRange(1, 5),
        gen::inRange(1, 40), gen::inRange(1, 12), gen::inRange(1, 7),
        gen::element(1e-3, 3e-2, 1e-1, 0.5), gen::element(0.9, 0.8, 0.0),
        gen::element(0.999, 0.95, 0.5), gen::element(1e-8, 1e-6, 1e-3),
        gen::element(0.01, 0.0, 0.1, 1.0), gen::arbitrary<unsigned>());
  }
};

/// The folder the properties' NVMe tier swaps into: made once per process, removed at its exit
/// (each run removes its own swap files).
inline const std::string& nvme_test_folder() {
  struct Folder {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("zl_nvme_prop_" + std::to_string(::getpid()));
    std::string name = (std::filesystem::create_directories(path), path.string());
    ~Folder() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Folder folder;
  return folder.name;
}

/// Training features: any precision, 1..3 accumulated micro-batches, clipping off or at norms
/// that bind, ZeRO-3 prefetch and persistence on or off, buckets from one call per unit down to
/// a few elements per rank, overlap_comm, ZeRO-Offload (to host memory or ZeRO-Infinity's NVMe
/// tier) and ZeRO-3's parameter offload off, to host memory or (with ZeRO-Offload) to the NVMe
/// tier, its swap files moved by io_uring or threads in blocks of a page or more, with
/// pipeline_read, pipeline_write, both or neither, the parameters through 1, 2, 3 or 5 swap
/// buffers with the first shards in host memory or none (max_in_cpu), and fp16 scales that overflow
/// from the first step (2^40) with a short window and hysteresis, so skipped steps and scale
/// changes occur; or a static fp16 scale (1024, or 2^40, which overflows and skips steps without
/// ever moving).
inline Gen<zl::TrainingFeatures> gen_features() {
  return gen::apply(
      [](zl::DType precision, int accum, double clip, std::int64_t prefetch,
         std::int64_t persistence, int scale_power, int window, int hysteresis,
         std::int64_t reduce_bucket, std::int64_t allgather_bucket, bool overlap, int offload_tier,
         double static_scale, int param_tier, int swap_plan, int param_pool) {
        zl::TrainingFeatures features;
        features.precision = precision;
        features.grad_accum_steps = accum;
        features.grad_clip = clip;
        features.prefetch_bucket_elems = prefetch;
        features.persistence_threshold_elems = persistence;
        features.reduce_bucket_elems = reduce_bucket;
        features.allgather_bucket_elems = allgather_bucket;
        features.overlap_comm = overlap;
        features.offload_optimizer = offload_tier > 0;  // 1: host memory, 2: NVMe
        if (offload_tier == 2) features.nvme_path = nvme_test_folder();
        features.offload_param = param_tier > 0;  // 1: host memory, 2: NVMe (with offload)
        if (param_tier == 2 && offload_tier > 0) features.param_nvme_path = nvme_test_folder();
        using zl::IoBackend;
        const zl::AioSettings plans[] = {
            {},  // DeepSpeed's defaults: 1 MiB blocks, 8 in flight, io_uring where there is one
            {.block_bytes = 4096,
             .queue_depth = 2,
             .thread_count = 1,
             .backend = IoBackend::Threads},
            {.block_bytes = 8192, .queue_depth = 3, .thread_count = 2, .backend = IoBackend::Auto},
            {.block_bytes = 4096,
             .queue_depth = 1,
             .thread_count = 1,
             .backend = IoBackend::Threads}};
        features.aio = plans[swap_plan];
        features.pipeline_read = swap_plan == 1 || swap_plan == 3;
        features.pipeline_write = swap_plan >= 2;
        features.swap_buffer_count = swap_plan == 2 ? 2 : swap_plan == 3 ? 3 : 4;
        // the parameters' swap buffers: DeepSpeed's 5, one (every read and write waits), two or
        // three; the second plan keeps the first shards of up to 300 elements in host memory
        features.param_buffer_count = std::array{5, 1, 2, 3}[static_cast<std::size_t>(param_pool)];
        features.param_max_in_cpu_elems = param_pool == 2 ? 300 : 0;
        features.loss_scale = {.initial_scale_power = scale_power,
                               .window = window,
                               .hysteresis = hysteresis,
                               .min_scale = 1.0,
                               .static_scale = static_scale};
        return features;
      },
      gen::element(zl::DType::F32, zl::DType::BF16, zl::DType::F16), gen::inRange(1, 4),
      gen::element(0.0, 0.01, 0.5, 10.0), gen::element<std::int64_t>(0, 64, 100'000),
      gen::element<std::int64_t>(0, 50, 1'000'000), gen::element(16, 40, 4), gen::inRange(1, 4),
      gen::inRange(1, 3), gen::element<std::int64_t>(500'000'000, 256, 64),
      gen::element<std::int64_t>(500'000'000, 320, 48), gen::arbitrary<bool>(),
      gen::element(0, 1, 2), gen::element(0.0, 0.0, 1024.0, 1099511627776.0), gen::element(0, 1, 2),
      gen::element(0, 1, 2, 3), gen::element(0, 1, 2, 3));
}

/// Activation checkpointing: none first (so failures shrink to it), full, every:2, every:3 or
/// selective, and full or every:2 with the checkpoints in host memory.
inline Gen<zl::ActivationPolicy> gen_activation_policy() {
  using zl::ActivationPolicy;
  using zl::Recompute;
  return gen::element(
      ActivationPolicy{}, ActivationPolicy{.recompute = Recompute::Full},
      ActivationPolicy{.recompute = Recompute::Full, .every_blocks = 2},
      ActivationPolicy{.recompute = Recompute::Full, .every_blocks = 3},
      ActivationPolicy{.recompute = Recompute::Selective},
      ActivationPolicy{.recompute = Recompute::Full, .cpu_checkpoints = true},
      ActivationPolicy{.recompute = Recompute::Full, .every_blocks = 2, .cpu_checkpoints = true});
}

/// Learning-rate schedules over the few updates a property runs: constant first (so failures
/// shrink to it), the flags' warmup and decays, and each of DeepSpeed's four, OneCycle cycling
/// beta1 and beta2 too.
inline Gen<zl::LrSchedule> gen_lr_schedule() {
  using zl::LrSchedule;
  using zl::LrScheduleKind;
  using zl::OneCycleParams;
  using zl::WarmupShape;
  return gen::element(
      LrSchedule{}, LrSchedule{.kind = LrScheduleKind::Constant, .warmup_steps = 2},
      LrSchedule{.kind = LrScheduleKind::Linear, .warmup_steps = 1, .total_steps = 4},
      LrSchedule{.kind = LrScheduleKind::Cosine, .warmup_steps = 1, .total_steps = 3,
                 .min_lr = 1e-4},
      LrSchedule{.kind = LrScheduleKind::WarmupLR, .warmup_steps = 3, .min_lr = 1e-4},
      LrSchedule{.kind = LrScheduleKind::WarmupDecayLR, .warmup_steps = 2, .total_steps = 4,
                 .warmup_shape = WarmupShape::Linear},
      LrSchedule{.kind = LrScheduleKind::WarmupCosineLR, .warmup_steps = 2, .total_steps = 5,
                 .warmup_min_ratio = 0.1, .cos_min_ratio = 0.01},
      LrSchedule{.kind = LrScheduleKind::OneCycle,
                 .min_lr = 1e-4,
                 .one_cycle = OneCycleParams{.first_step_size = 2, .second_step_size = 1,
                                             .decay_step_size = 1, .decay_lr_rate = 0.5,
                                             .decay_mom_rate = 0.01}});
}

/// A small GPT run: 1-3 blocks of 1-2 heads, 2-16 channels, 1-8 tokens, a vocabulary of 2-39 (or
/// 128 or 129, on both sides of the padding's multiple),
/// W 1..8, 1-3 steps of 1-3 sequences, any seed, any training features (gen_features), any
/// activation checkpointing (gen_activation_policy) and any lr schedule (gen_lr_schedule).
inline Gen<zl::TrainConfig> gen_gpt_config() {
  return gen::exec([] {
    zl::TrainConfig config;
    config.model = zl::ModelKind::Gpt;
    const int heads = *gen::inRange(1, 3);
    config.gpt = {.n_layer = *gen::inRange(1, 4),
                  .n_head = heads,
                  .n_embd = heads * *gen::element<std::int64_t>(2, 4, 8),
                  .block_size = *gen::inRange<std::int64_t>(1, 9),
                  // Padded to 128 rows, or exactly 128 (none padded), or 129 (padded to 256).
                  .vocab = *gen::weightedOneOf<std::int64_t>(
                      {{8, gen::inRange<std::int64_t>(2, 40)},
                       {1, gen::element<std::int64_t>(128, 129)}})};
    config.world = *gen::inRange(1, 9);
    config.gpus_per_node = *gen_gpus_per_node(config.world);
    config.steps = *gen::inRange(1, 4);
    config.micro_batch = *gen::inRange(1, 4);
    config.adamw.lr = *gen::element(1e-3, 3e-2);
    config.seed = *gen::arbitrary<unsigned>();
    config.features = *gen_features();
    config.activations = *gen_activation_policy();
    config.lr_schedule = *gen_lr_schedule();
    return config;
  });
}

}  // namespace rc
