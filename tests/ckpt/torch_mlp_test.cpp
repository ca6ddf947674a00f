// torch_mlp_test.cpp — one forward/backward of zl::Mlp on a CpuDevice against the same MLP built in
// torch (tests/fixtures/mlp_fwd_bwd.safetensors): same params, input and labels; compares the loss
// and every parameter gradient.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ckpt/answer_key.hpp"
#include "ckpt/safetensors.hpp"
#include "model/mlp.hpp"
#include "ops/cpu/cpu_device.hpp"

namespace zl {
namespace {

// Tolerance: the two sides agree on the math but not on the rounding. PyTorch's fp32 GEMMs (oneDNN/
// BLAS) sum in their own blocked order, possibly with FMA; zerolab sums with Eigen, and evaluates
// GELU and the log-sum-exp in double before rounding once. With sums of at most 9 terms each
// result carries a few fp32 ulps of the terms' size, so: relative 1e-5, plus an absolute floor of
// 1e-5 of the tensor's largest element for entries that nearly cancel.
constexpr double kRelTol = 1e-5;

TEST(TorchAnswerKey, MlpForwardBackwardMatchesPyTorch) {
  const auto file = read_safetensors_file(test::fixture_path("mlp_fwd_bwd.safetensors"));
  const auto& meta = file.metadata;
  const auto& tensors = file.tensors;
  const MlpConfig config{.layers = std::stoi(meta.at("layers")),
                         .width = std::stoll(meta.at("width")),
                         .in = std::stoll(meta.at("in")),
                         .classes = std::stoll(meta.at("classes"))};
  const Batch batch{.rows = std::stoll(meta.at("rows")),
                    .features = config.in,
                    .x = to_floats(find_tensor(tensors, "x")),
                    .y = to_int64s(find_tensor(tensors, "y")),
                    .tokens = {}};
  CpuDevice device;
  Mlp mlp(device, config);
  const auto& units = mlp.units();
  const int unit_count = static_cast<int>(units.size());

  // Each unit's flat parameters: its tensors back to back (weight, then bias).
  std::vector<std::vector<float>> params(units.size());
  std::vector<std::vector<float>> grads(units.size());
  for (std::size_t u = 0; u < units.size(); ++u) {
    for (const auto& spec : units[u].params) {
      const auto& record = find_tensor(tensors, spec.name);
      ASSERT_EQ(record.shape, spec.shape) << spec.name;
      const auto values = to_floats(record);
      params[u].insert(params[u].end(), values.begin(), values.end());
    }
    grads[u].assign(params[u].size(), 0.0f);
  }

  mlp.begin(batch);
  for (int u = 0; u < unit_count; ++u) mlp.forward_unit(u, params[u]);
  const float loss = mlp.loss();
  for (int u = unit_count - 1; u >= 0; --u) mlp.backward_unit(u, params[u], grads[u]);

  const auto expected_loss = to_floats(find_tensor(tensors, "loss"));
  const auto loss_result = test::compare("loss", {&loss, 1}, expected_loss, kRelTol, 0.0);
  EXPECT_TRUE(loss_result.ok) << loss_result.report;
  double worst_grad_rel = 0;
  for (std::size_t u = 0; u < units.size(); ++u) {
    std::size_t offset = 0;
    for (const auto& spec : units[u].params) {
      const auto expected = to_floats(find_tensor(tensors, spec.name + ".grad"));
      const auto actual = std::span<const float>(grads[u]).subspan(offset, expected.size());
      offset += expected.size();
      const auto result = test::compare(spec.name + ".grad", actual, expected, kRelTol,
                                        kRelTol * test::max_abs(expected));
      EXPECT_TRUE(result.ok) << result.report;
      worst_grad_rel = std::max(worst_grad_rel, result.max_rel_diff);
    }
  }
  fmt::print("loss {:.9g} vs torch {:.9g}; largest relative gradient difference {:.3e}\n", loss,
             expected_loss[0], worst_grad_rel);
}

}  // namespace
}  // namespace zl
