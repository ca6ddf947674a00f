// run_fingerprint.cpp — the fields in words, their text form, and the first disagreement.
#include "run/run_fingerprint.hpp"

#include <fmt/format.h>

#include <map>
#include <sstream>

#include "comm/collective_checks.hpp"
#include "core/error.hpp"
#include "model/activation_policy.hpp"
#include "optim/lr_schedule.hpp"

namespace zl {
namespace {

std::string model_text(const TrainConfig& c) {
  if (c.model == ModelKind::Gpt) {
    return fmt::format("gpt n_layer {} n_head {} n_embd {} block_size {} vocab {}", c.gpt.n_layer,
                       c.gpt.n_head, c.gpt.n_embd, c.gpt.block_size, c.gpt.vocab);
  }
  return fmt::format("mlp layers {} width {} in {} classes {}", c.mlp.layers, c.mlp.width, c.mlp.in,
                     c.mlp.classes);
}

std::string features_text(const TrainingFeatures& f) {
  return fmt::format(
      "clip {} reduce-bucket {} allgather-bucket {} prefetch-bucket {} persistence-threshold {} "
      "overlap-comm {} offload-optimizer {} offload-param {}",
      f.grad_clip, f.reduce_bucket_elems, f.allgather_bucket_elems, f.prefetch_bucket_elems,
      f.persistence_threshold_elems, f.overlap_comm, f.offload_optimizer, f.offload_param);
}

std::string loss_scale_text(const LossScaleConfig& s) {
  return fmt::format("power {} window {} hysteresis {} min {} static {}", s.initial_scale_power,
                     s.window, s.hysteresis, s.min_scale, s.static_scale);
}

// "name=value" lines back to fields, in order.
std::vector<FingerprintField> decode(const std::string& text) {
  std::vector<FingerprintField> fields;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const std::size_t eq = line.find('=');
    fields.emplace_back(line.substr(0, eq), eq == std::string::npos ? "" : line.substr(eq + 1));
  }
  return fields;
}

}  // namespace

std::vector<FingerprintField> run_fingerprint(const RunPlan& plan) {
  const TrainConfig& c = plan.config;
  const AdamWConfig& a = c.adamw;
  std::vector<FingerprintField> fields = {
      {"--model", model_text(c)},
      {"--engine", std::string(engine_name(c.engine))},
      {"--world", fmt::format("{}", c.world)},
      {"--gpus-per-node", fmt::format("{}", c.gpus_per_node)},
      {"--steps", fmt::format("{}", c.steps)},
      {"--micro-batch", fmt::format("{}", c.micro_batch)},
      {"--grad-accum", fmt::format("{}", c.features.grad_accum_steps)},
      {"--precision", std::string(dtype_name(c.features.precision))},
      {"the fp16 loss scale", loss_scale_text(c.features.loss_scale)},
      {"the features", features_text(c.features)},
      {"--activation-checkpointing", activation_policy_name(c.activations) +
                                         (c.activations.cpu_checkpoints ? " on the host" : "")},
      {"--lr", fmt::format("{}", a.lr)},
      {"--beta1", fmt::format("{}", a.beta1)},
      {"--beta2", fmt::format("{}", a.beta2)},
      {"--eps", fmt::format("{}", a.eps)},
      {"--weight-decay", fmt::format("{}", a.weight_decay)},
      {"--lr-schedule", lr_schedule_summary(c.lr_schedule)},
      {"--seed", fmt::format("{}", c.seed)},
      {"--data", c.data},
      {"--init", c.init_file.string()},
      {"--skip-nonfinite", fmt::format("{}", c.nonfinite == NonFinitePolicy::Skip)},
      {"--mpi-reduce", fmt::format("{}", static_cast<int>(c.mpi_reduce))},
      {"--checkpoint-dir", plan.checkpoints.dir.string()},
      {"--checkpoint-every", fmt::format("{}", plan.checkpoints.every_steps)},
      {"the resumed step", fmt::format("{}", plan.start.step)},
  };
  // NCCL's per-call check is a collective itself: a rank that makes it waits for ranks that do
  // not. The sim and MPI always check, whatever the variable says.
  if (c.backend == Backend::Nccl) {
    fields.emplace_back("the environment variable ZL_COLLECTIVE_CHECKS",
                        collective_checks_setting());
  }
  return fields;
}

std::string encode_fingerprint(const std::vector<FingerprintField>& fields) {
  std::string text;
  for (const auto& [name, value] : fields) {
    std::string one_line = value;
    for (char& ch : one_line) {
      if (ch == '\n') ch = ' ';
    }
    text += name + "=" + one_line + "\n";
  }
  return text;
}

std::optional<std::string> fingerprint_mismatch(const std::vector<std::string>& per_rank) {
  std::vector<std::vector<FingerprintField>> ranks;
  for (const std::string& text : per_rank) ranks.push_back(decode(text));
  if (ranks.empty()) return std::nullopt;
  for (std::size_t f = 0; f < ranks.front().size(); ++f) {
    std::map<std::string, std::vector<std::size_t>> holders;  // value -> ranks
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      holders[f < ranks[r].size() ? ranks[r][f].second : "(missing)"].push_back(r);
    }
    if (holders.size() == 1) continue;
    std::string who;
    for (const auto& [value, at] : holders) {
      who += fmt::format("{}{} {} {:?}", who.empty() ? "" : "; ", at.size() == 1 ? "rank" : "ranks",
                         fmt::join(at, ", "), value);
    }
    return fmt::format(
        "the ranks disagree on {}: {}: start every rank with the same flags and files",
        ranks.front()[f].first, who);
  }
  return std::nullopt;
}

// The run id on the first line, the mismatch (empty when the ranks agree) after it.
std::string settle_run(const std::vector<std::string>& fingerprints, const std::string& run_id) {
  return run_id + "\n" + fingerprint_mismatch(fingerprints).value_or("");
}

std::string agreed_run_id(const std::string& settled) {
  const std::size_t end = settled.find('\n');
  ZL_CHECK(end != std::string::npos,
           "rank 0's settlement of the run is damaged ({:?}): start every rank from the same "
           "zerolab",
           settled);
  const std::string mismatch = settled.substr(end + 1);
  ZL_CHECK(mismatch.empty(), "{}", mismatch);
  return settled.substr(0, end);
}

}  // namespace zl
