// estimate.cpp — the engines' view of model-state accounting per stage, in integer bytes: the
// padded element counts of state_elems() multiplied the way the engines allocate their buffers.
// Stage s shards: 0 nothing, 1 the optimizer state (and the fp32 master copy), 2 also the
// gradients, 3 also the parameters. The paper's view is estimate_paper.cpp; the models' units
// estimate_models.cpp.
#include "engines/estimate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "core/error.hpp"
#include "engines/checked_math.hpp"
#include "engines/param_swap.hpp"
#include "engines/partition.hpp"

namespace zl {

namespace {

// What to change when a count overflows.
constexpr std::string_view kTooLarge = "the model is too large to estimate; use fewer parameters";
constexpr std::string_view kTooManyBytes =
    "the model's bytes are too large to estimate; give fewer parameters or a smaller "
    "--optimizer-bytes";

std::int64_t checked_add(std::int64_t a, std::int64_t b) { return zl::checked_add(a, b, kTooLarge); }

std::int64_t checked_bytes(std::int64_t bytes_per_elem, std::int64_t elems) {
  return checked_mul(bytes_per_elem, elems, kTooManyBytes);
}

// How one category is held at a stage.
enum class Held {
  None,     // not at all
  Whole,    // the whole replica, Ψp
  Sharded,  // the rank's shard, Ψp/N
  Zero3,    // the shard of every unit but the persistent ones, which are whole
};

// The bytes and the formula of one category: `bytes_per_param` * the elements it holds.
struct Category {
  std::int64_t bytes = 0;
  std::string formula;          // "" when held not at all
  std::int64_t whole = 0;       // coefficient of Ψp in the collected total
  std::int64_t sharded = 0;     // coefficient of Ψp/N
  std::int64_t persistent = 0;  // coefficient of Ψw(N-1)/N
  std::int64_t persistent_whole = 0;  // coefficient of Ψw (persistent units alone)
  std::int64_t partitioned = 0;       // coefficient of Ψp/K (hpZ's secondary shards)
};

Category category(const StateElems& elems, int bytes_per_param, Held held) {
  const std::string_view psi = elems.padded() ? "Ψp" : "Ψ";
  Category out;
  if (held == Held::None || bytes_per_param == 0) return out;
  if (held == Held::Zero3 && elems.persistent_elems == 0) held = Held::Sharded;
  switch (held) {
    case Held::Whole:
      out.bytes = checked_bytes(bytes_per_param, elems.replica_elems);
      out.formula = fmt::format("{}{}", bytes_per_param, psi);
      out.whole = bytes_per_param;
      break;
    case Held::Sharded:
      out.bytes = checked_bytes(bytes_per_param, elems.shard_elems);
      out.formula = fmt::format("{}{}/N", bytes_per_param, psi);
      out.sharded = bytes_per_param;
      break;
    case Held::Zero3: {
      // Every unit's shard, then the rest of each persistent unit: S - Ψw/N + Ψw.
      const std::int64_t held_elems =
          elems.shard_elems - elems.persistent_elems / elems.world + elems.persistent_elems;
      out.bytes = checked_bytes(bytes_per_param, held_elems);
      out.formula = fmt::format("{0}({1} - Ψw)/N + {0}Ψw", bytes_per_param, psi);
      out.sharded = bytes_per_param;
      out.persistent = bytes_per_param;
      break;
    }
    case Held::None:
      break;
  }
  return out;
}

// hpZ's secondary shards added to `params`: each unit's padded buffer cut among K ranks, Ψp/K
// (the padding to a multiple of N * 64 is a multiple of K * 64, so nothing rounds), but for the
// units kept whole, (Ψp - Ψw)/K.
void add_secondary(Category& params, const StateElems& elems, int bytes_per_param, int ranks) {
  const std::string_view psi = elems.padded() ? "Ψp" : "Ψ";
  const std::int64_t cut_elems = elems.replica_elems - elems.persistent_elems;
  const std::int64_t held_elems = cut_elems / ranks + (cut_elems % ranks != 0);
  params.bytes = checked_add(params.bytes, checked_bytes(bytes_per_param, held_elems));
  const std::string term = elems.persistent_elems == 0
                               ? fmt::format("{}{}/K", bytes_per_param, psi)
                               : fmt::format("{}({} - Ψw)/K", bytes_per_param, psi);
  params.formula = params.formula.empty() ? term : fmt::format("{} + {}", params.formula, term);
  params.partitioned = bytes_per_param;
}

std::string collected_formula(const StateElems& elems, const std::vector<Category>& parts) {
  const std::string_view psi = elems.padded() ? "Ψp" : "Ψ";
  std::int64_t whole = 0, sharded = 0, persistent = 0, persistent_whole = 0, partitioned = 0;
  for (const auto& part : parts) {
    whole += part.whole;
    sharded += part.sharded;
    persistent += part.persistent;
    persistent_whole += part.persistent_whole;
    partitioned += part.partitioned;
  }
  std::vector<std::string> terms;
  if (whole > 0) terms.push_back(fmt::format("{}{}", whole, psi));
  if (sharded > 0) terms.push_back(fmt::format("{}{}/N", sharded, psi));
  if (persistent > 0) terms.push_back(fmt::format("{}Ψw(N-1)/N", persistent));
  if (persistent_whole > 0) terms.push_back(fmt::format("{}Ψw", persistent_whole));
  if (partitioned > 0) terms.push_back(fmt::format("{}{}/K", partitioned, psi));
  return fmt::format("{}", fmt::join(terms, " + "));
}

// The master and optimizer terms' formulas, in that order (no master: none).
std::vector<std::string> formulas_of(const Category& master, const Category& optimizer) {
  std::vector<std::string> terms;
  if (!master.formula.empty()) terms.push_back(master.formula);
  terms.push_back(optimizer.formula);
  return terms;
}

// ZeRO-3's offloaded parameter shards: in host memory, or on NVMe those past max_in_cpu, which
// pass through the swap buffers in host memory. Each category has its formula's terms.
struct OffloadedParams {
  Category host;
  std::vector<std::string> host_terms;
  Category disk;
};

// `elems`' offloaded shards (p bytes each, `offloaded` in symbols) placed as `options` say.
OffloadedParams place_offloaded(const StateElems& elems, const EstimateOptions& options, int p,
                                const std::string& offloaded) {
  const std::int64_t offloaded_elems = elems.shard_elems - elems.persistent_elems / elems.world;
  OffloadedParams out;
  if (options.param_tier != OffloadTier::Nvme) {
    out.host.bytes = checked_bytes(p, offloaded_elems);
    out.host_terms = {fmt::format("{}{}", p, offloaded)};
    return out;
  }
  const std::vector<std::int64_t> pieces = elems.unit_shard_elems.empty()
                                               ? std::vector<std::int64_t>{offloaded_elems}
                                               : elems.unit_shard_elems;
  const std::vector<bool> on_disk = shards_on_disk(pieces, options.param_max_in_cpu_elems);
  std::int64_t kept_elems = 0, disk_elems = 0;
  std::vector<std::int64_t> disk_pieces;
  for (std::size_t u = 0; u < pieces.size(); ++u) {
    (on_disk[u] ? disk_elems : kept_elems) += pieces[u];
    disk_pieces.push_back(on_disk[u] ? pieces[u] : 0);
  }
  // a unit's shard must fit a buffer (the engines refuse it otherwise); a bare count's one piece
  // is as many units as it takes, each buffer then full
  const std::int64_t buffer_elems =
      elems.unit_shard_elems.empty() ? std::min(disk_elems, options.param_buffer_elems)
                                     : swap_buffer_elems(disk_pieces, options.param_buffer_elems);
  const std::int64_t buffers_elems = checked_bytes(options.param_buffer_count, buffer_elems);
  out.host.bytes = checked_bytes(p, checked_add(kept_elems, buffers_elems));
  if (kept_elems > 0) out.host_terms.push_back(fmt::format("{}Ψc", p));
  if (buffers_elems > 0) {
    out.host_terms.push_back(fmt::format("{}·{}b", p, options.param_buffer_count));
  }
  out.disk.bytes = checked_bytes(p, disk_elems);
  if (disk_elems > 0) {
    out.disk.formula = kept_elems == 0 ? fmt::format("{}{}", p, offloaded)
                                       : fmt::format("{}({} - Ψc)", p, offloaded);
  }
  return out;
}

// A stage's ledger from its categories {params, grads, accumulator, master, optimizer} held on
// the device, but the master and optimizer where `tier` puts them, and `offloaded` (ZeRO-3's
// offloaded shards, empty otherwise) where place_offloaded put them.
LedgerEstimate ledger_of(int stage, const StateElems& elems, const std::array<Category, 5>& parts,
                         const OffloadedParams& offloaded, OffloadTier tier) {
  const auto& [params, grads, accum, master, optimizer] = parts;
  std::vector<std::string> device_terms;
  if (!params.formula.empty()) device_terms.push_back(params.formula);
  device_terms.push_back(accum.formula.empty()
                             ? grads.formula
                             : fmt::format("({} + {})", grads.formula, accum.formula));
  std::vector<std::string> host_terms = offloaded.host_terms;
  std::vector<std::string> disk_terms;
  if (!offloaded.disk.formula.empty()) disk_terms.push_back(offloaded.disk.formula);
  std::vector<Category> device = {params, grads, accum};
  LedgerEstimate out;
  out.stage = stage;
  out.params_bytes = params.bytes;
  out.grads_bytes = checked_add(grads.bytes, accum.bytes);
  out.grad_accum_bytes = accum.bytes;
  out.host_params_bytes = offloaded.host.bytes;
  out.nvme_params_bytes = offloaded.disk.bytes;
  const std::vector<std::string> moved = formulas_of(master, optimizer);
  if (tier == OffloadTier::None) {
    device_terms.insert(device_terms.end(), moved.begin(), moved.end());
    device.push_back(master);
    device.push_back(optimizer);
    out.master_bytes = master.bytes;
    out.optimizer_bytes = optimizer.bytes;
  } else if (tier == OffloadTier::Cpu) {
    host_terms.insert(host_terms.end(), moved.begin(), moved.end());
    out.host_master_bytes = master.bytes;
    out.host_optimizer_bytes = optimizer.bytes;
  } else {
    disk_terms.insert(disk_terms.end(), moved.begin(), moved.end());
    out.nvme_master_bytes = master.bytes;
    out.nvme_optimizer_bytes = optimizer.bytes;
  }
  out.formula = fmt::format("{}", fmt::join(device_terms, " + "));
  out.total_formula = collected_formula(elems, device);
  out.host_formula = fmt::format("{}", fmt::join(host_terms, " + "));
  out.disk_formula = fmt::format("{}", fmt::join(disk_terms, " + "));
  checked_add(checked_add(out.params_bytes, out.grads_bytes),
              checked_add(out.master_bytes, out.optimizer_bytes));
  checked_add(out.host_bytes(), out.disk_bytes());
  return out;
}

}  // namespace

std::string_view offload_tier_name(OffloadTier tier) {
  switch (tier) {
    case OffloadTier::Cpu:
      return "cpu";
    case OffloadTier::Nvme:
      return "nvme";
    default:
      return "none";
  }
}

OffloadTier parse_offload_tier(std::string_view name, std::string_view flag) {
  if (name == "none") return OffloadTier::None;
  if (name == "cpu") return OffloadTier::Cpu;
  if (name == "nvme") return OffloadTier::Nvme;
  fail("{} '{}' is not known: use none, cpu or nvme", flag, name);
}

namespace {

// Where an offload puts its state: nowhere (on the device), host memory, or a swap file's folder.
OffloadTier tier_of(bool offloaded, const std::string& nvme_path) {
  if (!offloaded) return OffloadTier::None;
  return nvme_path.empty() ? OffloadTier::Cpu : OffloadTier::Nvme;
}

}  // namespace

EstimateOptions estimate_options(const TrainingFeatures& features) {
  return EstimateOptions{.precision = features.precision,
                         .grad_accum_steps = features.grad_accum_steps,
                         .persistence_threshold_elems = features.persistence_threshold_elems,
                         .optimizer_tier = tier_of(features.offload_optimizer, features.nvme_path),
                         .param_tier = tier_of(features.offload_param, features.param_nvme_path),
                         .hpz_partition_ranks = features.hpz_partition_ranks,
                         .param_buffer_count = features.param_buffer_count,
                         .param_buffer_elems = features.param_buffer_elems,
                         .param_max_in_cpu_elems = features.param_max_in_cpu_elems};
}

void validate(const EstimateOptions& options) {
  ZL_CHECK(is_training_dtype(options.precision),
           "--precision {} is invalid: use fp32, bf16 or fp16", dtype_name(options.precision));
  ZL_CHECK(options.grad_accum_steps >= 1,
           "--grad-accum {} is invalid: use 1 or more micro-batches per optimizer step",
           options.grad_accum_steps);
  ZL_CHECK(options.persistence_threshold_elems >= 0,
           "--persistence-threshold {} is invalid: use 0 (nothing persistent) or more elements",
           options.persistence_threshold_elems);
  ZL_CHECK(options.optimizer_bytes_per_param >= 1,
           "--optimizer-bytes {} is invalid: give the optimizer state bytes per parameter, at "
           "least 1",
           options.optimizer_bytes_per_param);
  ZL_CHECK(options.hpz_partition_ranks >= 0,
           "zero_hpz_partition_size {} is invalid: use 1 (off) or the GPUs of a node",
           options.hpz_partition_ranks);
  validate_param_buffers(options.param_buffer_count, options.param_buffer_elems,
                         options.param_max_in_cpu_elems);
  ZL_CHECK(options.param_tier != OffloadTier::Nvme || options.optimizer_tier != OffloadTier::None,
           "--offload-param nvme needs --offload-optimizer cpu or nvme: the update reads the fp32 "
           "master, and the parameter shards on disk are its rounding");
}

int training_bytes_per_param(DType precision) {
  return precision == DType::F32 ? 4 : 2;
}

int master_bytes_per_param(DType precision) {
  return precision == DType::F32 ? 0 : 4;
}

StateElems state_elems(std::int64_t params, int world) {
  ZL_CHECK(params >= 1, "--params {} is invalid: the model needs at least 1 parameter", params);
  ZL_CHECK(world >= 1, "--world {} is invalid: give the number of GPUs, at least 1", world);
  StateElems elems;
  elems.world = world;
  elems.params = params;
  elems.replica_elems = params;
  elems.shard_elems = shard_elems(params, world);
  return elems;
}

StateElems state_elems(const std::vector<UnitSpec>& units, int world,
                       const EstimateOptions& options) {
  validate(options);
  ZL_CHECK(world >= 1, "--world {} is invalid: give the number of GPUs, at least 1", world);
  ZL_CHECK(!units.empty(), "a model with no units has nothing to estimate");
  StateElems elems;
  elems.world = world;
  for (const auto& unit : units) {
    const std::int64_t numel = unit.numel();
    ZL_CHECK(numel >= 1, "unit {} has no elements: every layer needs a size >= 1", unit.name);
    ZL_CHECK(numel <= kInt64Max - world * kNormBlockElems,
             "unit {} has {} elements, too many to pad in int64: use smaller sizes", unit.name,
             numel);
    // The engines' layout (partition.hpp): zeros up to a multiple of N * kNormBlockElems.
    const std::int64_t padded = padded_elems(numel, world);
    // Ψ counts the model's parameters (wte's padded rows are not); Ψp all that is allocated.
    elems.params = checked_add(elems.params, unit.real_numel());
    elems.padded_row_elems += numel - unit.real_numel();
    elems.replica_elems = checked_add(elems.replica_elems, padded);
    elems.shard_elems += padded / world;
    const bool persistent = numel < options.persistence_threshold_elems;
    if (persistent) {
      elems.persistent_elems += padded;
      ++elems.persistent_units;
    }
    elems.unit_shard_elems.push_back(persistent ? 0 : padded / world);
    ++elems.units;
  }
  return elems;
}

LedgerEstimate estimate_ledger(const StateElems& elems, const EstimateOptions& options, int stage) {
  validate(options);
  ZL_CHECK(stage >= 0 && stage < kEstimateStages, "stage {} does not exist: use 0 (DDP), 1, 2 or 3",
           stage);
  const int p = training_bytes_per_param(options.precision);
  const bool accumulates = options.grad_accum_steps > 1;
  // Which stages shard what (DeepSpeed's stages); the accumulator is the size of the reduced
  // gradient each micro-step adds into it: whole after DDP's all-reduce, a shard after ZeRO-1's
  // reduce-scatter; ZeRO-2 and -3 add into their gradient shard and need none.
  Category params = category(elems, p, stage < 3 ? Held::Whole : Held::Zero3);
  if (stage == 3 && options.hpz_partition_ranks > 1) {  // hpZ's secondary shards, on the device
    add_secondary(params, elems, p, options.hpz_partition_ranks);
  }
  const Category grads = category(elems, p, stage < 2 ? Held::Whole : Held::Sharded);
  const Category accum = category(elems, p,
                                  !accumulates ? Held::None
                                  : stage == 0 ? Held::Whole
                                  : stage == 1 ? Held::Sharded
                                               : Held::None);
  // Offloaded, the optimizer always keeps an fp32 master (ZeRO-Offload's), fp32 training too.
  const Category master = category(
      elems,
      options.optimizer_tier != OffloadTier::None ? 4 : master_bytes_per_param(options.precision),
      stage == 0 ? Held::Whole : Held::Sharded);
  const Category optimizer =
      category(elems, options.optimizer_bytes_per_param, stage == 0 ? Held::Whole : Held::Sharded);
  if (stage == 3 && options.param_tier != OffloadTier::None) {
    // offload_param: every unit's shard in host memory (or on disk) but the persistent units,
    // whole on the device; ZeRO-3's p(Ψp - Ψw)/N + pΨw split in two
    const std::string_view psi = elems.padded() ? "Ψp" : "Ψ";
    const OffloadedParams offloaded = place_offloaded(
        elems, options, p,
        elems.persistent_elems == 0 ? fmt::format("{}/N", psi) : fmt::format("({} - Ψw)/N", psi));
    Category device_params;
    if (elems.persistent_elems > 0) {
      device_params.bytes = checked_bytes(p, elems.persistent_elems);
      device_params.formula = fmt::format("{}Ψw", p);
      device_params.persistent_whole = p;
    }
    if (options.hpz_partition_ranks > 1) {
      add_secondary(device_params, elems, p, options.hpz_partition_ranks);
    }
    return ledger_of(stage, elems, {device_params, grads, accum, master, optimizer}, offloaded,
                     options.optimizer_tier);
  }
  return ledger_of(stage, elems, {params, grads, accum, master, optimizer}, OffloadedParams{},
                   options.optimizer_tier);
}

std::int64_t largest_fitting_params(int world, const EstimateOptions& options, int stage,
                                    const PlaceBudget& budget) {
  validate(options);
  ZL_CHECK(world >= 1, "--world {} is invalid: give the number of GPUs, at least 1", world);
  const auto fits = [&](std::int64_t params) {
    const LedgerEstimate ledger = estimate_ledger(state_elems(params, world), options, stage);
    return ledger.total_bytes() <= budget.device_bytes &&
           ledger.host_bytes() <= budget.host_bytes && ledger.disk_bytes() <= budget.disk_bytes;
  };
  // Each rank holds at least a shard of the gradients (p bytes a parameter), so more than
  // (the budgets' sum / p + 1) N parameters cannot fit; past int64's end over the most bytes a
  // parameter can take (params, grads, accumulator, master, optimizer), the bytes would not be
  // counted, so the search stops there. Then bisect: fits() is monotone in Ψ.
  const int p = training_bytes_per_param(options.precision);
  const long double total_budget = static_cast<long double>(budget.device_bytes) +
                                   static_cast<long double>(budget.host_bytes) +
                                   static_cast<long double>(budget.disk_bytes);
  const long double cannot_fit = (total_budget / p + 2) * world + 2;  // rounded up: a bound
  // one less, so that the states of one parameter more are still countable
  const std::int64_t countable = kInt64Max / (3 * p + 4 + options.optimizer_bytes_per_param) - 1;
  if (cannot_fit > static_cast<long double>(countable) && fits(countable)) return countable;
  std::int64_t low = 0;  // fits (nothing does)
  std::int64_t high = cannot_fit > static_cast<long double>(countable)
                          ? countable
                          : static_cast<std::int64_t>(cannot_fit);
  while (high - low > 1) {
    const std::int64_t mid = low + (high - low) / 2;
    (fits(mid) ? low : high) = mid;
  }
  return low;
}

std::vector<LedgerEstimate> estimate_ledgers(const StateElems& elems,
                                             const EstimateOptions& options) {
  std::vector<LedgerEstimate> stages;
  for (int stage = 0; stage < kEstimateStages; ++stage)
    stages.push_back(estimate_ledger(elems, options, stage));
  return stages;
}

}  // namespace zl
