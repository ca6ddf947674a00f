// trainer.cpp — one training job on the sim, mpi or nccl backend, or in the reference process.
// Every backend runs the same per-rank body; only how the ranks are started and how their
// reports reach the caller differ.
#include "engines/trainer.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "ckpt/checkpoint.hpp"
#include "ckpt/reshard.hpp"
#include "ckpt/safetensors.hpp"
#include "engines/rank_reports.hpp"
#include "model/data.hpp"
#include "model/gpt.hpp"
#include "model/token_data.hpp"
#include "model/named_init.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "sim_comm.hpp"
#include "sim_world.hpp"
#ifdef ZL_HAVE_MPI
#include "comm/mpi/mpi_comm.hpp"
#endif
#ifdef ZL_HAVE_NCCL
#include "comm/nccl/nccl_bootstrap.hpp"
#include "comm/nccl/nccl_comm.hpp"
#include "ops/cuda/cuda_device.hpp"
#ifdef ZL_NCCL_WITH_MPI
#include "comm/nccl/nccl_mpi_bootstrap.hpp"
#endif
#endif

namespace zl {

std::string_view model_name(ModelKind kind) {
  return kind == ModelKind::Gpt ? "gpt" : "mlp";
}

std::string_view backend_name(Backend backend) {
  switch (backend) {
    case Backend::Mpi:
      return "mpi";
    case Backend::Nccl:
      return "nccl";
    default:
      return "sim";
  }
}

namespace {

[[maybe_unused]] constexpr std::string_view kNoMpi =
    "--backend mpi: this zerolab was built without MPI: install libopenmpi-dev openmpi-bin "
    "(scripts/setup.sh) and rebuild, or use --backend sim";

[[maybe_unused]] constexpr std::string_view kNoNccl =
    "--backend nccl: this zerolab was built without CUDA and NCCL: install the CUDA toolkit with "
    "NCCL and rebuild, or use --backend sim";

#ifdef ZL_HAVE_NCCL
// True under mpirun (OpenMPI sets OMPI_COMM_WORLD_SIZE), where MPI hands out the NCCL id.
bool under_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
}

// How this process joins the NCCL group: by MPI under mpirun, by the torchrun-style variables
// when WORLD_SIZE is above 1, else alone (W = 1, on GPU LOCAL_RANK when it is set).
NcclBootstrap nccl_bootstrap() {
#ifdef ZL_NCCL_WITH_MPI
  if (under_mpirun()) return nccl_bootstrap_from_mpi();
#endif
  ZL_CHECK(!under_mpirun(),
           "--backend nccl under mpirun needs a zerolab built with MPI: install libopenmpi-dev "
           "and rebuild, or launch with RANK, WORLD_SIZE and LOCAL_RANK set");
  if (std::getenv("WORLD_SIZE") == nullptr) return nccl_bootstrap_single();
  const NcclRankInfo info = nccl_rank_from_env();
  if (info.world > 1) return nccl_bootstrap_from_env();
  NcclBootstrap alone = nccl_bootstrap_single();  // WORLD_SIZE=1 needs no id exchange
  alone.rank = info;
  return alone;
}
#endif

}  // namespace

std::optional<int> launched_world(Backend backend) {
  if (backend == Backend::Sim) return std::nullopt;
  if (backend == Backend::Nccl) {
#ifdef ZL_HAVE_NCCL
    if (under_mpirun()) return std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE"));
    if (std::getenv("WORLD_SIZE") != nullptr) return nccl_rank_from_env().world;
    return 1;
#else
    fail("{}", kNoNccl);
#endif
  }
#ifdef ZL_HAVE_MPI
  return mpi_world_size();
#else
  fail("{}", kNoMpi);
#endif
}

void validate(const TrainConfig& config) {
  if (config.model == ModelKind::Gpt) {
    validate(config.gpt);
  } else {
    validate(config.mlp);
    ZL_CHECK(config.data_file.empty(),
             "--data {} needs --model gpt: the MLP trains on its synthetic task",
             config.data_file.string());
  }
  validate(config.features);
  ZL_CHECK(config.world >= 1, "--world {} is invalid: use 1 or more ranks", config.world);
  ZL_CHECK(config.steps >= 1, "--steps {} is invalid: train at least 1 step", config.steps);
  ZL_CHECK(config.micro_batch >= 1, "--micro-batch {} is invalid: use 1 or more rows per rank",
           config.micro_batch);
  ZL_CHECK(config.adamw.lr > 0.0, "--lr {} is invalid: the learning rate must be > 0",
           config.adamw.lr);
  ZL_CHECK(config.adamw.weight_decay >= 0.0, "--weight-decay {} is invalid: use 0 or more",
           config.adamw.weight_decay);
  ZL_CHECK(config.collective_timeout.count() > 0,
           "--collective-timeout-ms {} is invalid: use a positive number of milliseconds",
           config.collective_timeout.count());
  ZL_CHECK(config.faults.empty() || config.engine != EngineKind::Reference,
           "--inject-fault needs a distributed engine (--stage 0-3): the reference makes no "
           "collective calls");
  if (config.backend != Backend::Sim) {
    const std::string_view name = backend_name(config.backend);
#ifndef ZL_HAVE_MPI
    if (config.backend == Backend::Mpi) fail("{}", kNoMpi);
#endif
#ifndef ZL_HAVE_NCCL
    if (config.backend == Backend::Nccl) fail("{}", kNoNccl);
#endif
    ZL_CHECK(config.engine != EngineKind::Reference,
             "--backend {} needs a distributed engine (--stage 0-3): the reference runs in one "
             "process",
             name);
    ZL_CHECK(config.faults.empty(),
             "--inject-fault is the simulator's: use --backend sim (on {} a failing rank aborts "
             "the job)",
             name);
    ZL_CHECK(!config.record_timeline,
             "--trace and --what-if-world need every rank's simulated timeline: use --backend sim");
    ZL_CHECK(!config.record_data,
             "--save-data needs every rank's samples in one process: use --backend sim (the data "
             "are the same on every backend)");
  }
  ZL_CHECK(config.backend != Backend::Mpi || config.accelerator == Accelerator::Cpu,
           "--backend mpi runs on the CPU: drop --accelerator {} (GPUs use --backend nccl)",
           accelerator_name(config.accelerator));
  ZL_CHECK(config.backend != Backend::Nccl || config.accelerator == Accelerator::Cuda,
           "--backend nccl runs on GPUs: use --accelerator cuda (the default with nccl)");
  if (config.accelerator != Accelerator::Cpu) {
    ZL_CHECK(config.engine != EngineKind::Reference,
             "--engine reference runs on the CPU: drop --accelerator {}, or train a stage "
             "(--stage 0-3) on it",
             accelerator_name(config.accelerator));
    ZL_CHECK(!config.features.offload_optimizer,
             "--offload-optimizer keeps the optimizer in host memory, which only --accelerator "
             "cpu has: drop one of them");
  }
  validate_faults(config.faults, config.world, "--inject-fault");
  ZL_CHECK(config.link.busbw_gbps > 0.0 && config.link.alpha_us >= 0.0,
           "link {} is invalid: give a bus bandwidth > 0 GB/s and a latency >= 0 us",
           config.link.name);
}

namespace {

ClassificationTask task_of(const TrainConfig& config) {
  return {.features = config.mlp.in, .classes = config.mlp.classes, .seed = config.seed};
}

// Where a run starts: step 0 and sample 0, or a checkpoint's step and next global sample.
struct StartPoint {
  std::int64_t step = 0;
  std::int64_t sample = 0;
};

// Samples first .. first + rows - 1 of the run's task: the MLP's classification task, or the
// GPT's token source (the Markov language, or --data FILE) in windows of block_size tokens.
using SampleFn = std::function<Batch(std::int64_t first, std::int64_t rows)>;

SampleFn sample_source(const TrainConfig& config) {
  if (config.model == ModelKind::Mlp) {
    return [task = task_of(config)](std::int64_t first, std::int64_t rows) {
      return task.batch(first, rows);
    };
  }
  std::shared_ptr<const TokenSource> tokens;
  if (config.data_file.empty()) {
    tokens = std::make_shared<MarkovTokens>(config.gpt.vocab, config.seed);
  } else {
    auto file = std::make_shared<TokenFile>(config.data_file, config.gpt.vocab, config.seed);
    file->check_fits(config.gpt.block_size);
    tokens = file;
  }
  return [tokens, seq_len = config.gpt.block_size](std::int64_t first, std::int64_t rows) {
    return tokens->batch(first, rows, seq_len);
  };
}

// Elements one sample adds to each of UsedData's vectors: {x, y, tokens}.
struct SampleElems {
  std::int64_t x = 0, y = 0, tokens = 0;
};

SampleElems sample_elems(const TrainConfig& config) {
  if (config.model == ModelKind::Gpt) return {0, config.gpt.block_size, config.gpt.block_size};
  return {config.mlp.in, 1, 0};
}

// The data source engines see; with record_data it also copies each batch into `used` (rows
// counted from the start point). Micro-step m >= start.step * k, rank r uses samples from
// start.sample + ((m - start.step * k) W + r) B, so a resumed run continues by global sample.
BatchFn batch_source(const TrainConfig& config, StartPoint start, UsedData* used) {
  const SampleFn samples = sample_source(config);
  const SampleElems elems = sample_elems(config);
  const std::int64_t first_micro_step = start.step * config.features.grad_accum_steps;
  return [samples, elems, config, start, first_micro_step, used](std::int64_t micro_step,
                                                                 int rank) {
    const std::int64_t row =
        first_sample_of(micro_step - first_micro_step, rank, config.world, config.micro_batch);
    Batch batch = samples(start.sample + row, config.micro_batch);
    if (used != nullptr) {  // rows of different ranks are disjoint, so threads never overlap
      std::ranges::copy(batch.x, used->x.begin() + row * elems.x);
      std::ranges::copy(batch.y, used->y.begin() + row * elems.y);
      std::ranges::copy(batch.tokens, used->tokens.begin() + row * elems.tokens);
    }
    return batch;
  };
}

Manifest manifest_of(const TrainConfig& config, std::int64_t step, const ShardState& state,
                     const std::vector<UnitLayout>& layout) {
  Manifest manifest;
  manifest.step = step;
  manifest.adam_updates = state.adam_updates;
  if (config.features.precision == DType::F16) manifest.loss_scaler = state.scaler;
  manifest.stage = stage_of(config.engine);
  manifest.world = config.world;
  manifest.model_kind = std::string(model_name(config.model));
  manifest.mlp = config.mlp;
  manifest.gpt = config.gpt;
  manifest.seed = config.seed;
  manifest.micro_batch = config.micro_batch;
  manifest.grad_accum_steps = config.features.grad_accum_steps;
  manifest.adamw = config.adamw;
  manifest.units = layout;
  return manifest;
}

// The engine phases that end a span of computation, and the span's name on the timeline.
std::optional<std::string> compute_label(const EngineEvent& event) {
  if (event.phase != "forward" && event.phase != "backward" && event.phase != "update") {
    return std::nullopt;
  }
  return event.unit >= 0 ? fmt::format("{} {}", event.phase, event.unit) : std::string(event.phase);
}

// The ranks' timelines: simulated compute is measured CPU time, or that scaled to the device.
struct TimelineSetup {
  TimelineOptions options;
  double cpu_gflops = 0.0;
};

TimelineSetup timeline_setup(const TrainConfig& config) {
  TimelineSetup setup;
  setup.options.link = config.link;
  setup.options.record_program = config.record_timeline;
  setup.options.record_events = config.record_timeline;
  if (config.device && !is_measured_cpu(*config.device)) {
    setup.cpu_gflops = measure_cpu_gflops();
    setup.options.compute_scale =
        setup.cpu_gflops / achieved_gflops(*config.device, config.features.precision);
  }
  return setup;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

namespace {

// The tensors of --init, read once for all ranks (empty without --init).
NamedTensors init_tensors(const TrainConfig& config) {
  NamedTensors tensors;
  if (config.init_file.empty()) return tensors;
  for (const auto& record : read_safetensors(config.init_file)) {
    tensors[record.name] = {record.shape, to_floats(record)};
  }
  return tensors;
}

// The model one rank trains: the MLP or the GPT, starting from --init's tensors when there are
// any.
class RankModel {
 public:
  RankModel(Device& device, const TrainConfig& config, const NamedTensors& init) {
    if (config.model == ModelKind::Gpt) {
      model_ = std::make_unique<Gpt>(device, config.gpt);
    } else {
      model_ = std::make_unique<Mlp>(device, config.mlp);
    }
    if (!config.init_file.empty()) from_file_.emplace(*model_, init, config.init_file.string());
  }
  Model& get() { return from_file_ ? static_cast<Model&>(*from_file_) : *model_; }

 private:
  std::unique_ptr<Model> model_;
  std::optional<NamedInitModel> from_file_;
};

}  // namespace

namespace {

// What one rank's run leaves behind.
struct RankRun {
  RankReport report;  // its ledgers, read right after the last step
  std::vector<UnitLayout> layout;
  ModelState state;     // the full state (every rank assembles it)
  std::string stopped;  // the NonFiniteError's message when the run stopped at a non-finite norm
  std::vector<StepTimes> step_times;  // its timeline's times of every step
};

// Hands a rank's checkpoint file entry over once it has written its file; returns every rank's
// on rank 0 (rank 0 first), after a barrier.
using ShareFile = std::function<std::vector<FileEntry>(Comm&, FileEntry)>;

// One rank's whole run on `comm` and `device`, with `clocks` its timeline.
using RunRank = std::function<RankRun(Comm&, Device&, RankTimeline&, const ShareFile&)>;

// The end of a run with one rank per process (mpi, nccl): a non-finite stop is rank 0's error;
// otherwise every rank's ledgers and step times reach rank 0 through `gather` (collective:
// every rank's encoded totals, in rank order, at least on rank 0), whose result is completed
// and returned; other ranks return an empty result.
TrainResult finish_process_run(
    TrainResult& result, RankRun& run, bool is_rank0,
    const std::function<std::vector<std::string>(const std::string&)>& gather) {
  if (!run.stopped.empty() && is_rank0) throw Error(run.stopped);
  TrainResult elsewhere;  // what the other ranks' processes return
  elsewhere.has_results = false;
  if (!run.stopped.empty()) return elsewhere;
  const std::vector<std::string> totals =
      gather(encode_rank_totals({.report = run.report, .steps = run.step_times}));
  if (!is_rank0) return elsewhere;
  for (const auto& bytes : totals) {
    RankTotals rank = decode_rank_totals(bytes);
    TimelineRecord timeline_record;
    timeline_record.rank = rank.report.rank;
    timeline_record.steps = std::move(rank.steps);
    result.timelines.push_back(std::move(timeline_record));
    result.ranks.push_back(std::move(rank.report));
  }
  result.layout = std::move(run.layout);
  result.final_state = std::move(run.state);
  return std::move(result);
}

#ifdef ZL_HAVE_MPI
// The mpi backend: this process runs its rank on an MpiComm. The per-rank reports travel to rank
// 0's process out of band (not in the traffic ledger), so the ledgers are the sim's. A rank that
// fails aborts the job with its message; a non-finite norm stops every rank at the same step and
// rank 0 reports it.
// `result` is train()'s, which the steps fill as they run; it is returned completed.
TrainResult train_on_mpi(const TrainConfig& config, TrainResult& result,
                         const TimelineOptions& timeline, const RunRank& run_rank) {
  MpiComm comm(config.mpi_reduce, timeline);
  ZL_CHECK(comm.size() == config.world,
           "--world {} does not match the {} processes mpirun started: drop --world or run "
           "mpirun -np {}",
           config.world, comm.size(), config.world);
  const ShareFile share_file = [&comm](Comm&, FileEntry entry) {
    std::vector<FileEntry> files;
    for (const auto& bytes : comm.gather_to_root(encode_file_entry(entry))) {
      files.push_back(decode_file_entry(bytes));
    }
    comm.barrier();
    return files;
  };
  RankRun run;
  try {
    CpuDevice device;
    run = run_rank(comm, device, comm.timeline(), share_file);
  } catch (const std::exception& e) {
    mpi_abort(e.what());
  }
  return finish_process_run(result, run, comm.rank() == 0, [&comm](const std::string& bytes) {
    return comm.gather_to_root(bytes);
  });
}
#else
TrainResult train_on_mpi(const TrainConfig&, TrainResult&, const TimelineOptions&, const RunRank&) {
  fail("{}", kNoMpi);
}
#endif

#ifdef ZL_HAVE_NCCL
// Every rank's `bytes`, rank order, over `comm`: their sizes, then the bytes padded to the
// longest, in 8-byte words (host buffers: NcclComm stages them through the device). Counted in
// the rank's traffic ledger like any collective. Collective.
std::vector<std::string> all_gather_bytes(Comm& comm, const std::string& bytes) {
  const auto world = static_cast<std::size_t>(comm.size());
  std::vector<std::int64_t> sizes(world);
  auto own_size = static_cast<std::int64_t>(bytes.size());
  comm.all_gather(&own_size, sizes.data(), 1, DType::I64);
  const std::int64_t words = (*std::ranges::max_element(sizes) + 7) / 8;
  std::vector<std::int64_t> send(static_cast<std::size_t>(words), 0);
  std::vector<std::int64_t> recv(static_cast<std::size_t>(words) * world);
  std::memcpy(send.data(), bytes.data(), bytes.size());
  comm.all_gather(send.data(), recv.data(), static_cast<std::size_t>(words), DType::I64);
  std::vector<std::string> all;
  for (std::size_t r = 0; r < world; ++r) {
    const auto* first = reinterpret_cast<const char*>(recv.data() + r * static_cast<std::size_t>(words));
    all.emplace_back(first, static_cast<std::size_t>(sizes[r]));
  }
  return all;
}

// The nccl backend: this process runs its rank on its GPU (LOCAL_RANK) through an NcclComm. The
// per-rank reports and checkpoint file entries travel by all_gather_bytes. A rank that fails
// prints its message and exits, and NCCL has no timeout: the other ranks then wait in their next
// collective until the launcher ends them.
TrainResult train_on_nccl(const TrainConfig& config, TrainResult& result,
                          const TimelineOptions& timeline, const RunRank& run_rank) {
  const NcclBootstrap bootstrap = nccl_bootstrap();
  ZL_CHECK(bootstrap.rank.world == config.world,
           "--world {} does not match the {} processes launched: drop --world or launch {}",
           config.world, bootstrap.rank.world, config.world);
  std::unique_ptr<Device> device = make_rank_device(Accelerator::Cuda, bootstrap.rank.local_rank,
                                                    config.features.precision);
  NcclComm comm(static_cast<CudaDevice&>(*device), bootstrap);
  RankTimeline clocks(config.world, timeline);
  clocks.start();
  const ShareFile share_file = [](Comm& own, FileEntry entry) {
    std::vector<FileEntry> files;
    for (const auto& bytes : all_gather_bytes(own, encode_file_entry(entry))) {
      files.push_back(decode_file_entry(bytes));
    }
    return files;
  };
  RankRun run = run_rank(comm, *device, clocks, share_file);
  return finish_process_run(result, run, comm.rank() == 0, [&comm](const std::string& bytes) {
    return all_gather_bytes(comm, bytes);
  });
}
#else
TrainResult train_on_nccl(const TrainConfig&, TrainResult&, const TimelineOptions&,
                          const RunRank&) {
  fail("{}", kNoNccl);
}
#endif

}  // namespace

double measure_cpu_gflops() {
  constexpr std::int64_t kN = 256;
  constexpr double kMinCpuMs = 30.0;
  CpuDevice device;
  std::vector<float> x(kN * kN, 0.5f), w(kN * kN, 0.25f), y(kN * kN);
  double best_gflops = 0.0;
  for (int round = 0; round < 3; ++round) {  // the fastest of three rounds: the least disturbed
    const double start_ms = thread_cpu_ms();
    std::int64_t calls = 0;
    double spent_ms = 0.0;
    while (spent_ms < kMinCpuMs / 3) {
      device.linear_forward(x, w, {}, y, kN, kN, kN);
      ++calls;
      spent_ms = thread_cpu_ms() - start_ms;
    }
    const double flops = 2.0 * kN * kN * kN * static_cast<double>(calls);
    best_gflops = std::max(best_gflops, flops / (spent_ms * 1e6));
  }
  return best_gflops;
}

std::vector<std::vector<float>> initial_params(const TrainConfig& config) {
  CpuDevice device;
  const NamedTensors init = init_tensors(config);
  RankModel rank_model(device, config, init);
  const Model& model = rank_model.get();
  std::vector<std::vector<float>> params;
  for (std::size_t u = 0; u < model.units().size(); ++u) {
    params.emplace_back(static_cast<std::size_t>(model.units()[u].numel()));
    model.init_unit(static_cast<int>(u), params.back(), config.seed);
  }
  return params;
}

TrainResult train(const TrainConfig& config, const StepCallback& on_step,
                  const RankObserver& observer, const CheckpointPlan& checkpoints) {
  validate(config);
  const bool saving = !checkpoints.dir.empty();
  const bool resuming = !checkpoints.resume.empty();
  ZL_CHECK(!(saving || resuming) || config.engine != EngineKind::Reference,
           "checkpoints need a distributed engine (--stage 0-3): the reference keeps no shards");
  ZL_CHECK(checkpoints.every_steps >= 0, "--checkpoint-every {} is invalid: use 1 or more steps",
           checkpoints.every_steps);
  // Read and verify the checkpoint once; every rank then loads its own (re-sliced) shards.
  Manifest resumed;
  StartPoint start;
  if (resuming) {
    resumed = read_manifest(checkpoints.resume);
    start = {resumed.step, next_sample(resumed)};
    ZL_CHECK(config.steps > start.step,
             "{} is at step {}: --steps counts from the run's start, so give more than {}",
             checkpoints.resume.string(), start.step, start.step);
  }
  const NamedTensors init = init_tensors(config);
  if (!config.init_file.empty()) {  // check the file against the model once, before any rank starts
    CpuDevice device;
    RankModel check(device, config, init);
  }
  TrainResult result;
  if (config.record_data) {
    const std::int64_t rows = (config.steps - start.step) * config.features.grad_accum_steps *
                              config.world * config.micro_batch;
    const SampleElems elems = sample_elems(config);
    result.data.x.resize(static_cast<std::size_t>(rows * elems.x));
    result.data.y.resize(static_cast<std::size_t>(rows * elems.y));
    result.data.tokens.resize(static_cast<std::size_t>(rows * elems.tokens));
  }
  const EngineOptions options{
      .adamw = config.adamw,
      .seed = config.seed,
      .batch = batch_source(config, start, config.record_data ? &result.data : nullptr),
      .observer = {},
      .nonfinite = config.nonfinite,
      .features = config.features};
  const TimelineSetup timeline = timeline_setup(config);
  result.compute_scale = timeline.options.compute_scale;
  result.cpu_gflops = timeline.cpu_gflops;
  // Each rank's engine reports its events with its rank number; its compute phases also name the
  // spans of its timeline.
  auto options_of_rank = [&](int rank, RankTimeline* clocks) {
    EngineOptions own = options;
    own.observer = [&observer, rank, clocks](const EngineEvent& event, const MemoryLedger& ledger) {
      if (auto label = compute_label(event)) clocks->mark(*label);
      if (!observer) return;
      observer(rank, event, ledger);
      clocks->discard();  // the observer's own work is not the step's
    };
    return own;
  };

  // Runs the step loop for one engine (whose loss is already the mean over ranks); `after_step`
  // gets the number of completed steps.
  const std::int64_t step_tokens =
      config.world * config.features.grad_accum_steps * config.micro_batch *
      (config.model == ModelKind::Gpt ? config.gpt.block_size : 1);
  auto run_steps = [&](Engine& engine, Device& device, bool is_rank0, RankTimeline& clocks,
                       const std::function<void(std::int64_t)>& after_step) {
    for (std::int64_t step = start.step; step < config.steps; ++step) {
      const auto started = std::chrono::steady_clock::now();
      clocks.begin_step(step);
      const StepStats stats = engine.step(step);
      device.synchronize();  // a GPU's step has ended when its queued work has
      const double step_ms = ms_since(started);
      const StepTimes times = clocks.end_step();
      const StepRecord record{.step = step,
                              .loss = stats.loss,
                              .grad_norm = stats.grad_norm,
                              .step_ms = step_ms,
                              .skipped = stats.skipped,
                              .compute_ms = times.compute_ms,
                              .comm_ms = times.comm_ms,
                              .exposed_comm_ms = times.exposed_comm_ms,
                              .sim_step_ms = times.step_ms,
                              .tokens = step_tokens,
                              .memory = device.ledger()};
      after_step(step + 1);
      if (!is_rank0) continue;
      result.steps.push_back(record);
      if (on_step) on_step(record);
    }
  };

  if (config.engine == EngineKind::Reference) {
    CpuDevice device;
    RankModel rank_model(device, config, init);
    Model& model = rank_model.get();
    result.layout = layout_units(model.units(), config.world);
    RankTimeline clocks(1, timeline.options);  // one process: compute only
    clocks.start();
    auto engine = make_reference_engine(model, device, config.world, options_of_rank(0, &clocks));
    run_steps(*engine, device, true, clocks, [](std::int64_t) {});
    result.ranks.push_back({0, device.ledger(), TrafficLedger{}});
    result.timelines.push_back({.rank = 0,
                                .steps = clocks.clocks().steps(),
                                .program = clocks.clocks().program(),
                                .events = clocks.clocks().events()});
    result.final_state = engine->full_state();
    return result;
  }

  // One rank's whole run, the same on every backend: its model and engine, the resumed shards,
  // the steps with their checkpoints, then its ledgers and the full state (collective).
  // `share_file` hands the rank's checkpoint file entry over and returns on rank 0 every rank's,
  // rank 0 first, once all have written theirs.
  auto run_rank = [&](Comm& comm, Device& device, RankTimeline& clocks,
                      const ShareFile& share_file) {
    RankRun run;
    RankModel rank_model(device, config, init);
    Model& model = rank_model.get();
    const std::vector<UnitLayout> layout = layout_units(model.units(), config.world);
    auto engine =
        make_engine(config.engine, model, device, comm, options_of_rank(comm.rank(), &clocks));
    if (resuming) {
      ShardState shards = load_rank_shards(resumed, layout, comm.rank(), config.world);
      shards.scaler = resumed.loss_scaler;
      engine->load_shard_state(shards);
    }
    const bool is_rank0 = comm.rank() == 0;
    // Every rank writes its file; once all have (barrier), rank 0 commits manifest and `latest`.
    auto save = [&](std::int64_t done) {
      const bool due = done == config.steps ||
                       (checkpoints.every_steps > 0 && done % checkpoints.every_steps == 0);
      if (!saving || !due) return;
      const ShardState state = engine->shard_state();
      const std::vector<FileEntry> files = share_file(
          comm, write_rank_file(step_dir(checkpoints.dir, done), comm.rank(), layout, state));
      if (is_rank0) {
        commit_checkpoint(checkpoints.dir, manifest_of(config, done, state, layout), files);
      }
      comm.barrier();
    };
    try {
      run_steps(*engine, device, is_rank0, clocks, save);
    } catch (const NonFiniteError& e) {
      // The norm has the same bits everywhere, so all ranks leave here after the same step; a
      // rank that did not would leave the others waiting, which the simulator reports.
      run.stopped = e.what();
      return run;
    }
    run.report = {comm.rank(), device.ledger(), comm.traffic()};
    run.step_times = clocks.clocks().steps();
    run.state = engine->full_state();
    run.layout = layout;
    return run;
  };

  if (config.backend == Backend::Mpi) {
    return train_on_mpi(config, result, timeline.options, run_rank);
  }
  if (config.backend == Backend::Nccl) {
    return train_on_nccl(config, result, timeline.options, run_rank);
  }

  SimWorld world(config.world, SimOptions{.timeout = config.collective_timeout,
                                          .faults = config.faults,
                                          .timeline = timeline.options});
  result.ranks.resize(static_cast<std::size_t>(config.world));
  std::vector<FileEntry> saved(static_cast<std::size_t>(config.world));  // one slot per rank
  std::string stopped;  // rank 0's NonFiniteError: every rank stops at the same step
  world.run([&](Comm& comm) {
    // Every rank of the sim shares GPU 0 (the simulator's collectives run on one GPU's memory).
    const std::unique_ptr<Device> device =
        make_rank_device(config.accelerator, 0, config.features.precision);
    RankRun run = run_rank(comm, *device, *sim_timeline(comm), [&saved](Comm& own,
                                                                        FileEntry entry) {
      saved[static_cast<std::size_t>(own.rank())] = std::move(entry);
      own.barrier();
      return saved;
    });
    if (comm.rank() != 0) {
      if (run.stopped.empty()) result.ranks[static_cast<std::size_t>(comm.rank())] = run.report;
      return;
    }
    stopped = run.stopped;
    if (!stopped.empty()) return;
    result.ranks[0] = run.report;
    result.layout = std::move(run.layout);
    result.final_state = std::move(run.state);
  });
  if (!stopped.empty()) throw Error(stopped);
  for (int r = 0; r < config.world; ++r) result.timelines.push_back(world.timeline(r));
  return result;
}

}  // namespace zl
