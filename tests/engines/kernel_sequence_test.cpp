// kernel_sequence_test.cpp — at W = 1 every collective returns its input, so ZeRO-1, -2 and -3
// cost only what they communicate when a step queues exactly DDP's device work besides its
// collectives: the same kernels, copies and fills (a zeroed allocation is a fill), each as many
// times and of the same bytes. Each stage's second step is recorded on a RecordingDevice and
// compared with DDP's, for fp32 and bf16, with and without accumulation and clipping; where a
// stage adds a unit's gradient as it is ready and DDP after backward, only the order differs.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "engines/engine.hpp"
#include "model/gpt_config.hpp"
#include "run/data_source.hpp"
#include "run/rank_model.hpp"
#include "sim_world.hpp"
#include "support/recording_device.hpp"

namespace zl {
namespace {

// The device calls of step 1 of `kind` on one rank, for `config`'s model and features.
std::vector<std::string> step_calls(const TrainConfig& config, EngineKind kind) {
  test::RecordingDevice device;
  SimWorld world(1);
  world.run([&](Comm& comm) {
    RankModel model(device, config, {});
    const EngineOptions options{.adamw = config.adamw,
                                .lr_schedule = config.lr_schedule,
                                .seed = config.seed,
                                .batch = batch_source(config, 0, 0, nullptr),
                                .observer = {},
                                .nonfinite = config.nonfinite,
                                .features = config.features};
    auto engine = make_engine(kind, model.get(), device, comm, options);
    engine->step(0);
    device.set_recording(true);
    engine->step(1);
    device.set_recording(false);
  });
  return device.calls();
}

// `call` with a fill and a zeroed allocation both named "zero <bytes>": the same work on a GPU.
std::string normalized(const std::string& call) {
  for (const std::string_view fill : {"fill_zero ", "allocate_zeroed "}) {
    if (call.starts_with(fill)) return "zero " + call.substr(fill.size());
  }
  return call;
}

// `calls` as a multiset of normalized calls.
std::map<std::string, int> work_of(const std::vector<std::string>& calls) {
  std::map<std::string, int> work;
  for (const std::string& call : calls) ++work[normalized(call)];
  return work;
}

// What `a` holds more of than `b`, each "call xN".
std::vector<std::string> excess(const std::map<std::string, int>& a,
                                const std::map<std::string, int>& b) {
  std::vector<std::string> out;
  for (const auto& [call, count] : a) {
    const auto in_b = b.find(call);
    const int b_count = in_b == b.end() ? 0 : in_b->second;
    if (count > b_count) out.push_back(fmt::format("{} x{}", call, count - b_count));
  }
  return out;
}

// Empty when `calls` are `ddp`'s work, else what one has more of than the other.
std::string work_difference(const std::vector<std::string>& ddp,
                            const std::vector<std::string>& calls) {
  const std::vector<std::string> more = excess(work_of(calls), work_of(ddp));
  const std::vector<std::string> fewer = excess(work_of(ddp), work_of(calls));
  if (more.empty() && fewer.empty()) return {};
  return fmt::format("{} calls against DDP's {}; more: [{}]; fewer: [{}]", calls.size(), ddp.size(),
                     fmt::join(more, ", "), fmt::join(fewer, ", "));
}

TrainConfig tiny_gpt_at_one_rank() {
  TrainConfig config;
  config.world = 1;
  config.micro_batch = 2;
  config.gpt = gpt_preset("tiny");
  config.model = ModelKind::Gpt;
  config.seed = 5;
  return config;
}

TEST(KernelSequence, EveryStageQueuesDdpsDeviceWorkAtOneRank) {
  for (const DType precision : {DType::F32, DType::BF16}) {
    for (const bool accumulate_and_clip : {false, true}) {
      TrainConfig config = tiny_gpt_at_one_rank();
      config.features.precision = precision;
      if (accumulate_and_clip) {
        config.features.grad_accum_steps = 2;
        config.features.grad_clip = 0.5;
      }
      const std::vector<std::string> ddp = step_calls(config, EngineKind::Ddp);
      ASSERT_FALSE(ddp.empty());
      for (const EngineKind kind : {EngineKind::Zero1, EngineKind::Zero2, EngineKind::Zero3}) {
        EXPECT_EQ(work_difference(ddp, step_calls(config, kind)), "")
            << engine_name(kind) << ", " << dtype_name(precision)
            << (accumulate_and_clip ? ", accumulation and clipping" : "");
      }
    }
  }
}

}  // namespace
}  // namespace zl
