// mlp_test.cpp — the MLP as engines use it: torch names and init, every parameter gradient
// against double finite differences, activations in the ledger, and that it learns the task.
#include "model/mlp.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "grad_check.hpp"
#include "model/data.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "optim/adamw.hpp"

namespace zl {
namespace {

// Every unit's flat parameters (or gradients), in unit order.
using UnitFloats = std::vector<std::vector<float>>;

UnitFloats init_params(const Mlp& model, std::uint64_t seed) {
  UnitFloats params;
  for (std::size_t u = 0; u < model.units().size(); ++u) {
    params.emplace_back(static_cast<std::size_t>(model.units()[u].numel()));
    model.init_unit(static_cast<int>(u), params.back(), seed);
  }
  return params;
}

// One micro-batch as an engine runs it; adds the gradients into `grads` and returns the loss.
float forward_backward(Mlp& model, const Batch& batch, const UnitFloats& params,
                       UnitFloats& grads) {
  const int units = static_cast<int>(model.units().size());
  model.begin(batch);
  for (int u = 0; u < units; ++u) model.forward_unit(u, params[u]);
  const float loss = model.loss();
  for (int u = units - 1; u >= 0; --u) model.backward_unit(u, params[u], grads[u]);
  return loss;
}

UnitFloats zeros_like(const UnitFloats& params) {
  UnitFloats zeros;
  for (const auto& unit : params) zeros.emplace_back(unit.size(), 0.0f);
  return zeros;
}

std::vector<float> flatten(const UnitFloats& units) {
  std::vector<float> flat;
  for (const auto& unit : units) flat.insert(flat.end(), unit.begin(), unit.end());
  return flat;
}

TEST(Mlp, UnitsFollowTorchNamesAndShapes) {
  CpuDevice device;
  const Mlp model(device, {.layers = 3, .width = 5, .in = 4, .classes = 3});
  const auto& units = model.units();
  ASSERT_EQ(units.size(), 3u);
  const std::vector<Shape> weight_shapes = {{5, 4}, {5, 5}, {3, 5}};
  for (std::size_t i = 0; i < units.size(); ++i) {
    EXPECT_EQ(units[i].name, "layers." + std::to_string(i));
    ASSERT_EQ(units[i].params.size(), 2u);
    EXPECT_EQ(units[i].params[0].name, "layers." + std::to_string(i) + ".weight");
    EXPECT_EQ(units[i].params[0].shape, weight_shapes[i]);
    EXPECT_EQ(units[i].params[1].name, "layers." + std::to_string(i) + ".bias");
    EXPECT_EQ(units[i].params[1].shape, Shape{weight_shapes[i][0]});
  }
  const Mlp single(device, {.layers = 1, .width = 5, .in = 4, .classes = 3});
  ASSERT_EQ(single.units().size(), 1u);
  EXPECT_EQ(single.units()[0].params[0].shape, (Shape{3, 4}));
  EXPECT_EQ(single.units()[0].numel(), 3 * 4 + 3);
}

TEST(Mlp, ValidateRejectsEmptySizesWithOneLine) {
  const auto message_of = [](const MlpConfig& config) {
    try {
      validate(config);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message_of({.layers = 0}), "--layers 0 is invalid: the MLP needs at least 1 layer");
  EXPECT_EQ(message_of({.width = 0}), "--width 0 is invalid: every layer needs a size >= 1");
  EXPECT_EQ(message_of({.in = -2}), "--in -2 is invalid: every layer needs a size >= 1");
  EXPECT_EQ(message_of({.classes = 0}), "--classes 0 is invalid: every layer needs a size >= 1");
  EXPECT_NO_THROW(validate({}));
  CpuDevice device;
  EXPECT_THROW(Mlp(device, {.layers = 0}), Error);
}

TEST(Mlp, InitIsTorchLinearUniformAndDependsOnlyOnSeedAndName) {
  CpuDevice device;
  const Mlp model(device, {.layers = 3, .width = 5, .in = 4, .classes = 3});
  const auto params = init_params(model, 11);
  // Element e of `name` is (2 u - 1) / sqrt(in) with u = uniform01(seed, stream_of(name), e).
  const float bound0 = 1.0f / 2.0f;  // layer 0 has in = 4
  EXPECT_EQ(params[0][7], (2.0f * uniform01(11, stream_of("layers.0.weight"), 7) - 1.0f) * bound0);
  EXPECT_EQ(params[0][20 + 3],
            (2.0f * uniform01(11, stream_of("layers.0.bias"), 3) - 1.0f) * bound0);
  const float bound2 = static_cast<float>(1.0 / std::sqrt(5.0));
  for (const auto& unit : params) {
    for (const float v : unit) EXPECT_LE(std::abs(v), 0.5f);
  }
  for (const float v : params[2]) EXPECT_LE(std::abs(v), bound2);

  EXPECT_EQ(init_params(model, 11), params);  // same seed, same values
  EXPECT_NE(init_params(model, 12), params);  // another seed, other values
  // The same name gets the same values in a model of another depth: a parameter's values follow
  // its name, not its position.
  const Mlp deeper(device, {.layers = 4, .width = 5, .in = 4, .classes = 3});
  EXPECT_EQ(init_params(deeper, 11)[1], params[1]);
}

TEST(Mlp, LossMatchesTheDoubleReference) {
  CpuDevice device;
  const MlpConfig config{.layers = 3, .width = 5, .in = 4, .classes = 3};
  Mlp model(device, config);
  const auto params = init_params(model, 3);
  const Batch batch = ClassificationTask{.features = 4, .classes = 3, .seed = 5}.batch(0, 6);
  auto grads = zeros_like(params);
  const float loss = forward_backward(model, batch, params, grads);
  EXPECT_NEAR(loss, test::ref_mlp_loss(config, test::to_double(flatten(params)), batch), 1e-6);
  EXPECT_EQ(model.loss(), loss);  // asking again returns the same loss
}

// add_loss seeds backward as loss() does and adds the loss that loss() reads into a float in the
// device's memory: the same gradients bit for bit, and the sum plus the loss.
TEST(Mlp, AddLossAddsTheReadLossOnTheDevice) {
  CpuDevice device;
  const MlpConfig config{.layers = 3, .width = 5, .in = 4, .classes = 3};
  Mlp model(device, config);
  const auto params = init_params(model, 3);
  const Batch batch = ClassificationTask{.features = 4, .classes = 3, .seed = 5}.batch(0, 6);
  auto read_grads = zeros_like(params), added_grads = zeros_like(params);
  model.begin(batch);
  for (int u = 0; u < 3; ++u) model.forward_unit(u, params[u]);
  const float loss = model.loss(0.5f);
  for (int u = 2; u >= 0; --u) model.backward_unit(u, params[u], read_grads[u]);

  model.begin(batch);
  for (int u = 0; u < 3; ++u) model.forward_unit(u, params[u]);
  Buffer sum = device.alloc(MemCategory::CommBuffer, DType::F32, {1});
  sum.as<float>()[0] = 1.25f;
  model.add_loss(0.5f, sum.as<float>());
  EXPECT_THROW(model.loss(), Error);  // taken once
  for (int u = 2; u >= 0; --u) model.backward_unit(u, params[u], added_grads[u]);
  EXPECT_EQ(sum.as<float>()[0], 1.25f + loss);
  EXPECT_EQ(added_grads, read_grads);
}

// The whole model's backward against double central differences of its loss, for every parameter
// element. Tolerances as in cpu_device_test.cpp: float rounding through three layers of fan-in
// <= 6 stays near 1e-7 (measured: up to 2e-8); 1e-6 + 1e-5 |g| leaves ten times that, while the
// smallest gradients here are ~5e-5, so even a factor-of-2 mistake on them is caught.
test::GradCheck check_model_gradients(const MlpConfig& config, std::int64_t rows,
                                      std::uint64_t seed, float perturb_by = 0.0f,
                                      std::size_t perturb_at = 0) {
  CpuDevice device;
  Mlp model(device, config);
  const auto params = init_params(model, seed);
  const Batch batch =
      ClassificationTask{.features = config.in, .classes = config.classes, .seed = seed}.batch(
          0, rows);
  auto grads = zeros_like(params);
  forward_backward(model, batch, params, grads);
  auto analytic = flatten(grads);
  analytic[perturb_at] += perturb_by;
  const auto numeric = test::central_differences(
      [&](std::span<const double> flat) { return test::ref_mlp_loss(config, flat, batch); },
      test::to_double(flatten(params)), 1e-6);
  return test::check_gradient(analytic, numeric, 1e-6, 1e-5);
}

TEST(Mlp, EveryParameterGradientMatchesFiniteDifferences) {
  for (const std::uint64_t seed : {1, 2, 3}) {
    for (const int layers : {1, 3}) {
      const MlpConfig config{.layers = layers, .width = 5, .in = 4, .classes = 3};
      test::expect_gradient_ok(fmt::format("layers {}, seed {}:", layers, seed),
                               check_model_gradients(config, 6, seed));
    }
  }
}

TEST(Mlp, GradientCheckCatchesAPerturbedParameterGradient) {
  const MlpConfig config{.layers = 3, .width = 5, .in = 4, .classes = 3};
  // One element in each unit (a weight of unit 0, the bias of unit 1, a weight of unit 2), moved
  // by 1e-4: small next to the gradients, large next to the tolerance.
  for (const std::size_t at : {std::size_t{3}, std::size_t{25 + 25 + 2}, std::size_t{55 + 7}}) {
    const auto check = check_model_gradients(config, 6, 1, 1e-4f, at);
    EXPECT_FALSE(check.ok) << "perturbed element " << at << " went unnoticed: " << check.report();
    EXPECT_EQ(check.worst_index, at) << check.report();
  }
}

TEST(Mlp, BackwardAddsIntoGradientsAndLeavesPaddingAlone) {
  CpuDevice device;
  Mlp model(device, {.layers = 2, .width = 5, .in = 4, .classes = 3});
  const auto params = init_params(model, 4);
  const Batch batch = ClassificationTask{.features = 4, .classes = 3, .seed = 4}.batch(0, 6);
  auto once = zeros_like(params);
  forward_backward(model, batch, params, once);
  auto twice = once;
  forward_backward(model, batch, params, twice);
  // g + g is exact, so adding the same micro-batch again gives exactly 2 g.
  for (std::size_t u = 0; u < once.size(); ++u) {
    for (std::size_t i = 0; i < once[u].size(); ++i) EXPECT_EQ(twice[u][i], 2.0f * once[u][i]);
  }
  // Engines may pass a unit's padded span: elements past numel are neither read nor written.
  auto padded_params = params;
  auto padded_grads = zeros_like(params);
  for (auto& unit : padded_params) unit.resize(unit.size() + 3, NAN);
  for (auto& unit : padded_grads) unit.resize(unit.size() + 3, 7.0f);
  forward_backward(model, batch, padded_params, padded_grads);
  for (std::size_t u = 0; u < once.size(); ++u) {
    for (std::size_t i = 0; i < once[u].size(); ++i) EXPECT_EQ(padded_grads[u][i], once[u][i]);
    for (std::size_t i = once[u].size(); i < padded_grads[u].size(); ++i)
      EXPECT_EQ(padded_grads[u][i], 7.0f);
  }
}

TEST(Mlp, ActivationsAreBookedWhileAMicroBatchIsInFlight) {
  CpuDevice device;
  const auto activation_bytes = [&] {
    return device.ledger().current_bytes(MemCategory::Activations);
  };
  {
    Mlp model(device, {.layers = 3, .width = 5, .in = 4, .classes = 3});
    const auto params = init_params(model, 1);
    auto grads = zeros_like(params);
    EXPECT_EQ(activation_bytes(), 0);
    const Batch batch = ClassificationTask{.features = 4, .classes = 3}.batch(0, 6);
    model.begin(batch);
    // 6 rows of fp32: input [6, 4], pre-activations [6, 5] [6, 5] [6, 3], GELU outputs [6, 5]
    // [6, 5], and two gradient scratch buffers of the widest layer [6, 5]; and the 6 int64 labels.
    const std::int64_t expected_bytes =
        std::int64_t{4} * 6 * (4 + (5 + 5 + 3) + (5 + 5) + 2 * 5) + std::int64_t{8} * 6;
    EXPECT_EQ(activation_bytes(), expected_bytes);
    for (int u = 0; u < 3; ++u) model.forward_unit(u, params[u]);
    model.loss();
    for (int u = 2; u >= 0; --u) model.backward_unit(u, params[u], grads[u]);
    EXPECT_EQ(activation_bytes(), expected_bytes);
    // The next micro-batch replaces this one; it does not pile up.
    model.begin(batch);
    EXPECT_EQ(activation_bytes(), expected_bytes);
    EXPECT_EQ(device.ledger().peak_bytes(MemCategory::Activations), expected_bytes);
    EXPECT_EQ(device.ledger().current_bytes(MemCategory::Params), 0);
  }
  EXPECT_EQ(activation_bytes(), 0);
}

TEST(Mlp, CallsOutOfOrderFailWithAMessage) {
  CpuDevice device;
  Mlp model(device, {.layers = 2, .width = 5, .in = 4, .classes = 3});
  const auto params = init_params(model, 1);
  auto grads = zeros_like(params);
  EXPECT_THROW(model.forward_unit(0, params[0]), Error);  // no begin()
  EXPECT_THROW(model.begin(ClassificationTask{.features = 3, .classes = 3}.batch(0, 2)), Error);
  model.begin(ClassificationTask{.features = 4, .classes = 3}.batch(0, 2));
  EXPECT_THROW(model.forward_unit(1, params[1]), Error);  // skipped unit 0
  model.forward_unit(0, params[0]);
  EXPECT_THROW(model.loss(), Error);  // unit 1 has not run
  model.forward_unit(1, params[1]);
  model.loss();
  EXPECT_THROW(model.backward_unit(0, params[0], grads[0]), Error);  // unit 1 goes first
  EXPECT_THROW(model.backward_unit(1, params[1], std::span<float>(grads[1]).first(3)), Error);
  model.backward_unit(1, params[1], grads[1]);
  model.backward_unit(0, params[0], grads[0]);
  EXPECT_THROW(model.backward_unit(-1, params[0], grads[0]), Error);  // past the first unit
  EXPECT_THROW(model.forward_unit(2, params[1]), Error);              // past the last unit
}

// The demo's promise: a few hundred AdamW steps on the Gaussian-mixture task bring the loss far
// below chance, ln(classes).
TEST(Mlp, LearnsTheClassificationTask) {
  CpuDevice device;
  const MlpConfig config{.layers = 3, .width = 32, .in = 16, .classes = 8};
  Mlp model(device, config);
  const ClassificationTask task{.features = 16, .classes = 8, .seed = 9, .noise = 1.0f};
  auto params = init_params(model, 9);
  auto exp_avg = zeros_like(params), exp_avg_sq = zeros_like(params);
  const AdamWConfig adamw{.lr = 1e-2};
  const std::int64_t micro_batch = 32;
  const int steps = 300;
  float first_loss = 0.0f;
  double last_losses = 0.0;
  for (int step = 0; step < steps; ++step) {
    auto grads = zeros_like(params);
    const float loss = forward_backward(
        model, task.batch(first_sample_of(step, 0, 1, micro_batch), micro_batch), params, grads);
    if (step == 0) first_loss = loss;
    if (step >= steps - 20) last_losses += loss / 20.0;
    const auto scalars = adamw_scalars(adamw, step + 1);
    for (std::size_t u = 0; u < params.size(); ++u) {
      adamw_update(params[u], grads[u], exp_avg[u], exp_avg_sq[u], scalars);
    }
  }
  const double chance = std::log(8.0);
  std::cout << "  loss " << first_loss << " at step 1, " << last_losses << " over the last 20 of "
            << steps << " steps (chance ln 8 = " << chance << ")\n";
  EXPECT_NEAR(first_loss, chance, 0.5) << "an untrained model should be near chance";
  EXPECT_LT(last_losses, 0.5 * chance)
      << "first loss " << first_loss << ", mean of the last 20 " << last_losses;
}

}  // namespace
}  // namespace zl
