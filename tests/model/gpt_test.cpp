// gpt_test.cpp — GPT-2's structure as engines see it: Hugging Face names and shapes (124,439,808
// parameters for the 124M preset), presets and their checks, the forward order with unit 0 twice,
// the init's formula and statistics, activations in the ledger, and clear errors for calls out of
// order and bad batches.
#include "model/gpt.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ckpt/test_files.hpp"
#include "core/rng.hpp"
#include "gpt_test_support.hpp"
#include "model/token_data.hpp"
#include "ops/cpu/cpu_device.hpp"

namespace zl {
namespace {

using test::error_of;
using test::init_params;
using test::zeros_like;
using ::testing::HasSubstr;

// The model's parameters as Hugging Face counts them: wte's padded rows left out.
std::int64_t total_params(const GptConfig& config) {
  std::int64_t total = 0;
  for (const auto& unit : gpt_units(config)) total += unit.real_numel();
  return total;
}

TEST(GptConfig, UnitsFollowHuggingFaceNamesAndShapes) {
  const GptConfig config{.n_layer = 2, .n_head = 2, .n_embd = 8, .block_size = 6, .vocab = 11};
  const auto units = gpt_units(config);
  ASSERT_EQ(units.size(), 4u);
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (const auto& unit : units) {
    for (const auto& param : unit.params) {
      names.push_back(param.name);
      shapes.push_back(param.shape);
    }
  }
  ASSERT_EQ(names.size(), 2u + 2 * 12 + 2);
  EXPECT_EQ(names[0], "wte.weight");
  // In memory wte has a row for each of the 128 padded vocabulary entries; files see 11.
  EXPECT_EQ(shapes[0], (Shape{128, 8}));
  EXPECT_EQ(units[0].params[0].pad_rows, 128 - 11);
  EXPECT_EQ(units[0].params[0].real_shape(), (Shape{11, 8}));
  EXPECT_EQ(units[0].params[1].pad_rows, 0);
  EXPECT_EQ(names[1], "wpe.weight");
  EXPECT_EQ(shapes[1], (Shape{6, 8}));
  const std::vector<std::string> block = {
      "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
      "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
      "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
  const std::vector<Shape> block_shapes = {{8}, {8}, {8, 24}, {24}, {8, 8},  {8},
                                           {8}, {8}, {8, 32}, {32}, {32, 8}, {8}};
  for (int layer = 0; layer < 2; ++layer) {
    EXPECT_EQ(units[1 + layer].name, "h." + std::to_string(layer));
    for (std::size_t i = 0; i < block.size(); ++i) {
      EXPECT_EQ(names[2 + 12 * layer + i], "h." + std::to_string(layer) + "." + block[i]);
      EXPECT_EQ(shapes[2 + 12 * layer + i], block_shapes[i]) << block[i];
    }
  }
  EXPECT_EQ(names[26], "ln_f.weight");
  EXPECT_EQ(names[27], "ln_f.bias");
  EXPECT_EQ(shapes[27], Shape{8});
}

TEST(GptConfig, PresetsHaveThePublishedParameterCounts) {
  // Hugging Face's "gpt2" reports 124,439,808 parameters (the LM head is tied to wte, so counted
  // once): wte 50257*768 + wpe 1024*768 + 12 blocks of 7,087,872 + ln_f 2*768.
  const GptConfig small = gpt_preset("124M");
  EXPECT_EQ(total_params(small), 124'439'808);
  // In memory: wte padded to 50304 rows, as llm.c pads it, 47 * 768 = 36,096 zeros more.
  EXPECT_EQ(padded_vocab(small), 50'304);
  EXPECT_EQ(gpt_units(small)[0].numel(), (50'304 + 1024) * 768);
  EXPECT_EQ(gpt_units(small)[1].numel(), 7'087'872);
  EXPECT_EQ(gpt_units(small).size(), 14u);
  EXPECT_EQ(total_params(gpt_preset("350M")), 354'823'168);  // "gpt2-medium"
  EXPECT_EQ(gpt_preset_names(), (std::vector<std::string>{"tiny", "small", "124M", "350M"}));
  for (const auto& name : gpt_preset_names()) EXPECT_NO_THROW(validate(gpt_preset(name)));
  EXPECT_EQ(error_of([] { gpt_preset("gpt2-xl"); }),
            "GPT preset \"gpt2-xl\" does not exist: use one of tiny, small, 124M, 350M");
}

TEST(GptConfig, VocabularyPadsToAMultipleOf128) {
  EXPECT_EQ(padded_vocab({.vocab = 1}), 128);
  EXPECT_EQ(padded_vocab({.vocab = 128}), 128);
  EXPECT_EQ(padded_vocab({.vocab = 129}), 256);
  EXPECT_EQ(padded_vocab(gpt_preset("tiny")), 128);   // vocab 64
  EXPECT_EQ(padded_vocab(gpt_preset("small")), 128);  // vocab 128: no padded rows
  EXPECT_EQ(gpt_units(gpt_preset("small"))[0].params[0].pad_rows, 0);
}

TEST(GptConfig, ValidateRejectsBadSizesWithOneLine) {
  const auto message = [](GptConfig config) { return error_of([&] { validate(config); }); };
  EXPECT_EQ(message({.n_layer = 0}), "--n-layer 0 is invalid: the GPT needs at least 1 layer");
  EXPECT_EQ(message({.n_head = 0}), "--n-head 0 is invalid: the GPT needs at least 1 head");
  EXPECT_EQ(message({.n_head = 4, .n_embd = 30}),
            "--n-embd 30 is invalid: it must be a multiple of --n-head 4");
  EXPECT_EQ(message({.n_embd = -2}), "--n-embd -2 is invalid: use a width >= 1");
  EXPECT_EQ(message({.block_size = 0}), "--block-size 0 is invalid: use a context of >= 1 token");
  EXPECT_EQ(message({.vocab = 0}), "--vocab 0 is invalid: use a vocabulary of >= 1 token");
  CpuDevice device;
  EXPECT_THROW(Gpt(device, {.n_layer = 0}), Error);
}

TEST(Gpt, UnitZeroRunsFirstAndAgainLastAsTheTiedHead) {
  CpuDevice device;
  const Gpt model(device, {.n_layer = 3});
  EXPECT_EQ(model.forward_order(), (std::vector<int>{0, 1, 2, 3, 4, 0}));
  EXPECT_EQ(model.units().size(), 5u);
}

TEST(Gpt, InitFollowsTheFormulaAndGpt2Statistics) {
  CpuDevice device;
  const GptConfig config = gpt_preset("tiny");  // 2 layers: c_proj std 0.02 / sqrt(4) = 0.01
  const Gpt model(device, config);
  const auto params = init_params(model, 5);
  const auto& units = model.units();
  for (std::size_t u = 0; u < units.size(); ++u) {
    std::size_t offset = 0;
    for (const auto& param : units[u].params) {
      const auto elems = static_cast<std::size_t>(numel(param.real_shape()));
      const std::vector<float> values(params[u].begin() + offset,
                                      params[u].begin() + offset + elems);
      // wte's padded rows follow its real ones and start at zero.
      const auto padded_end = offset + static_cast<std::size_t>(numel(param.shape));
      for (std::size_t e = offset + elems; e < padded_end; ++e) {
        EXPECT_EQ(params[u][e], 0.0f) << param.name << " padded element " << e - offset;
      }
      offset = padded_end;
      const std::string& name = param.name;
      if (name.ends_with(".bias")) {
        for (const float v : values) EXPECT_EQ(v, 0.0f) << name;
      } else if (name.find("ln_") != std::string::npos) {
        for (const float v : values) EXPECT_EQ(v, 1.0f) << name;
      } else {
        const double stddev = name.ends_with("c_proj.weight") ? 0.01 : 0.02;
        // Element e is round(stddev * standard_normal(seed, stream_of(name), e)).
        EXPECT_EQ(values[3], static_cast<float>(stddev * standard_normal(5, stream_of(name), 3)));
        double sum = 0.0, squares = 0.0;
        for (const float v : values) {
          sum += v;
          squares += static_cast<double>(v) * v;
        }
        const double n = static_cast<double>(values.size());
        const double sample_std = std::sqrt(squares / n - (sum / n) * (sum / n));
        // >= 512 draws: the sample mean and std are within 4 standard errors of 0 and stddev
        // (stddev / sqrt(n) and stddev / sqrt(2n)).
        EXPECT_NEAR(sum / n, 0.0, 4.0 * stddev / std::sqrt(n)) << name;
        EXPECT_NEAR(sample_std, stddev, 4.0 * stddev / std::sqrt(2.0 * n)) << name;
      }
    }
  }
  EXPECT_EQ(init_params(model, 5), params);  // a pure function of the seed
  EXPECT_NE(init_params(model, 6), params);
  // A parameter's values follow its name: in a 4-layer model h.1's c_proj weights have another
  // std, but its c_attn weight (after ln_1's 2 * 32 values) is the same tensor.
  const Gpt deeper(device, {.n_layer = 4});
  const auto deeper_params = init_params(deeper, 5);
  EXPECT_TRUE(std::equal(params[2].begin() + 2 * 32, params[2].begin() + 2 * 32 + 32 * 96,
                         deeper_params[2].begin() + 2 * 32));
}

TEST(Gpt, ActivationsAreBookedWhileAMicroBatchIsInFlight) {
  CpuDevice device;
  const auto activation_bytes = [&] {
    return device.ledger().current_bytes(MemCategory::Activations);
  };
  {
    const GptConfig config = gpt_preset("tiny");
    Gpt model(device, config);
    const auto params = init_params(model, 1);
    auto grads = zeros_like(params);
    const std::int64_t B = 3, T = 10, C = config.n_embd, V = config.vocab, H = config.n_head;
    const std::int64_t N = B * T, Vp = padded_vocab(config);  // the logits' row: 128 columns
    // Per block: ln_1 and ln_2 outputs with their mean and rstd, qkv, attention's two stats per
    // row and head (never the T x T probabilities), attention output, mid, fc, GELU(fc), out.
    // Besides: the embedding, ln_f, the logits (their gradient written over them), the backward scratch
    // (dresidual, dln, dqkv, dattn, dfc, dfc_gelu); and the int64 token ids and targets [B, T].
    const std::int64_t per_block =
        2 * (N * C + 2 * N) + 3 * N * C + B * H * T * 2 + 2 * N * C + 2 * 4 * N * C + N * C;
    const std::int64_t rest =
        N * C + (N * C + 2 * N) + N * Vp + (N * C + N * C + 3 * N * C + N * C + 2 * 4 * N * C);
    const std::int64_t expected_bytes = 4 * (config.n_layer * per_block + rest) + 8 * 2 * N;
    EXPECT_EQ(activation_bytes(), 0);
    const auto batch = MarkovTokens(V, 1).batch(0, B, T);
    test::forward_backward(model, batch, params, grads);
    EXPECT_EQ(activation_bytes(), expected_bytes);
    model.begin(batch);  // the next micro-batch replaces this one
    EXPECT_EQ(activation_bytes(), expected_bytes);
    EXPECT_EQ(device.ledger().peak_bytes(MemCategory::Activations), expected_bytes);
  }
  EXPECT_EQ(activation_bytes(), 0);
}

TEST(Gpt, CallsOutOfOrderFailWithAMessage) {
  CpuDevice device;
  Gpt model(device, {.n_layer = 1});  // order 0, 1, 2, 0
  const auto params = init_params(model, 1);
  auto grads = zeros_like(params);
  const auto batch = MarkovTokens(64, 1).batch(0, 2, 4);
  EXPECT_THAT(error_of([&] { model.forward_unit(0, params[0]); }),
              HasSubstr("forward_unit(0) out of order: call begin(), then forward_unit for each "
                        "unit of forward_order() (0, 1, ..., 2, 0) in turn; begin() has not run"));
  model.begin(batch);
  EXPECT_THAT(error_of([&] { model.forward_unit(1, params[1]); }), HasSubstr("unit 0 is next"));
  model.forward_unit(0, params[0]);
  model.forward_unit(1, params[1]);
  EXPECT_THAT(error_of([&] { model.loss(); }),
              HasSubstr("loss() before the forward pass finished: 2 of 4 forward visits ran"));
  EXPECT_THAT(error_of([&] { model.logits(); }), HasSubstr("before the LM head ran"));
  EXPECT_THROW(model.forward_unit(2, std::span<const float>(params[2]).first(3)), Error);
  model.forward_unit(2, params[2]);
  EXPECT_THAT(error_of([&] { model.backward_unit(0, params[0], grads[0]); }),
              HasSubstr("loss() has not run"));
  model.forward_unit(0, params[0]);
  EXPECT_THAT(error_of([&] { model.forward_unit(0, params[0]); }),
              HasSubstr("the forward pass is done: call loss()"));
  model.loss();
  EXPECT_THAT(error_of([&] { model.backward_unit(2, params[2], grads[2]); }),
              HasSubstr("unit 0 is next"));
  model.backward_unit(0, params[0], grads[0]);  // the head
  model.backward_unit(2, params[2], grads[2]);
  EXPECT_THAT(error_of([&] { model.backward_unit(0, params[0], grads[0]); }),
              HasSubstr("unit 1 is next"));
  model.backward_unit(1, params[1], grads[1]);
  model.backward_unit(0, params[0], grads[0]);  // the embedding
  EXPECT_THAT(error_of([&] { model.backward_unit(0, params[0], grads[0]); }),
              HasSubstr("the backward pass is done"));
  EXPECT_THAT(error_of([&] { model.init_unit(3, grads[0], 1); }),
              HasSubstr("unit 3 does not exist: the GPT has 3 units"));
}

TEST(Gpt, BeginRejectsBadBatchesWithAMessage) {
  CpuDevice device;
  Gpt model(device, gpt_preset("tiny"));  // block 16, vocab 64
  EXPECT_EQ(error_of([&] { model.begin(MarkovTokens(64, 1).batch(0, 2, 17)); }),
            "a sequence length of 17 tokens does not fit the GPT: use 1 .. --block-size 16");
  auto batch = MarkovTokens(64, 1).batch(0, 2, 5);
  batch.tokens[7] = 64;
  EXPECT_EQ(error_of([&] { model.begin(batch); }),
            "token 64 at row 1, position 2 is outside the vocabulary [0, 64): use ids below "
            "--vocab");
  batch.tokens[7] = 0;
  batch.y[3] = -1;
  EXPECT_THAT(error_of([&] { model.begin(batch); }), HasSubstr("target -1 at row 0, position 3"));
  batch.y.pop_back();
  EXPECT_THAT(error_of([&] { model.begin(batch); }),
              HasSubstr("the batch holds 10 tokens and 9 targets for 2 rows of 5 tokens"));
  batch.rows = 0;
  EXPECT_THAT(error_of([&] { model.begin(batch); }), HasSubstr("is empty"));
}

}  // namespace
}  // namespace zl
