// features_test.cpp — the exactness promise with every training feature on: bf16 and fp16
// (with forced overflows, skipped steps and scale changes), gradient accumulation, clipping,
// ZeRO-3 prefetch and persistence, activation checkpointing (each stage with a policy against
// the reference without one) and every learning-rate schedule. Every stage stays bitwise the reference, for the MLP and the
// GPT. The canonical norm and the clipped update are the same for every world size.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <cmath>
#include <optional>

#include "run/compare.hpp"
#include "engines/optimizer_step.hpp"
#include "engines/sharding.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "optim/grad_norm.hpp"
#include "sim_world.hpp"
#include "support/arbitrary.hpp"
#include "support/small_config.hpp"

namespace zl {
namespace {

constexpr EngineKind kStages[] = {EngineKind::Ddp, EngineKind::Zero1, EngineKind::Zero2,
                                  EngineKind::Zero3};

TrainResult run(TrainConfig config, EngineKind engine) {
  config.engine = engine;
  return train(config);
}

// Every stage against the reference trained without activation checkpointing, without offload
// and on one CPU thread per rank: a policy changes no bit, and neither do where the optimizer
// and the parameters live, the engine and the thread count.
void check_every_stage(const TrainConfig& config) {
  TrainConfig unchecked = config;
  unchecked.activations = {};
  unchecked.threads = 1;
  // Offload, to host memory or to the NVMe tier, changes where the state lives, never a bit.
  unchecked.features.offload_optimizer = false;
  unchecked.features.nvme_path.clear();
  unchecked.features.offload_param = false;
  unchecked.features.param_nvme_path.clear();
  const auto reference = run(unchecked, EngineKind::Reference);
  for (const EngineKind stage : kStages) {
    if (const auto diff = first_difference(run(config, stage), reference)) {
      RC_FAIL(fmt::format("{}: {}", engine_name(stage), *diff));
    }
  }
  // Hybrid sharding, ZeRO-1/2/3 inside each node, with every feature.
  TrainConfig hybrid = config;
  hybrid.features.shard_group_ranks = ranks_per_node(config.world, config.gpus_per_node);
  for (const EngineKind stage : {EngineKind::Zero1, EngineKind::Zero2, EngineKind::Zero3}) {
    if (const auto diff = first_difference(run(hybrid, stage), reference)) {
      RC_FAIL(fmt::format("{} in shard groups of {}: {}", engine_name(stage),
                          hybrid.features.shard_group_ranks, *diff));
    }
  }
  // ZeRO++'s hpZ with every feature.
  TrainConfig hpz = config;
  hpz.features.hpz_partition_ranks = *rc::gen_hpz_partition(config);
  if (const auto diff = first_difference(run(hpz, EngineKind::Zero3), reference)) {
    RC_FAIL(fmt::format("hpz (partitions of {}): {}", hpz.features.hpz_partition_ranks, *diff));
  }
}

// The first element of wte's padded rows (past the vocabulary) in `result`'s final parameters or
// Adam moments whose bits are not +0, or nothing: the rows start at zero, their gradient is zero
// (their logits are masked out of the loss) and AdamW's decay of 0 is 0, so they stay zero.
std::optional<std::string> padded_rows_not_zero(const TrainResult& result, const GptConfig& gpt) {
  const auto begin = static_cast<std::size_t>(gpt.vocab * gpt.n_embd);
  const auto end = static_cast<std::size_t>(padded_vocab(gpt) * gpt.n_embd);
  const ModelState& state = result.final_state;
  for (const auto* tensor : {&state.params, &state.exp_avg, &state.exp_avg_sq}) {
    const std::vector<float>& unit = tensor->at(0);  // wte [Vp, C], then wpe
    for (std::size_t e = begin; e < end; ++e) {
      if (std::bit_cast<std::uint32_t>(unit[e]) != 0) {
        return fmt::format("wte's padded element {} (row {}) is {} after training", e,
                           e / static_cast<std::size_t>(gpt.n_embd), unit[e]);
      }
    }
  }
  return std::nullopt;
}

// CPU threads per rank 1..3 and the kernels' grain (the fine one splits even small shapes).
void draw_threads(TrainConfig& config) {
  config.threads = *rc::gen::inRange(1, 4);
  config.kernel_grain = *rc::gen::element(cpu::Grain::Normal, cpu::Grain::Fine);
  RC_LOG() << "threads " << config.threads << " fine grain "
           << (config.kernel_grain == cpu::Grain::Fine) << "\n";
}

std::string describe(const TrainingFeatures& f) {
  return fmt::format(
      "{} accum={} clip={} prefetch={} persistence={} scale=2^{} window={} hysteresis={} "
      "static scale={} buckets={}/{} overlap={} offload={} nvme={} offload_param={} "
      "param nvme={}",
      dtype_name(f.precision), f.grad_accum_steps, f.grad_clip, f.prefetch_bucket_elems,
      f.persistence_threshold_elems, f.loss_scale.initial_scale_power, f.loss_scale.window,
      f.loss_scale.hysteresis, f.loss_scale.static_scale, f.reduce_bucket_elems,
      f.allgather_bucket_elems, f.overlap_comm, f.offload_optimizer, !f.nvme_path.empty(),
      f.offload_param, !f.param_nvme_path.empty());
}

RC_GTEST_PROP(Features, prop_every_stage_is_bitwise_the_reference_with_every_feature,
              (TrainConfig config)) {
  config.features = *rc::gen_features();
  config.lr_schedule = *rc::gen_lr_schedule();
  draw_threads(config);
  RC_TAG(dtype_name(config.features.precision));
  RC_LOG() << describe(config.features) << " lr schedule " << lr_schedule_summary(config.lr_schedule)
           << "\n";
  check_every_stage(config);
}

RC_GTEST_PROP(Features, prop_gpt_every_stage_is_bitwise_the_reference, ()) {
  TrainConfig config = *rc::gen_gpt_config();
  draw_threads(config);
  RC_LOG() << fmt::format("gpt L={} H={} C={} T={} V={} W={} steps={} B={} checkpointing={} ",
                          config.gpt.n_layer, config.gpt.n_head, config.gpt.n_embd,
                          config.gpt.block_size, config.gpt.vocab, config.world, config.steps,
                          config.micro_batch,
                          activation_policy_name(config.activations) +
                              (config.activations.cpu_checkpoints ? " on the host" : ""))
           << "lr schedule " << lr_schedule_summary(config.lr_schedule) << " "
           << describe(config.features) << "\n";
  RC_TAG(activation_policy_name(config.activations), config.activations.cpu_checkpoints);
  check_every_stage(config);
  // The reference with the policy too: the single-process answer key recomputes the same way.
  TrainConfig unchecked = config;
  unchecked.activations = {};
  unchecked.threads = 1;
  // Offload, to host memory or to the NVMe tier, changes where the state lives, never a bit.
  unchecked.features.offload_optimizer = false;
  unchecked.features.nvme_path.clear();
  unchecked.features.offload_param = false;
  unchecked.features.param_nvme_path.clear();
  const TrainResult reference = run(config, EngineKind::Reference);
  if (const auto diff = first_difference(reference, run(unchecked, EngineKind::Reference))) {
    RC_FAIL(fmt::format("reference with checkpointing: {}", *diff));
  }
  // Every stage equals the reference, so its padded rows are theirs.
  if (const auto nonzero = padded_rows_not_zero(reference, config.gpt)) RC_FAIL(*nonzero);
}

// GPT-2's vocabulary padded as llm.c pads it: wte's rows past the vocabulary stay exactly zero
// through training with weight decay, at every stage and precision, and files leave them out.
TEST(Features, GptPaddedVocabularyRowsStayZero) {
  TrainConfig config;
  config.model = ModelKind::Gpt;
  config.gpt = gpt_preset("tiny");  // vocab 64 in 128 rows
  config.world = 3;
  config.steps = 4;
  config.micro_batch = 2;
  config.adamw.weight_decay = 0.1;
  for (const DType precision : {DType::F32, DType::BF16, DType::F16}) {
    config.features.precision = precision;
    for (const EngineKind engine : {EngineKind::Reference, EngineKind::Ddp, EngineKind::Zero1,
                                    EngineKind::Zero2, EngineKind::Zero3}) {
      const TrainResult result = run(config, engine);
      EXPECT_FALSE(padded_rows_not_zero(result, config.gpt))
          << engine_name(engine) << " " << dtype_name(precision) << ": "
          << padded_rows_not_zero(result, config.gpt).value_or("");
      // The real rows did train.
      EXPECT_NE(result.final_state.params[0], initial_params(config)[0]);
    }
  }
}

// The first update runs at the schedule's first lr: 0 for a warmup from 0 (DeepSpeed's WarmupLR
// from warmup_min_lr 0, transformers' warmups), so after one step every engine still holds the
// initial parameters, and the step record says lr 0.
TEST(Features, TheFirstUpdateRunsAtTheSchedulesFirstLr) {
  TrainConfig config;
  config.world = 3;
  config.steps = 1;
  for (const LrSchedule& schedule :
       {LrSchedule{.kind = LrScheduleKind::WarmupLR, .warmup_steps = 5},
        LrSchedule{.kind = LrScheduleKind::Cosine, .warmup_steps = 1, .total_steps = 4}}) {
    config.lr_schedule = schedule;
    for (const EngineKind engine :
         {EngineKind::Reference, EngineKind::Ddp, EngineKind::Zero1, EngineKind::Zero2,
          EngineKind::Zero3}) {
      const TrainResult result = run(config, engine);
      EXPECT_EQ(result.steps.at(0).lr, 0.0) << lr_schedule_name(schedule.kind);
      EXPECT_FALSE(first_difference("params", result.final_state.params, initial_params(config)))
          << engine_name(engine) << " " << lr_schedule_name(schedule.kind);
    }
  }
}

// Recompute runs inside a block's backward, with the parameters the engine hands it there (under
// ZeRO-3 the ones gathered for that backward): no collective is added, so every rank's traffic
// ledger is the same with and without checkpointing, 3Ψ at ZeRO-3 included, while the
// activations' peak drops.
TEST(Features, ActivationCheckpointingAddsNoTraffic) {
  TrainConfig config;
  config.model = ModelKind::Gpt;
  config.gpt = gpt_preset("tiny");
  config.gpt.n_layer = 4;
  config.world = 3;
  config.steps = 2;
  config.micro_batch = 2;
  for (const EngineKind stage : kStages) {
    const TrainResult none = run(config, stage);
    struct Policy {
      const char* name;
      bool on_host;
    };
    for (const Policy policy :
         {Policy{"full", false}, Policy{"every:3", false}, Policy{"selective", false},
          Policy{"full", true}}) {
      TrainConfig checkpointed = config;
      checkpointed.activations = parse_activation_policy(policy.name);
      checkpointed.activations.cpu_checkpoints = policy.on_host;
      const TrainResult result = run(checkpointed, stage);
      for (std::size_t r = 0; r < result.ranks.size(); ++r) {
        SCOPED_TRACE(fmt::format("{} {}{} rank {}", engine_name(stage), policy.name,
                                 policy.on_host ? " on the host" : "", r));
        for (int k = 0; k < kCollectiveKindCount; ++k) {
          const auto kind = static_cast<CollectiveKind>(k);
          EXPECT_EQ(result.ranks[r].traffic.sent_bytes(kind), none.ranks[r].traffic.sent_bytes(kind));
          EXPECT_EQ(result.ranks[r].traffic.calls(kind), none.ranks[r].traffic.calls(kind));
        }
        EXPECT_LT(result.ranks[r].memory.peak_bytes(MemCategory::Activations),
                  none.ranks[r].memory.peak_bytes(MemCategory::Activations));
      }
    }
  }
}

// fp16 from a scale of 2^40: the first steps overflow and are skipped by every stage alike while
// the scale halves (hysteresis 1), until it is small enough; then steps update.
TEST(Features, Fp16OverflowsSkipTheSameStepsEverywhere) {
  TrainConfig config = small_config();
  config.steps = 30;
  config.features.precision = DType::F16;
  config.features.loss_scale = {.initial_scale_power = 40, .window = 1000, .hysteresis = 1,
                                .min_scale = 1.0};
  const auto reference = run(config, EngineKind::Reference);
  int skipped = 0;
  for (const auto& step : reference.steps) skipped += step.skipped ? 1 : 0;
  EXPECT_GE(skipped, 10);  // 2^40 has to fall below fp16's 2^16 range at least
  EXPECT_LT(skipped, config.steps);
  EXPECT_TRUE(reference.steps.front().skipped);
  EXPECT_FALSE(reference.steps.back().skipped);
  for (const EngineKind stage : kStages) {
    EXPECT_FALSE(first_difference(run(config, stage), reference)) << engine_name(stage);
  }
}

// A static fp16 scale (fp16.loss_scale > 0) never moves: at 2^40 every step overflows and is
// skipped, on every stage, so 30 steps leave the parameters as one step does (where a dynamic
// scale would have come down and updated); at 1024 no step overflows and the stages agree with
// the reference.
TEST(Features, StaticLossScaleSkipsOverflowsAndNeverMoves) {
  TrainConfig config = small_config();
  config.features.precision = DType::F16;
  config.features.loss_scale = {.hysteresis = 1, .static_scale = 1099511627776.0};
  for (const EngineKind engine : {EngineKind::Reference, EngineKind::Zero1, EngineKind::Zero3}) {
    config.steps = 1;
    const auto one = run(config, engine);
    config.steps = 30;
    const auto result = run(config, engine);
    for (const auto& step : result.steps) EXPECT_TRUE(step.skipped) << engine_name(engine);
    EXPECT_FALSE(first_difference("params", result.final_state.params, one.final_state.params));
  }
  config.features.loss_scale.static_scale = 1024.0;
  const auto reference = run(config, EngineKind::Reference);
  for (const auto& step : reference.steps) EXPECT_FALSE(step.skipped);
  for (const EngineKind stage : kStages) {
    EXPECT_FALSE(first_difference(run(config, stage), reference)) << engine_name(stage);
  }
}

// Mixed precision changes the bits (a broken cast would not), and bf16 still learns.
TEST(Features, PrecisionsDifferAndBf16Learns) {
  TrainConfig config;  // the demo's shape, as Equivalence.DemoShapeLearns trains it in fp32
  config.world = 4;
  config.steps = 60;
  config.mlp = {.layers = 3, .width = 64, .in = 16, .classes = 8};
  config.adamw.lr = 3e-3;
  config.engine = EngineKind::Zero2;
  const auto fp32 = train(config);
  config.features.precision = DType::BF16;
  const auto bf16 = train(config);
  EXPECT_TRUE(first_difference(fp32, bf16));
  EXPECT_LT(bf16.steps.back().loss, 0.5f * bf16.steps.front().loss);
  config.features.precision = DType::F16;
  const auto fp16 = train(config);
  EXPECT_TRUE(first_difference(fp16, bf16));
  EXPECT_LT(fp16.steps.back().loss, 0.5f * fp16.steps.front().loss);
}

// Accumulating k micro-batches of B rows is not one micro-batch of kB rows bit for bit, but it is
// close: the same samples, averaged in another order.
TEST(Features, AccumulationSeesTheSameSamplesAsALargerBatch) {
  TrainConfig config = small_config();
  config.world = 1;
  config.engine = EngineKind::Zero3;
  config.micro_batch = 2;
  config.features.grad_accum_steps = 3;
  const auto accumulated = train(config);
  config.micro_batch = 6;
  config.features.grad_accum_steps = 1;
  const auto large = train(config);
  for (std::size_t s = 0; s < large.steps.size(); ++s) {
    EXPECT_NEAR(accumulated.steps[s].loss, large.steps[s].loss, 1e-5) << s;
    EXPECT_NEAR(accumulated.steps[s].grad_norm, large.steps[s].grad_norm,
                1e-5 * large.steps[s].grad_norm)
        << s;
  }
}

// Clipping binds: the norm is reported before clipping and the update is smaller.
TEST(Features, ClippingBindsAndReportsTheUnclippedNorm) {
  TrainConfig config = small_config();
  config.steps = 1;
  config.adamw = {.lr = 0.1, .beta1 = 0.0, .beta2 = 0.0, .eps = 0.0, .weight_decay = 0.0};
  const auto free = run(config, EngineKind::Zero1);
  config.features.grad_clip = 0.5 * free.steps[0].grad_norm;
  const auto clipped = run(config, EngineKind::Zero1);
  EXPECT_EQ(clipped.steps[0].grad_norm, free.steps[0].grad_norm);
  // beta1 = beta2 = 0: the first moment is the (clipped) gradient itself.
  const float unclipped_m = free.final_state.exp_avg[0][0];
  const float clipped_m = clipped.final_state.exp_avg[0][0];
  const double coef = config.features.grad_clip / (free.steps[0].grad_norm + 1e-6);
  EXPECT_NEAR(clipped_m, unclipped_m * coef, 1e-6 * std::abs(unclipped_m));
}

// Buckets split the calls, never the bytes or the bits.
TEST(Features, BucketsSplitCallsNotBytes) {
  TrainConfig config = small_config();
  const auto whole = run(config, EngineKind::Zero3);
  config.features.reduce_bucket_elems = 30;
  config.features.allgather_bucket_elems = 45;
  const auto bucketed = run(config, EngineKind::Zero3);
  EXPECT_FALSE(first_difference(bucketed, whole));
  for (int r = 0; r < config.world; ++r) {
    const TrafficLedger& a = whole.ranks[r].traffic;
    const TrafficLedger& b = bucketed.ranks[r].traffic;
    EXPECT_EQ(b.sent_bytes(), a.sent_bytes());
    EXPECT_EQ(b.recv_bytes(), a.recv_bytes());
    // Units padded to 192 elements: shards of 64, so 30 elements in all is 10 per rank: 7 calls
    // per unit and visit instead of 1; 45 is 15 per rank: 5 calls.
    EXPECT_EQ(b.calls(CollectiveKind::ReduceScatter), 7 * a.calls(CollectiveKind::ReduceScatter));
    EXPECT_GT(b.calls(CollectiveKind::AllGather), a.calls(CollectiveKind::AllGather));
  }
}

// overlap_comm starts each unit's reduction during backward: DDP's all_reduce of unit u comes
// right after unit u's backward, before the backward of the unit below; without it, after all.
TEST(Features, OverlapReducesDuringBackward) {
  TrainConfig config = small_config();
  config.steps = 1;
  config.engine = EngineKind::Ddp;
  auto events_of = [&config](bool overlap) {
    config.features.overlap_comm = overlap;
    std::vector<std::string> events;
    train(config, {}, [&events](int rank, const EngineEvent& event, const MemoryLedger&) {
      if (rank == 0) events.push_back(fmt::format("{} {}", event.phase, event.unit));
    });
    return events;
  };
  const auto overlapped = events_of(true);
  const auto serial = events_of(false);
  const auto at = [](const std::vector<std::string>& events, const std::string& event) {
    return std::find(events.begin(), events.end(), event) - events.begin();
  };
  EXPECT_LT(at(overlapped, "all_reduce 2"), at(overlapped, "backward 1"));
  EXPECT_GT(at(serial, "all_reduce 2"), at(serial, "backward 0"));
  EXPECT_EQ(overlapped.size(), serial.size());
}

// ZeRO-Offload: the master and Adam's moments of the own shard are host memory, the device holds
// none; each applied step copies the gradient shard to the host and the parameters back; the
// results are the same bits.
TEST(Features, OffloadMovesOptimizerStateToTheHost) {
  TrainConfig config = small_config();
  config.engine = EngineKind::Zero2;
  config.features.precision = DType::BF16;
  const auto on_device = train(config);
  config.features.offload_optimizer = true;
  const auto offloaded = train(config);
  EXPECT_FALSE(first_difference(offloaded, on_device));
  for (int r = 0; r < config.world; ++r) {
    const MemoryLedger& device = on_device.ranks[r].memory;
    const MemoryLedger& host = offloaded.ranks[r].memory;
    EXPECT_EQ(host.current_bytes(MemCategory::Master), 0);
    EXPECT_EQ(host.current_bytes(MemCategory::Optimizer), 0);
    EXPECT_EQ(host.current_bytes(MemCategory::HostMaster), device.current_bytes(MemCategory::Master));
    EXPECT_EQ(host.current_bytes(MemCategory::HostOptimizer),
              device.current_bytes(MemCategory::Optimizer));
    EXPECT_EQ(host.current_bytes(MemCategory::Params), device.current_bytes(MemCategory::Params));
    // bf16 shard of every unit down and up once per step.
    std::int64_t shard_bytes = 0;
    for (const auto& unit : offloaded.layout) shard_bytes += 2 * unit.shard_elems;
    EXPECT_EQ(offloaded.ranks[r].traffic.to_host_bytes(), config.steps * shard_bytes);
    EXPECT_EQ(offloaded.ranks[r].traffic.to_device_bytes(), config.steps * shard_bytes);
    EXPECT_EQ(on_device.ranks[r].traffic.to_host_bytes(), 0);
    EXPECT_EQ(offloaded.ranks[r].traffic.sent_bytes(), on_device.ranks[r].traffic.sent_bytes());
  }
}

// ZeRO-3's parameter offload: the own parameter shards are host memory and the device holds
// none; every gather (forward and backward) copies the unit's shard up, every update sends the
// updated shard back; a persistent unit stays on the device; the results are the same bits.
TEST(Features, OffloadParamMovesParameterShardsToTheHost) {
  TrainConfig config = small_config();
  config.engine = EngineKind::Zero3;
  config.features.precision = DType::BF16;
  const auto on_device = train(config);
  config.features.offload_param = true;
  const auto offloaded = train(config);
  EXPECT_FALSE(first_difference(offloaded, on_device));
  std::int64_t shard_bytes = 0;
  for (const auto& unit : offloaded.layout) shard_bytes += 2 * unit.shard_elems;
  for (int r = 0; r < config.world; ++r) {
    const MemoryLedger& device = on_device.ranks[r].memory;
    const MemoryLedger& host = offloaded.ranks[r].memory;
    EXPECT_EQ(host.current_bytes(MemCategory::Params), 0);
    EXPECT_EQ(host.current_bytes(MemCategory::HostParams), device.current_bytes(MemCategory::Params));
    EXPECT_EQ(host.current_bytes(MemCategory::HostParams), shard_bytes);
    EXPECT_EQ(host.peak_bytes(MemCategory::Master), device.peak_bytes(MemCategory::Master));
    const TrafficLedger& traffic = offloaded.ranks[r].traffic;
    EXPECT_EQ(traffic.to_device_bytes(), config.steps * 2 * shard_bytes);  // forward, backward
    EXPECT_EQ(traffic.to_host_bytes(), config.steps * shard_bytes);        // each update
    EXPECT_EQ(traffic.sent_bytes(), on_device.ranks[r].traffic.sent_bytes());
  }
  // With the optimizer offloaded too the update runs where the shards live: no copy back.
  config.features.offload_optimizer = true;
  const auto infinity = train(config);
  EXPECT_FALSE(first_difference(infinity, on_device));
  EXPECT_EQ(infinity.ranks[0].traffic.to_host_bytes(), config.steps * shard_bytes);  // gradients
  EXPECT_EQ(infinity.ranks[0].traffic.to_device_bytes(), config.steps * 2 * shard_bytes);
  // Persistent units stay whole on the device: nothing to copy up or back.
  config.features.offload_optimizer = false;
  config.features.persistence_threshold_elems = 1'000'000;
  const auto persistent = train(config);
  EXPECT_FALSE(first_difference(persistent, on_device));
  EXPECT_EQ(persistent.ranks[0].memory.current_bytes(MemCategory::HostParams), 0);
  EXPECT_EQ(persistent.ranks[0].traffic.to_device_bytes(), 0);
  EXPECT_EQ(persistent.ranks[0].traffic.to_host_bytes(), 0);
}

// For any units and W in 1..8: the sharded norm and the clipped, updated shards equal the
// unsharded ones bit for bit (the padding W adds is zero blocks, and zeros add nothing).
RC_GTEST_PROP(Features, prop_norm_and_clipped_update_are_the_same_for_every_world, ()) {
  const int world = *rc::gen::inRange(1, 9);
  const auto sizes = *rc::gen::container<std::vector<int>>(
      static_cast<std::size_t>(*rc::gen::inRange(1, 4)), rc::gen::inRange(1, 300));
  std::vector<UnitSpec> units;
  for (std::size_t u = 0; u < sizes.size(); ++u) {
    units.push_back({fmt::format("u{}", u), {{fmt::format("u{}.w", u), {sizes[u]}}}});
  }
  std::vector<std::vector<float>> grads;
  for (const int size : sizes) {
    grads.push_back(*rc::gen::container<std::vector<float>>(
        static_cast<std::size_t>(size), rc::gen::map(rc::gen::inRange(-1000, 1001), [](int v) {
          return static_cast<float>(v) / 64.0f;
        })));
  }
  EngineOptions options;
  options.features.grad_clip = *rc::gen::element(0.0, 0.1, 3.0);
  options.adamw.lr = 0.01;
  // Unsharded: one rank holds everything.
  auto update = [&](int w, int rank, double& norm, std::vector<std::vector<float>>& params_out,
                    Comm* comm) {
    CpuDevice device;
    const auto layout = layout_units(units, w);
    UnitBuffers grad_buffers = alloc_units(device, layout, MemCategory::Grads);
    UnitBuffers params = alloc_units(device, layout, MemCategory::Params);
    for (std::size_t u = 0; u < layout.size(); ++u) {
      std::ranges::copy(grads[u], grad_buffers[u].as<float>().begin());
      for (std::int64_t i = 0; i < layout[u].numel; ++i) params[u].as<float>()[i] = 1.0f;
    }
    const auto own_grads = owned_spans(grad_buffers, layout, true, rank, w);
    const auto own_params = owned_spans(params, layout, true, rank, w);
    OptimizerState state = alloc_optimizer(device, layout, options.features, /*shard=*/true);
    const NormPartials partials = unscaled_partials(own_grads, 1.0, device);
    norm = comm ? sharded_grad_norm(*comm, device, layout, partials) : norm_from_partials(partials);
    optimizer_step(norm, 0, own_params, own_grads, state, options, device);
    if (comm) all_gather_params(*comm, params, layout, {}, device);
    params_out.clear();
    for (std::size_t u = 0; u < layout.size(); ++u) {
      const auto real = params[u].as<float>().first(static_cast<std::size_t>(layout[u].numel));
      params_out.emplace_back(real.begin(), real.end());
    }
  };
  double full_norm = 0.0;
  std::vector<std::vector<float>> full_params;
  update(1, 0, full_norm, full_params, nullptr);
  std::vector<double> norms(static_cast<std::size_t>(world));
  std::vector<std::vector<std::vector<float>>> rank_params(static_cast<std::size_t>(world));
  SimWorld(world).run([&](Comm& comm) {
    update(world, comm.rank(), norms[comm.rank()], rank_params[comm.rank()], &comm);
  });
  for (int r = 0; r < world; ++r) {
    RC_ASSERT(std::bit_cast<std::uint64_t>(norms[r]) == std::bit_cast<std::uint64_t>(full_norm));
    if (const auto diff = first_difference("params", rank_params[r], full_params)) RC_FAIL(*diff);
  }
}

}  // namespace
}  // namespace zl
