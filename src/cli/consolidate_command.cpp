// consolidate_command.cpp — `zerolab consolidate`: parses DIR and OUT, streams the checkpoint into
// one safetensors file, and prints what it wrote.
#include "cli/consolidate_command.hpp"

#include <fmt/format.h>

#include <memory>

#include "ckpt/consolidate.hpp"
#include "ckpt/hf_folder.hpp"
#include "core/error.hpp"

namespace zl {

CLI::App* add_consolidate_command(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand(
      "consolidate",
      "Write a sharded checkpoint as one fp32 safetensors file of the full model (parameters under "
      "their model names, padding removed), streaming one unit at a time");
  auto flags = std::make_shared<ConsolidateFlags>();
  cmd->add_option("DIR", flags->checkpoint,
                  "Checkpoint directory (its latest step) or one step-<N> directory")
      ->required();
  auto* out = cmd->add_option("OUT", flags->out, "The .safetensors file to write");
  auto* hf = cmd->add_option("--hf", flags->hf,
                             "Write a Hugging Face GPT-2 folder instead (model.safetensors and "
                             "config.json, for GPT2LMHeadModel.from_pretrained)");
  auto* with_optimizer =
      cmd->add_flag("--with-optimizer", flags->with_optimizer,
                    "Also write the Adam moments as <name>.exp_avg and <name>.exp_avg_sq");
  out->excludes(hf);
  hf->excludes(with_optimizer);
  cmd->callback([&run, flags] {
    ZL_CHECK(!flags->out.empty() || !flags->hf.empty(),
             "consolidate: OUT is required (the .safetensors file to write), or --hf DIR for a "
             "Hugging Face folder");
    run = [flags] { return run_consolidate(*flags); };
  });
  return cmd;
}

int run_consolidate(const ConsolidateFlags& flags) {
  const bool hf = !flags.hf.empty();
  // A checkpoint that cannot be read whole is a bad input (exit 3).
  const ConsolidateResult result = with_error_kind(ErrorKind::Input, [&] {
    return hf ? consolidate_hf(flags.checkpoint, flags.hf)
              : consolidate(flags.checkpoint, flags.out, flags.with_optimizer);
  });
  fmt::print("consolidated step {} of {}: {} tensors, {} parameters{}, {} bytes -> {}\n",
             result.step, flags.checkpoint.string(), result.tensors, result.param_elems,
             flags.with_optimizer ? " with Adam moments" : "", result.output_bytes,
             hf ? (flags.hf / kHfWeightsFile).string() + " and " + std::string(kHfConfigFile)
                : flags.out.string());
  return 0;
}

}  // namespace zl
