// ledger_estimate_test.cpp — the engines' view of estimate.hpp (LedgerEstimate) against closed
// forms computed here from each unit's padded size, not with the estimator's helpers: every stage
// in fp32, bf16 and fp16, gradient accumulation, ZeRO-3 persistence; GPT-2's parameter counts and
// the 124M numbers typed in by hand.
//   per rank, Ψp = Σ padded units, S = Ψp/N, p = 4 (fp32) or 2 (bf16, fp16):
//     stage   params          grads (+ accumulator when k > 1)   master (16-bit)   optimizer
//     0 DDP   pΨp             pΨp (+ pΨp)                        4Ψp               8Ψp
//     1       pΨp             pΨp (+ pS)                         4S                8S
//     2       pΨp             pS                                 4S                8S
//     3       p(S + Σw)       pS                                 4S                8S
//   Σw: for each persistent unit (numel < threshold), padded - padded/N: the rest of the unit.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "engines/estimate.hpp"

namespace zl {
namespace {

// numel rounded up to a multiple of N * 64, at least one block per rank (partition.hpp's rule).
std::int64_t padded(std::int64_t numel, int world) {
  const std::int64_t multiple = std::int64_t{world} * 64;
  return std::max<std::int64_t>(1, (numel + multiple - 1) / multiple) * multiple;
}

// One unit per element count, each a single vector parameter.
std::vector<UnitSpec> units_of(const std::vector<std::int64_t>& numels) {
  std::vector<UnitSpec> units;
  for (std::size_t u = 0; u < numels.size(); ++u) {
    units.push_back({fmt::format("u{}", u), {{fmt::format("u{}.weight", u), {numels[u]}}}});
  }
  return units;
}

struct Bytes {
  std::int64_t params, grads, master, optimizer;
  std::int64_t total() const { return params + grads + master + optimizer; }
};

// The table at the top of this file, unit by unit.
Bytes closed_form(const std::vector<std::int64_t>& numels, int world, DType precision,
                  std::int64_t accum, std::int64_t threshold, int stage) {
  const std::int64_t p = precision == DType::F32 ? 4 : 2;
  std::int64_t psi_p = 0, rest_of_persistent = 0;
  for (const std::int64_t numel : numels) {
    psi_p += padded(numel, world);
    if (numel < threshold)
      rest_of_persistent += padded(numel, world) - padded(numel, world) / world;
  }
  const std::int64_t s = psi_p / world;
  const std::int64_t accumulator = accum > 1 ? (stage == 0 ? psi_p : stage == 1 ? s : 0) : 0;
  return Bytes{
      .params = p * (stage < 3 ? psi_p : s + rest_of_persistent),
      .grads = p * ((stage < 2 ? psi_p : s) + accumulator),
      .master = precision == DType::F32 ? 0 : 4 * (stage == 0 ? psi_p : s),
      .optimizer = 8 * (stage == 0 ? psi_p : s),
  };
}

void expect_bytes(const LedgerEstimate& got, const Bytes& want) {
  EXPECT_EQ(got.params_bytes, want.params);
  EXPECT_EQ(got.grads_bytes, want.grads);
  EXPECT_EQ(got.master_bytes, want.master);
  EXPECT_EQ(got.optimizer_bytes, want.optimizer);
  EXPECT_EQ(got.total_bytes(), want.total());
}

EstimateOptions options(DType precision, std::int64_t accum = 1, std::int64_t threshold = 0) {
  return {
      .precision = precision, .grad_accum_steps = accum, .persistence_threshold_elems = threshold};
}

constexpr DType kPrecisions[] = {DType::F32, DType::BF16, DType::F16};

RC_GTEST_PROP(LedgerEstimate, prop_every_stage_is_the_closed_form, ()) {
  const auto numels = *rc::gen::container<std::vector<std::int64_t>>(
      *rc::gen::inRange<std::size_t>(1, 7), rc::gen::inRange<std::int64_t>(1, 5000));
  const int world = *rc::gen::inRange(1, 9);
  const DType precision =
      *rc::gen::elementOf(std::vector<DType>{DType::F32, DType::BF16, DType::F16});
  const std::int64_t accum = *rc::gen::element<std::int64_t>(1, 2, 4);
  const std::int64_t threshold = *rc::gen::element<std::int64_t>(0, 100, 1000, 6000);
  const EstimateOptions opts = options(precision, accum, threshold);
  const StateElems elems = state_elems(units_of(numels), world, opts);
  for (int stage = 0; stage < kEstimateStages; ++stage) {
    const LedgerEstimate got = estimate_ledger(elems, opts, stage);
    const Bytes want = closed_form(numels, world, precision, accum, threshold, stage);
    RC_ASSERT(got.stage == stage);
    RC_ASSERT(got.params_bytes == want.params);
    RC_ASSERT(got.grads_bytes == want.grads);
    RC_ASSERT(got.master_bytes == want.master);
    RC_ASSERT(got.optimizer_bytes == want.optimizer);
  }
}

// The memory wall's bisection finds the edge: the largest Ψ fits its budgets and one more does
// not, at every stage, placement, precision and world.
RC_GTEST_PROP(LedgerEstimate, prop_the_largest_fitting_model_is_the_edge, ()) {
  const int world = *rc::gen::inRange(1, 65);
  EstimateOptions opts;
  opts.precision = *rc::gen::elementOf(std::vector<DType>{DType::F32, DType::BF16, DType::F16});
  opts.grad_accum_steps = *rc::gen::element<std::int64_t>(1, 4);
  opts.optimizer_tier = *rc::gen::element(OffloadTier::None, OffloadTier::Cpu, OffloadTier::Nvme);
  opts.param_tier = opts.optimizer_tier == OffloadTier::None
                        ? *rc::gen::element(OffloadTier::None, OffloadTier::Cpu)
                        : *rc::gen::element(OffloadTier::None, OffloadTier::Cpu, OffloadTier::Nvme);
  const PlaceBudget budget{.device_bytes = *rc::gen::inRange<std::int64_t>(1, 1'000'000'000'000),
                           .host_bytes = *rc::gen::inRange<std::int64_t>(1, 1'000'000'000'000),
                           .disk_bytes = *rc::gen::inRange<std::int64_t>(1, 1'000'000'000'000)};
  const auto fits = [&](std::int64_t params, int stage) {
    const LedgerEstimate ledger = estimate_ledger(state_elems(params, world), opts, stage);
    return ledger.total_bytes() <= budget.device_bytes &&
           ledger.host_bytes() <= budget.host_bytes && ledger.disk_bytes() <= budget.disk_bytes;
  };
  for (int stage = 0; stage < kEstimateStages; ++stage) {
    const std::int64_t largest = largest_fitting_params(world, opts, stage, budget);
    RC_ASSERT(largest >= 0);
    if (largest > 0) RC_ASSERT(fits(largest, stage));
    RC_ASSERT(!fits(largest + 1, stage));
  }
}

// 16 GPUs of 32 GB with 96 GB of host memory and 1,750 GB of disk each, bf16: ZeRO-3 fits
// 32e9 · 16 / 16 parameters on the device alone (16Ψ/N); the optimizer offloaded leaves 4Ψ/N on the
// device (128e9, where the host's 12Ψ/N also just fits); parameters on the host too make the host
// hold 14Ψ/N (96e9 / 14 a rank: 109,714,285,712); with the optimizer on NVMe the device keeps the
// gradients' 2Ψ/N alone (256e9). A small disk stops the NVMe placement instead, and a small host
// stops the parameters in host memory, not on NVMe.
TEST(LedgerEstimate, TheMemoryWallByHand) {
  EstimateOptions opts;
  opts.precision = DType::BF16;
  const PlaceBudget node{.device_bytes = 32'000'000'000,
                         .host_bytes = 96'000'000'000,
                         .disk_bytes = 1'750'000'000'000};
  const auto largest = [&](OffloadTier optimizer, OffloadTier param, const PlaceBudget& budget) {
    opts.optimizer_tier = optimizer;
    opts.param_tier = param;
    return largest_fitting_params(16, opts, 3, budget);
  };
  EXPECT_EQ(largest(OffloadTier::None, OffloadTier::None, node), 32'000'000'000);
  EXPECT_EQ(largest(OffloadTier::Cpu, OffloadTier::None, node), 128'000'000'000);
  EXPECT_EQ(largest(OffloadTier::Cpu, OffloadTier::Cpu, node), 109'714'285'712);
  EXPECT_EQ(largest(OffloadTier::Nvme, OffloadTier::Cpu, node), 256'000'000'000);
  PlaceBudget small_disk = node;
  small_disk.disk_bytes = 120'000'000'000;  // 12Ψ/N: 10e9 a rank, 160e9 in all
  EXPECT_EQ(largest(OffloadTier::Nvme, OffloadTier::Cpu, small_disk), 160'000'000'000);
  // the parameters on NVMe too: the small disk holds 14Ψ/N (120e9 / 14 a rank), and a host of
  // 1 GB, which held the parameters' 2Ψ/N on the host (8e9 in all), holds nothing
  EXPECT_EQ(largest(OffloadTier::Nvme, OffloadTier::Nvme, small_disk), 137'142'857'136);
  PlaceBudget small_host = node;
  small_host.host_bytes = 1'000'000'000;
  EXPECT_EQ(largest(OffloadTier::Nvme, OffloadTier::Cpu, small_host), 8'000'000'000);
  EXPECT_EQ(largest(OffloadTier::Nvme, OffloadTier::Nvme, small_host), 256'000'000'000);
  opts.precision = DType::F32;  // 4Ψ + 4Ψ + 8Ψ, and offloaded a 4Ψ master
  EXPECT_EQ(largest(OffloadTier::None, OffloadTier::None, node), 32'000'000'000);
  EXPECT_EQ(largest(OffloadTier::Cpu, OffloadTier::None, node), 64'000'000'000);  // 8Ψ/N
}

// Units of 100, 300 and 64 elements on N = 2 pad to multiples of 128: 128 + 384 + 128 = 640.
TEST(LedgerEstimate, PaddedUnitsByHand) {
  const auto units = units_of({100, 300, 64});
  const StateElems elems = state_elems(units, 2, options(DType::BF16));
  EXPECT_EQ(elems.params, 464);
  EXPECT_EQ(elems.replica_elems, 640);
  EXPECT_EQ(elems.padding_elems(), 176);
  EXPECT_EQ(elems.shard_elems, 320);
  EXPECT_EQ(elems.units, 3);
  EXPECT_EQ(elems.persistent_units, 0);
  const auto stages = estimate_ledgers(elems, options(DType::BF16));
  ASSERT_EQ(stages.size(), 4u);
  expect_bytes(stages[0], {1280, 1280, 2560, 5120});  // 16Ψp = 10240
  expect_bytes(stages[1], {1280, 1280, 1280, 2560});  // 4Ψp + 12Ψp/N = 6400
  expect_bytes(stages[2], {1280, 640, 1280, 2560});   // 2Ψp + 14Ψp/N = 5760
  expect_bytes(stages[3], {640, 640, 1280, 2560});    // 16Ψp/N = 5120
  // Threshold 101: the units of 100 and 64 elements stay whole at ZeRO-3 (128 + 128 of them).
  const StateElems persistent = state_elems(units, 2, options(DType::BF16, 1, 101));
  EXPECT_EQ(persistent.persistent_units, 2);
  EXPECT_EQ(persistent.persistent_elems, 256);
  expect_bytes(estimate_ledger(persistent, options(DType::BF16, 1, 101), 3),
               {2 * (320 - 128 + 256), 640, 1280, 2560});
}

// DeepSpeed's mixed-precision accounting on a bare Ψ = 7e9, N = 8: 2Ψ + 2Ψ + 4Ψ + 8Ψ.
TEST(LedgerEstimate, Mixed7BIsDeepSpeeds16Psi) {
  const StateElems elems = state_elems(7'000'000'000, 8);
  EXPECT_FALSE(elems.padded());
  EXPECT_EQ(elems.shard_elems, 875'000'000);
  for (const DType precision : {DType::BF16, DType::F16}) {
    const auto stages = estimate_ledgers(elems, options(precision));
    expect_bytes(stages[0], {14'000'000'000, 14'000'000'000, 28'000'000'000, 56'000'000'000});
    expect_bytes(stages[1], {14'000'000'000, 14'000'000'000, 3'500'000'000, 7'000'000'000});
    expect_bytes(stages[2], {14'000'000'000, 1'750'000'000, 3'500'000'000, 7'000'000'000});
    expect_bytes(stages[3], {1'750'000'000, 1'750'000'000, 3'500'000'000, 7'000'000'000});
    EXPECT_EQ(stages[0].total_bytes(), 112'000'000'000);  // 16Ψ
    EXPECT_EQ(stages[1].total_bytes(), 38'500'000'000);   // 4Ψ + 12Ψ/N
    EXPECT_EQ(stages[2].total_bytes(), 26'250'000'000);   // 2Ψ + 14Ψ/N
    EXPECT_EQ(stages[3].total_bytes(), 14'000'000'000);   // 16Ψ/N
  }
}

// fp32: 4Ψ + 4Ψ + 8Ψ, no master copy: 16Ψ, 8Ψ + 8Ψ/N, 4Ψ + 12Ψ/N, 16Ψ/N.
TEST(LedgerEstimate, Fp327BHasNoMasterCopy) {
  const auto stages = estimate_ledgers(state_elems(7'000'000'000, 8), options(DType::F32));
  expect_bytes(stages[0], {28'000'000'000, 28'000'000'000, 0, 56'000'000'000});
  expect_bytes(stages[1], {28'000'000'000, 28'000'000'000, 0, 7'000'000'000});
  expect_bytes(stages[2], {28'000'000'000, 3'500'000'000, 0, 7'000'000'000});
  expect_bytes(stages[3], {3'500'000'000, 3'500'000'000, 0, 7'000'000'000});
  EXPECT_EQ(stages[1].total_bytes(), 63'000'000'000);
}

TEST(LedgerEstimate, FormulasNameThePaddingAndThePersistentUnits) {
  const auto bare = estimate_ledgers(state_elems(7'000'000'000, 8), options(DType::BF16));
  EXPECT_EQ(bare[0].formula, "2Ψ + 2Ψ + 4Ψ + 8Ψ");
  EXPECT_EQ(bare[0].total_formula, "16Ψ");
  EXPECT_EQ(bare[1].total_formula, "4Ψ + 12Ψ/N");
  EXPECT_EQ(bare[2].formula, "2Ψ + 2Ψ/N + 4Ψ/N + 8Ψ/N");
  EXPECT_EQ(bare[2].total_formula, "2Ψ + 14Ψ/N");
  EXPECT_EQ(bare[3].total_formula, "16Ψ/N");
  const auto fp32 = estimate_ledgers(state_elems(7'000'000'000, 8), options(DType::F32, 4));
  EXPECT_EQ(fp32[0].formula, "4Ψ + (4Ψ + 4Ψ) + 8Ψ");
  EXPECT_EQ(fp32[0].total_formula, "20Ψ");
  EXPECT_EQ(fp32[1].formula, "4Ψ + (4Ψ + 4Ψ/N) + 8Ψ/N");
  EXPECT_EQ(fp32[1].total_formula, "8Ψ + 12Ψ/N");
  EXPECT_EQ(fp32[2].formula, "4Ψ + 4Ψ/N + 8Ψ/N");
  const EstimateOptions persist = options(DType::BF16, 1, 101);
  const auto units = estimate_ledgers(state_elems(units_of({100, 300, 64}), 2, persist), persist);
  EXPECT_EQ(units[1].total_formula, "4Ψp + 12Ψp/N");
  EXPECT_EQ(units[3].formula, "2(Ψp - Ψw)/N + 2Ψw + 2Ψp/N + 4Ψp/N + 8Ψp/N");
  EXPECT_EQ(units[3].total_formula, "16Ψp/N + 2Ψw(N-1)/N");
}

// A unit persists when it has fewer elements than the threshold, not as many.
TEST(LedgerEstimate, PersistenceMovesAUnitFromShardToWhole) {
  const std::vector<std::int64_t> numels = {1000, 5000, 70};
  const int world = 4;  // 1000 pads to 1024, 70 to 256
  for (const DType precision : kPrecisions) {
    SCOPED_TRACE(dtype_name(precision));
    const std::int64_t p = precision == DType::F32 ? 4 : 2;
    const auto at = [&](std::int64_t threshold) {
      const EstimateOptions opts = options(precision, 1, threshold);
      return estimate_ledgers(state_elems(units_of(numels), world, opts), opts);
    };
    const auto none = at(0);
    const auto small = at(1000);  // only the unit of 70
    const auto two = at(1001);    // and the unit of 1000
    for (int stage = 0; stage < 3; ++stage) {
      EXPECT_EQ(small[stage].total_bytes(), none[stage].total_bytes());
      EXPECT_EQ(two[stage].total_bytes(), none[stage].total_bytes());
    }
    EXPECT_EQ(small[3].params_bytes - none[3].params_bytes, p * (256 - 256 / world));
    EXPECT_EQ(two[3].params_bytes - small[3].params_bytes, p * (1024 - 1024 / world));
    EXPECT_EQ(two[3].grads_bytes, none[3].grads_bytes);
    EXPECT_EQ(two[3].optimizer_bytes, none[3].optimizer_bytes);
    for (int stage = 0; stage < kEstimateStages; ++stage) {
      expect_bytes(two[stage], closed_form(numels, world, precision, 1, 1001, stage));
    }
    // Every unit whole: ZeRO-3's parameters are DDP's.
    EXPECT_EQ(at(5001)[3].params_bytes, none[0].params_bytes);
  }
  const EstimateOptions opts = options(DType::F32, 1, 1001);
  const StateElems elems = state_elems(units_of(numels), world, opts);
  EXPECT_EQ(elems.persistent_units, 2);
  EXPECT_EQ(elems.persistent_elems, 1024 + 256);
}

// DDP adds a whole accumulator, ZeRO-1 a shard; ZeRO-2 and -3 add into their gradient shard.
TEST(LedgerEstimate, AccumulationAddsAnAccumulatorToDdpAndZero1Only) {
  const std::vector<std::int64_t> numels = {100, 300, 64};  // Ψp = 640 on N = 2, S = 320
  for (const DType precision : kPrecisions) {
    SCOPED_TRACE(dtype_name(precision));
    const std::int64_t p = precision == DType::F32 ? 4 : 2;
    const auto one =
        estimate_ledgers(state_elems(units_of(numels), 2, options(precision)), options(precision));
    for (const std::int64_t accum : {2, 8}) {
      const auto many = estimate_ledgers(
          state_elems(units_of(numels), 2, options(precision, accum)), options(precision, accum));
      const std::int64_t extra[] = {p * 640, p * 320, 0, 0};
      for (int stage = 0; stage < kEstimateStages; ++stage) {
        EXPECT_EQ(many[stage].grad_accum_bytes, extra[stage]) << "stage " << stage;
        EXPECT_EQ(many[stage].grads_bytes, one[stage].grads_bytes + extra[stage]);
        EXPECT_EQ(many[stage].total_bytes(), one[stage].total_bytes() + extra[stage]);
        EXPECT_EQ(one[stage].grad_accum_bytes, 0);
      }
    }
  }
}

// Hugging Face's gpt2: 124,439,808 parameters in 14 units (embeddings, 12 blocks, ln_f); wte
// padded from 50,257 to 50,304 rows in memory.
TEST(LedgerEstimate, Gpt124M) {
  const auto units = checked_units(gpt_preset("124M"));
  const StateElems elems = state_elems(units, 8, options(DType::BF16));
  EXPECT_EQ(elems.params, 124'439'808);
  EXPECT_EQ(elems.units, 14);
  // wte's 47 padded rows are 36,096 elements. On N = 8 units pad to multiples of 512: the
  // embeddings ((50,304 + 1,024) * 768 = 39,419,904) need nothing, each block (7,087,872) gains
  // 256 elements, ln_f (1,536) none: 36,096 + 12 * 256 = 39,168.
  EXPECT_EQ(elems.padded_row_elems, 36'096);
  EXPECT_EQ(elems.padding_elems(), 39'168);
  EXPECT_EQ(elems.replica_elems, 124'478'976);
  EXPECT_EQ(elems.shard_elems, 15'559'872);
  const auto padded_stages = estimate_ledgers(elems, options(DType::BF16));
  const auto bare_stages = estimate_ledgers(state_elems(124'439'808, 8), options(DType::BF16));
  // 16Ψ, 4Ψ + 12Ψ/N, 2Ψ + 14Ψ/N, 16Ψ/N on Ψ = 124,439,808 ...
  const std::int64_t bare[] = {1'991'036'928, 684'418'944, 466'649'280, 248'879'616};
  // ... and on Ψp = 124,478,976: 16 * 39,168 = 626,688 more for DDP.
  const std::int64_t with_padding[] = {1'991'663'616, 684'634'368, 466'796'160, 248'957'952};
  for (int stage = 0; stage < kEstimateStages; ++stage) {
    EXPECT_EQ(bare_stages[stage].total_bytes(), bare[stage]) << "stage " << stage;
    EXPECT_EQ(padded_stages[stage].total_bytes(), with_padding[stage]) << "stage " << stage;
  }
  // DeepSpeed's default threshold, 1e5: ln_f (1,536 elements) stays whole, 2 * 1,536 * 7/8 more.
  const StateElems persistent = state_elems(units, 8, options(DType::BF16, 1, 100'000));
  EXPECT_EQ(persistent.persistent_units, 1);
  EXPECT_EQ(persistent.persistent_elems, 1'536);
  EXPECT_EQ(estimate_ledger(persistent, options(DType::BF16, 1, 100'000), 3).total_bytes(),
            248'957'952 + 2'688);
}

// Hugging Face's gpt2-medium: 354,823,168 parameters.
TEST(LedgerEstimate, Gpt350MParamCount) {
  EXPECT_EQ(state_elems(checked_units(gpt_preset("350M")), 1, {}).params, 354'823'168);
}

TEST(LedgerEstimate, BadInputsFailWithOneLine) {
  const auto one_line = [](const auto& call) {
    try {
      call();
      ADD_FAILURE() << "no error";
    } catch (const Error& error) {
      EXPECT_EQ(std::string(error.what()).find('\n'), std::string::npos) << error.what();
    }
  };
  const auto units = units_of({10});
  one_line([&] { state_elems(units, 1, options(DType::F64)); });
  one_line([&] { state_elems(units, 1, options(DType::F32, 0)); });
  one_line([&] { state_elems(units, 1, options(DType::F32, 1, -1)); });
  one_line([&] { state_elems(units, 0, options(DType::F32)); });
  one_line([&] { state_elems({}, 1, options(DType::F32)); });
  one_line([&] { state_elems(0, 8); });
  one_line([&] { state_elems(8, 0); });
  one_line([&] { estimate_ledger(state_elems(8, 1), options(DType::F32), 4); });
  one_line([&] { estimate_ledger(state_elems(8, 1), {.optimizer_bytes_per_param = 0}, 0); });
  // 2^62 parameters at 16 bytes each do not fit int64.
  one_line(
      [&] { estimate_ledger(state_elems(std::int64_t{1} << 62, 1), options(DType::BF16), 0); });
  one_line([&] { checked_units(GptConfig{.n_layer = 2'000'000}); });
  one_line([&] { checked_units(GptConfig{.n_embd = 4'000'000'000, .vocab = 4'000'000'000}); });
  one_line([&] { checked_units(MlpConfig{.layers = 2'000'000}); });
}

TEST(LedgerEstimate, OptionsFromTrainingFeatures) {
  TrainingFeatures features;
  features.precision = DType::F16;
  features.grad_accum_steps = 3;
  features.persistence_threshold_elems = 777;
  const EstimateOptions opts = estimate_options(features);
  EXPECT_EQ(opts.precision, DType::F16);
  EXPECT_EQ(opts.grad_accum_steps, 3);
  EXPECT_EQ(opts.persistence_threshold_elems, 777);
  EXPECT_EQ(opts.optimizer_bytes_per_param, 8);
  EXPECT_EQ(EstimateOptions{}.persistence_threshold_elems,
            TrainingFeatures{}.persistence_threshold_elems);
}

}  // namespace
}  // namespace zl
