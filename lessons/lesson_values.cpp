// lesson_values.cpp — each rank's numbers at the last step, from the engines' own pieces.
#include "lesson_values.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "comm/reduce.hpp"
#include "core/error.hpp"
#include "engines/micro_batch.hpp"
#include "engines/typed_span.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "optim/grad_norm.hpp"
#include "run/data_source.hpp"
#include "run/rank_model.hpp"

namespace zl::lessons {

namespace {

// `unpadded` followed by zeros up to `padded_elems`.
std::vector<float> padded(const std::vector<float>& unpadded, std::int64_t padded_elems) {
  std::vector<float> out(static_cast<std::size_t>(padded_elems), 0.0f);
  std::ranges::copy(unpadded, out.begin());
  return out;
}

// `values` rounded to `dtype` and widened back (exact): what a buffer of that dtype holds.
std::vector<float> as_dtype(CpuDevice& device, const std::vector<float>& values, DType dtype) {
  Buffer rounded =
      device.alloc(MemCategory::Params, dtype, {static_cast<std::int64_t>(values.size())});
  round_into(device, values, view_of(rounded));
  std::vector<float> out(values.size());
  widen(device, view_of(rounded), out);
  return out;
}

// The unpadded fp32 parameters the last of config.steps steps starts from: the master under mixed
// precision, which the engines widen from the 16-bit init and the run's final state holds.
std::vector<std::vector<float>> params_before_last_step(const TrainConfig& config,
                                                        CpuDevice& device) {
  if (config.steps == 1) {
    std::vector<std::vector<float>> init = initial_params(config);
    for (auto& unit : init) unit = as_dtype(device, unit, config.features.precision);
    return init;
  }
  TrainConfig shorter = config;
  shorter.steps = config.steps - 1;
  shorter.record_timeline = false;
  return train(shorter).final_state.params;
}

// Rank `rank`'s gradient of every unit (padded, widened to float) for its micro-batch of step
// `step`, computed by run_micro_batch as the engines compute it, from the padded parameters
// `params` (values of the training dtype).
std::vector<std::vector<float>> local_grads(const TrainConfig& config,
                                            const std::vector<UnitLayout>& layout,
                                            const std::vector<std::vector<float>>& params,
                                            std::int64_t step, int rank) {
  CpuDevice device;
  const DType precision = config.features.precision;
  const NamedTensors init = init_tensors(config);
  RankModel model(device, config, init);
  std::vector<Buffer> buffers;
  for (std::size_t u = 0; u < layout.size(); ++u) {
    buffers.push_back(device.alloc(MemCategory::Params, precision, {layout[u].padded_elems}));
    round_into(device, params[u], view_of(buffers.back()));
  }
  std::vector<std::vector<float>> grads(layout.size());
  MicroBatchHooks hooks;
  hooks.params = [&](int u, bool) { return UnitParams{view_of(buffers[u]), {}}; };
  hooks.grad_ready = [&](int u, TypedSpan grad) {
    grads[u].resize(static_cast<std::size_t>(grad.elems));
    widen(device, grad, grads[u]);
  };
  const BatchFn batch = batch_source(config, 0, 0, nullptr);
  Buffer loss_sum = device.alloc(MemCategory::CommBuffer, DType::F32, {1});  // not shown
  run_micro_batch(model.get(), batch(step, rank), layout, precision, 1.0f, hooks, {}, device,
                  loss_sum.as<float>());
  return grads;
}

// The rank-order average of `grads` in `dtype`, as every collective averages (comm/reduce.hpp),
// widened to float.
std::vector<float> rank_order_average(CpuDevice& device,
                                      const std::vector<std::vector<float>>& grads, DType dtype) {
  const auto elems = static_cast<std::int64_t>(grads.front().size());
  std::vector<Buffer> inputs;
  std::vector<const void*> pointers;
  for (const auto& grad : grads) {
    inputs.push_back(device.alloc(MemCategory::Grads, dtype, {elems}));
    round_into(device, grad, view_of(inputs.back()));
    pointers.push_back(inputs.back().data());
  }
  Buffer average = device.alloc(MemCategory::Grads, dtype, {elems});
  reduce_rank_order(pointers, average.data(), static_cast<std::size_t>(elems), dtype,
                    ReduceOp::Avg);
  std::vector<float> out(static_cast<std::size_t>(elems));
  widen(device, view_of(average), out);
  return out;
}

}  // namespace

StepValues step_values(const TrainConfig& config, const TrainResult& result) {
  const DType precision = config.features.precision;
  ZL_CHECK((precision == DType::F32 || precision == DType::BF16) &&
               config.features.grad_accum_steps == 1,
           "the lessons show the values of fp32 and bf16 runs without accumulation only");
  const bool mixed = precision != DType::F32;
  CpuDevice device;
  StepValues values;
  values.layout = result.layout;
  const auto before = params_before_last_step(config, device);
  const std::size_t units = result.layout.size();
  std::vector<std::vector<float>> computed_with;
  for (std::size_t u = 0; u < units; ++u) {
    computed_with.push_back(
        as_dtype(device, padded(before[u], result.layout[u].padded_elems), precision));
  }
  std::vector<std::vector<std::vector<float>>> per_rank;
  for (int r = 0; r < config.world; ++r) {
    per_rank.push_back(local_grads(config, result.layout, computed_with, config.steps - 1, r));
  }
  std::vector<double> unit_sums;
  for (std::size_t u = 0; u < units; ++u) {
    const std::int64_t elems = result.layout[u].padded_elems;
    UnitValues unit;
    unit.params_before = computed_with[u];
    for (int r = 0; r < config.world; ++r) {
      unit.local_grads.push_back(per_rank[static_cast<std::size_t>(r)][u]);
    }
    unit.averaged = rank_order_average(device, unit.local_grads, precision);
    std::vector<double> partials;
    append_block_sumsq(unit.averaged, partials);
    unit_sums.push_back(tree_sum(partials));
    unit.params_after = padded(result.final_state.params[u], elems);
    if (mixed) {
      unit.master_before = padded(before[u], elems);
      unit.master_after = unit.params_after;
      unit.params_after = as_dtype(device, unit.master_after, precision);
    }
    unit.exp_avg = padded(result.final_state.exp_avg[u], elems);
    unit.exp_avg_sq = padded(result.final_state.exp_avg_sq[u], elems);
    values.units.push_back(std::move(unit));
  }
  values.grad_norm = norm_from_unit_sums(unit_sums);
  return values;
}

bool check_values(const StepValues& values, const TrainResult& result) {
  const double run_norm = result.steps.back().grad_norm;
  const bool same = values.grad_norm == run_norm;
  fmt::print("{}: the averaged gradients shown have the run's gradient norm {:.9g} {}\n",
             same ? "ok" : "MISMATCH", run_norm,
             same ? "bit for bit: they are the engine's"
                  : fmt::format("(they give {:.9g})", values.grad_norm));
  return same;
}

std::string slice_text(std::span<const float> values, ShardRange range) {
  std::string text = fmt::format("{:<14}", fmt::format("[{}, {})", range.begin, range.end));
  const auto show = [&](std::int64_t i) {
    text += fmt::format(" {:>+10.3g}", values[static_cast<std::size_t>(i)]);
  };
  if (range.size() <= 5) {
    for (std::int64_t i = range.begin; i < range.end; ++i) show(i);
    return text;
  }
  for (std::int64_t i = range.begin; i < range.begin + 3; ++i) show(i);
  text += " …";
  show(range.end - 1);
  return text;
}

void print_shards(std::string_view what, const std::vector<float>& values, const UnitLayout& unit,
                  int world) {
  for (int r = 0; r < world; ++r) {
    fmt::print("  rank {} {:<12} {}\n", r, what, slice_text(values, shard_of(unit, r, world)));
  }
}

void print_local_grads(const UnitValues& values, const UnitLayout& unit, int world) {
  fmt::print("{}'s gradient on each rank, from its own rows (they differ):\n", unit.name);
  const ShardRange whole{0, unit.padded_elems};
  for (int r = 0; r < world; ++r) {
    fmt::print("  rank {} grads  {}\n", r,
               slice_text(values.local_grads[static_cast<std::size_t>(r)], whole));
  }
}

void print_update(const UnitValues& values, const UnitLayout& unit, int world) {
  if (!values.master_before.empty()) {
    print_shards("master was", values.master_before, unit, world);
    print_shards("master now", values.master_after, unit, world);
    print_shards("params now", values.params_after, unit, world);
  } else {
    print_shards("params was", values.params_before, unit, world);
    print_shards("params now", values.params_after, unit, world);
  }
  print_shards("m", values.exp_avg, unit, world);
  print_shards("v", values.exp_avg_sq, unit, world);
}

void print_reduce_scatter(const UnitValues& values, const UnitLayout& unit, int world) {
  for (int owner = 0; owner < world; ++owner) {
    const ShardRange shard = shard_of(unit, owner, world);
    fmt::print("  rank {}'s shard {}:\n", owner, fmt::format("[{}, {})", shard.begin, shard.end));
    for (int r = 0; r < world; ++r) {
      fmt::print("    rank {} sends      {}\n", r,
                 slice_text(values.local_grads[static_cast<std::size_t>(r)], shard));
    }
    fmt::print("    rank {} receives   {}   (the sum / {})\n", owner,
               slice_text(values.averaged, shard), world);
  }
}

}  // namespace zl::lessons
