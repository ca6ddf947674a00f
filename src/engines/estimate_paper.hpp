// estimate_paper.hpp — the paper's view of per-GPU model-state memory (ZeRO paper, §3 and
// Figure 1): Ψ parameters, N ranks, params + grads + K optimizer bytes per parameter (mixed:
// 2Ψ + 2Ψ + 12Ψ; fp32: 4Ψ + 4Ψ + 8Ψ), a stage dividing what it shards by N, a shard being
// ceil(Ψ/N) elements (EstimateConfig -> StageEstimate). estimate.hpp adds the engines' view.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zl {

// ---- The paper's view: Ψ, N and K --------------------------------------------------------------

/// Number formats of the model states in the paper's view.
enum class StateDtype {
  Mixed,  ///< fp16/bf16 params and grads, fp32 optimizer state (default K = 12)
  Fp32,   ///< fp32 params and grads, fp32 Adam moments (default K = 8)
};

/// "mixed" or "fp32".
std::string_view dtype_name(StateDtype dtype);
/// Parses "mixed" or "fp32"; throws zl::Error naming the accepted values otherwise.
StateDtype parse_state_dtype(std::string_view name);

/// Bytes per parameter of the parameters (2 mixed, 4 fp32).
int param_bytes_per_param(StateDtype dtype);
/// Bytes per parameter of the gradients (2 mixed, 4 fp32).
int grad_bytes_per_param(StateDtype dtype);
/// K, the optimizer bytes per parameter when not overridden (12 mixed, 8 fp32).
int default_optimizer_bytes_per_param(StateDtype dtype);

/// What the paper's estimate is for.
struct EstimateConfig {
  std::int64_t params = 0;               ///< Ψ, parameters of the whole model
  int world = 1;                         ///< N, data-parallel ranks
  StateDtype dtype = StateDtype::Mixed;  ///< sets the bytes of params and grads (2 or 4 each)
  int optimizer_bytes_per_param = 12;    ///< K
};

/// Throws zl::Error with a one-line message if Ψ, N or K is < 1 or DDP's bytes overflow int64.
void validate(const EstimateConfig& config);

/// Model-state bytes on one rank at one stage, in the paper's view (K counts the master copy).
struct StageEstimate {
  int stage = 0;                     ///< 0 (DDP), 1, 2 or 3
  std::int64_t params_bytes = 0;     ///< 2Ψ (mixed) or 4Ψ; Ψ becomes ceil(Ψ/N) at stage 3
  std::int64_t grads_bytes = 0;      ///< 2Ψ (mixed) or 4Ψ; Ψ becomes ceil(Ψ/N) at stages 2, 3
  std::int64_t optimizer_bytes = 0;  ///< KΨ; Ψ becomes ceil(Ψ/N) at stages 1, 2 and 3
  std::string formula;               ///< e.g. "2Ψ + 2Ψ + 12Ψ/N"
  /// params + grads + optimizer.
  std::int64_t total_bytes() const { return params_bytes + grads_bytes + optimizer_bytes; }
};

/// Number of ZeRO stages estimated: 0 (DDP) to 3.
inline constexpr int kEstimateStages = 4;

/// ceil(params / world): the elements of one rank's shard of a sharded term.
std::int64_t shard_elems(std::int64_t params, int world);

/// Per-rank model-state bytes at `stage` (0..3). Validates `config`.
StageEstimate estimate_stage(const EstimateConfig& config, int stage);

/// Stages 0, 1, 2 and 3 in order. Validates `config`.
std::vector<StageEstimate> estimate_stages(const EstimateConfig& config);

}  // namespace zl
