// estimate_models.cpp — the units of the models `zerolab estimate` takes by their sizes, counted
// without overflowing int64.
#include <algorithm>

#include "core/error.hpp"
#include "engines/checked_math.hpp"
#include "engines/estimate.hpp"
#include "ops/cpu/cpu_device.hpp"

namespace zl {

std::vector<UnitSpec> checked_units(const MlpConfig& config) {
  validate(config);
  ZL_CHECK(config.layers <= kMaxEstimateLayers,
           "--layers {} is too many to estimate: use at most {}", config.layers,
           kMaxEstimateLayers);
  // Bound every layer by the widest one, out*in + out <= dim*(dim + 1), before Mlp multiplies.
  const std::int64_t dim = std::max({config.width, config.in, config.classes});
  ZL_CHECK(dim <= 3'000'000'000 && config.layers <= kInt64Max / (dim * (dim + 1)),
           "an MLP of {} layers up to width {} is too large to count in int64: use smaller sizes",
           config.layers, dim);
  CpuDevice device;
  const Mlp mlp(device, config);
  return mlp.units();
}

std::vector<UnitSpec> checked_units(const GptConfig& config) {
  validate(config);
  ZL_CHECK(config.n_layer <= kMaxEstimateLayers,
           "--n-layer {} is too many to estimate: use at most {}", config.n_layer,
           kMaxEstimateLayers);
  // Ψ = (V + T)·C + L·(12C² + 13C) + 2C, bounded in floating point before gpt_units multiplies
  // in int64; 1e18 leaves room for the padding below int64's 9.2e18.
  const double c = static_cast<double>(config.n_embd);
  const double params =
      (static_cast<double>(config.vocab) + static_cast<double>(config.block_size)) * c +
      config.n_layer * (12 * c * c + 13 * c) + 2 * c;
  ZL_CHECK(params <= 1e18,
           "a GPT with n_layer {}, n_embd {}, vocab {} and block_size {} has about {:.3g} "
           "parameters, too many to count in int64: use smaller sizes",
           config.n_layer, config.n_embd, config.vocab, config.block_size, params);
  return gpt_units(config);
}

std::int64_t mlp_param_count(const MlpConfig& config) {
  std::int64_t params = 0;
  for (const auto& unit : checked_units(config)) params += unit.numel();
  return params;
}

}  // namespace zl
