// step_bench.hpp — `zerolab bench step`: the same training run (model, shape, world, steps) once
// per ZeRO stage on the simulator, the median wall time of a step on rank 0 (StepRecord.step_ms)
// for each, each stage's overhead over DDP as a ratio of medians from the same run, and the
// step's GFLOP/s beside the machine's single-thread GEMM rate measured in the same run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt_config.hpp"
#include "run/train.hpp"

namespace zl::bench {

/// What to run. The rest of the TrainConfig keeps its defaults.
struct StepBenchOptions {
  ModelKind model = ModelKind::Gpt;  ///< the model trained at every stage
  std::string preset = "tiny";  ///< name of the GPT shape's preset, for the report
  GptConfig gpt = gpt_preset("tiny");  ///< the GPT's shape (model Gpt): the preset's or given
  int world = 2;            ///< simulated ranks
  int threads = 0;          ///< CPU threads per rank (TrainConfig::threads; 0: cores / ranks)
  std::int64_t steps = 20;  ///< per stage; the first is a warm-up and not in the median
  std::int64_t micro_batch = 32;  ///< samples per rank per step
  /// Where the ranks compute (TrainConfig::accelerator): cpu-detached counts the host waits a GPU
  /// would make, cuda runs the sim's ranks on GPU 0.
  Accelerator accelerator = Accelerator::Cpu;
  /// Parameters and gradients held and communicated in fp32, or bf16/fp16 (TrainingFeatures).
  DType precision = DType::F32;
  /// Times the four stages are trained in turn; the median is over every round's steps, so a
  /// machine that slows down during the run slows every stage alike.
  int rounds = 2;
};

/// One stage's result.
struct StepRow {
  int stage = 0;       ///< 0 is DDP
  std::string engine;  ///< "ddp", "zero1", "zero2" or "zero3"
  double ms = 0.0;     ///< median step_ms over steps 2..S of every round (step 1 when S is 1)
  double overhead_vs_ddp = 0.0;  ///< ms / the DDP row's ms
  double gflops = 0.0;  ///< the step's training FLOPs (train_flops_per_step) / ms, in GFLOP/s
  /// The most times one timed step on rank 0 made the host wait (StepRecord::host_waits: 0 on the
  /// cpu accelerator, what a GPU waits for on cpu-detached and cuda).
  std::int64_t host_waits = 0;
};

/// All stages of one run.
struct StepBenchResult {
  std::string model;              ///< "gpt" or "mlp"
  std::string preset;             ///< the preset's name and the GPT's sizes; "" for the MLP
  std::int64_t params_elems = 0;  ///< the model's parameter count (no padding, no padded rows)
  int world = 0;                  ///< simulated ranks
  int threads = 0;                ///< CPU threads each rank ran on
  int cores = 0;                  ///< the machine's hardware threads
  std::int64_t steps = 0;         ///< steps per stage per round, warm-up included
  int rounds = 0;                 ///< times each stage was trained
  double step_gflop = 0.0;        ///< training GFLOP of one step of the world
  std::string gemm_isa;           ///< the instruction set the GEMMs ran on
  /// The best of three timings of one 1024^3 fp32 GEMM as a single Eigen call on one thread,
  /// taken before the stages run, in GFLOP/s.
  double gemm_gflops = 0.0;
  std::vector<StepRow> rows;  ///< stages 0..3
};

/// The TrainConfig each stage runs, with `stage`'s engine.
TrainConfig step_bench_config(const StepBenchOptions& options, int stage);

/// GFLOP/s of an n x n x n fp32 GEMM as one Eigen call on the calling thread: the best of
/// three timings.
double single_thread_gemm_gflops(std::int64_t n);

/// Trains stages 0..3 in turn, `rounds` times. Throws zl::Error for a bad config (validate())
/// or rounds < 1.
StepBenchResult run_step_bench(const StepBenchOptions& options);

}  // namespace zl::bench
