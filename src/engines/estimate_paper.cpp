// estimate_paper.cpp — the paper's view: each term bytes_per_param * Ψ, or * ceil(Ψ/N) where the
// stage shards it, with its formula.
#include "engines/estimate_paper.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "engines/checked_math.hpp"

namespace zl {

namespace {

// One term: bytes_per_param * Ψ, or bytes_per_param * ceil(Ψ/N) when the stage shards it.
struct Term {
  int bytes_per_param;
  bool sharded;
};

std::int64_t term_bytes(const EstimateConfig& config, Term term) {
  const std::int64_t elems =
      term.sharded ? shard_elems(config.params, config.world) : config.params;
  return term.bytes_per_param * elems;
}

std::string term_formula(Term term) {
  return fmt::format("{}Ψ{}", term.bytes_per_param, term.sharded ? "/N" : "");
}

}  // namespace

std::string_view dtype_name(StateDtype dtype) {
  return dtype == StateDtype::Mixed ? "mixed" : "fp32";
}

StateDtype parse_state_dtype(std::string_view name) {
  if (name == "mixed") return StateDtype::Mixed;
  if (name == "fp32") return StateDtype::Fp32;
  fail("--dtype '{}' is not known: use mixed (2-byte params and grads) or fp32", name);
}

int param_bytes_per_param(StateDtype dtype) {
  return dtype == StateDtype::Mixed ? 2 : 4;
}
int grad_bytes_per_param(StateDtype dtype) {
  return dtype == StateDtype::Mixed ? 2 : 4;
}
int default_optimizer_bytes_per_param(StateDtype dtype) {
  return dtype == StateDtype::Mixed ? 12 : 8;
}

void validate(const EstimateConfig& config) {
  ZL_CHECK(config.params >= 1, "--params {} is invalid: the model needs at least 1 parameter",
           config.params);
  ZL_CHECK(config.world >= 1, "--world {} is invalid: give the number of GPUs, at least 1",
           config.world);
  ZL_CHECK(
      config.optimizer_bytes_per_param >= 1,
      "--optimizer-bytes {} is invalid: give the optimizer state bytes per parameter, at least 1",
      config.optimizer_bytes_per_param);
  // DDP holds every term whole, so it is the largest total; if it fits, every stage fits.
  const std::int64_t bytes_per_param = std::int64_t{param_bytes_per_param(config.dtype)} +
                                       grad_bytes_per_param(config.dtype) +
                                       config.optimizer_bytes_per_param;
  ZL_CHECK(config.params <= kInt64Max / bytes_per_param,
           "{} parameters at {} bytes each overflow int64 bytes: give fewer parameters or a "
           "smaller --optimizer-bytes",
           config.params, bytes_per_param);
}

std::int64_t shard_elems(std::int64_t params, int world) {
  ZL_CHECK(params >= 0 && world >= 1,
           "shard of {} elements over world {}: need params >= 0 and world >= 1", params, world);
  return params / world + (params % world != 0 ? 1 : 0);
}

StageEstimate estimate_stage(const EstimateConfig& config, int stage) {
  validate(config);
  ZL_CHECK(stage >= 0 && stage < kEstimateStages, "stage {} does not exist: use 0 (DDP), 1, 2 or 3",
           stage);
  const Term params{param_bytes_per_param(config.dtype), stage >= 3};
  const Term grads{grad_bytes_per_param(config.dtype), stage >= 2};
  const Term optimizer{config.optimizer_bytes_per_param, stage >= 1};
  return StageEstimate{
      .stage = stage,
      .params_bytes = term_bytes(config, params),
      .grads_bytes = term_bytes(config, grads),
      .optimizer_bytes = term_bytes(config, optimizer),
      .formula = fmt::format("{} + {} + {}", term_formula(params), term_formula(grads),
                             term_formula(optimizer)),
  };
}

std::vector<StageEstimate> estimate_stages(const EstimateConfig& config) {
  std::vector<StageEstimate> stages;
  for (int stage = 0; stage < kEstimateStages; ++stage)
    stages.push_back(estimate_stage(config, stage));
  return stages;
}

}  // namespace zl
