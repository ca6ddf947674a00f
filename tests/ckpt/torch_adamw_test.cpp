// torch_adamw_test.cpp — replays the gradients of tests/fixtures/adamw_trajectory.safetensors
// (6 steps of torch.optim.AdamW, single-tensor path, CPU fp32) through zl::adamw_scalars and
// zl::adamw_update and compares params, exp_avg and exp_avg_sq after every step.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "ckpt/answer_key.hpp"
#include "ckpt/safetensors.hpp"
#include "optim/adamw.hpp"

namespace zl {
namespace {

// Tolerance: PyTorch 1.13's CPU kernels (AVX2) compute m = fma(g, 1 - b1, m * b1),
// v = fma((1 - b2) * g, g, v * b2) and p += (-step_size * m) / denom; zerolab computes
// v * b2 + (1 - b2) * (g * g) and p += -step_size * (m / denom) without contraction. (A numpy
// emulation of PyTorch's order reproduces the fixture bit for bit, so these are the only
// differences.) Each is an ulp of one term and stays a few ulps over 6 steps, fp32's ulp being
// 1.2e-7 relative: so relative 1e-6, plus an absolute floor of 1e-6 of the tensor's largest element
// for elements near zero (a param crossing zero keeps the absolute error of its update).
constexpr double kRelTol = 1e-6;

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, separator);) parts.push_back(part);
  return parts;
}

TEST(TorchAnswerKey, AdamWTrajectoryMatchesPyTorch) {
  const auto file = read_safetensors_file(test::fixture_path("adamw_trajectory.safetensors"));
  const auto& meta = file.metadata;
  const AdamWConfig config{.lr = std::stod(meta.at("lr")),
                           .beta1 = std::stod(meta.at("beta1")),
                           .beta2 = std::stod(meta.at("beta2")),
                           .eps = std::stod(meta.at("eps")),
                           .weight_decay = std::stod(meta.at("weight_decay"))};
  const int steps = std::stoi(meta.at("steps"));
  const auto names = split(meta.at("params"), ',');
  fmt::print("AdamW lr {} betas ({}, {}) eps {} weight_decay {}, {} steps, torch {}\n", config.lr,
             config.beta1, config.beta2, config.eps, config.weight_decay, steps, meta.at("torch"));

  struct State {
    std::vector<float> params, exp_avg, exp_avg_sq;
  };
  std::vector<State> states;
  for (const auto& name : names) {
    auto params = to_floats(find_tensor(file.tensors, name + ".init"));
    const std::size_t elems = params.size();
    states.push_back({std::move(params), std::vector<float>(elems), std::vector<float>(elems)});
  }
  double worst_param_abs = 0;
  double worst_param_rel = 0;
  for (int step = 1; step <= steps; ++step) {
    const AdamWScalars scalars = adamw_scalars(config, step);
    for (std::size_t p = 0; p < names.size(); ++p) {
      const std::string prefix = fmt::format("step{}.{}.", step, names[p]);
      const auto key = [&](const std::string& what) {
        return to_floats(find_tensor(file.tensors, prefix + what));
      };
      State& state = states[p];
      adamw_update(state.params, key("grad"), state.exp_avg, state.exp_avg_sq, scalars);
      for (const auto& [what, actual] : {std::pair{"param", &state.params},
                                         {"exp_avg", &state.exp_avg},
                                         {"exp_avg_sq", &state.exp_avg_sq}}) {
        const auto expected = key(what);
        const auto result = test::compare(prefix + what, *actual, expected, kRelTol,
                                          kRelTol * test::max_abs(expected));
        EXPECT_TRUE(result.ok) << result.report;
        if (std::string_view(what) == "param") {
          worst_param_abs = std::max(worst_param_abs, result.max_abs_diff);
          worst_param_rel = std::max(worst_param_rel, result.max_rel_diff);
        }
      }
    }
  }
  fmt::print("params vs PyTorch over {} steps: max abs diff {:.3e}, max rel diff {:.3e}\n", steps,
             worst_param_abs, worst_param_rel);
}

}  // namespace
}  // namespace zl
