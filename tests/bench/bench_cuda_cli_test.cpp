// bench_cuda_cli_test.cpp — `zerolab bench adam --accelerator cuda`: the GPT-2 124M split of the
// parameters, and the command end to end. Without a GPU (or without CUDA built in) it must fail
// with one line saying so; with one, its JSON must follow the definitions (28 B/param, read plus
// write for the copy), never a speed.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>

#include "bench/adam_bench_cuda.hpp"
#include "core/error.hpp"
#include "support/command.hpp"
#include "support/test_paths.hpp"

#ifdef ZL_HAVE_CUDA
#include "ops/cuda/cuda_device.hpp"
#endif

namespace zl {
namespace {

int visible_gpus() {
#ifdef ZL_HAVE_CUDA
  return CudaDevice::device_count();
#else
  return 0;
#endif
}

TEST(BenchAdamCuda, TheSplitIsGpt2SmallsTensors) {
  const auto sizes = bench::gpt2_124m_tensor_elems(bench::gpt2_124m_params_elems());
  // 12 blocks of 12 tensors, wte, wpe, ln_f's weight and bias; the LM head is tied to wte.
  ASSERT_EQ(sizes.size(), 148u);
  EXPECT_EQ(bench::gpt2_124m_params_elems(), 124'439'808);
  EXPECT_EQ(sizes[0], 50257 * 768);  // wte
  EXPECT_EQ(sizes[1], 1024 * 768);   // wpe
  EXPECT_EQ(std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0}), 124'439'808);
}

TEST(BenchAdamCuda, OtherSizesCycleThroughTheTensorsAndCutTheLast) {
  const auto small = bench::gpt2_124m_tensor_elems(1000);
  ASSERT_EQ(small.size(), 1u);
  EXPECT_EQ(small[0], 1000);
  const auto preset = bench::gpt2_124m_tensor_elems(bench::gpt2_124m_params_elems());
  const std::int64_t more = bench::gpt2_124m_params_elems() + preset[0] + 5;
  const auto cycled = bench::gpt2_124m_tensor_elems(more);
  ASSERT_EQ(cycled.size(), preset.size() + 2);
  EXPECT_EQ(cycled[preset.size()], preset[0]);
  EXPECT_EQ(cycled.back(), 5);
  EXPECT_THROW(bench::gpt2_124m_tensor_elems(0), Error);
}

TEST(BenchAdamCuda, WithoutAGpuItFailsWithOneLine) {
  if (visible_gpus() > 0) GTEST_SKIP() << "a GPU is visible: the next test runs the benchmark";
  const CommandResult result = run_command(std::string(zl::test::zerolab_binary()) +
                                           " bench adam --accelerator cuda --params 1000 --json");
  EXPECT_NE(result.exit_code, 0) << result.out;
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  const bool says_why = result.err.find("no CUDA GPU") != std::string::npos ||
                        result.err.find("built without CUDA") != std::string::npos;
  EXPECT_TRUE(says_why) << result.err;
  EXPECT_TRUE(result.out.empty()) << result.out;
}

TEST(BenchAdamCuda, OnAGpuTheJsonFollowsTheDefinitions) {
  if (visible_gpus() == 0) GTEST_SKIP() << "no GPU visible";
  const CommandResult result =
      run_command(std::string(zl::test::zerolab_binary()) +
                  " bench adam --accelerator cuda --params 40000000 --repeats 3 --no-torch --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto out = nlohmann::json::parse(result.out);
  EXPECT_EQ(out["accelerator"], "cuda");
  EXPECT_EQ(out["params"], 40'000'000);
  EXPECT_EQ(out["tensors"], bench::gpt2_124m_tensor_elems(40'000'000).size());
  EXPECT_NEAR(out["gbps"].get<double>(), 28.0 * 40e6 / (out["ms"].get<double>() * 1e6), 1e-9);
  EXPECT_NEAR(out["copy_gbps"].get<double>(),
              2.0 * out["copy_bytes"].get<double>() / (out["copy_ms"].get<double>() * 1e6), 1e-9);
  EXPECT_EQ(out["copy_bytes"], 14 * 40'000'000LL);
  EXPECT_LE(out["best_ms"].get<double>(), out["ms"].get<double>());
  EXPECT_TRUE(out["torch"].is_null());
}

TEST(BenchAdamCuda, CpuOnlyFlagsAreRefused) {
  const CommandResult result = run_command(std::string(zl::test::zerolab_binary()) +
                                           " bench adam --accelerator cuda --threads 2");
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_NE(result.err.find("--accelerator cpu"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace zl
