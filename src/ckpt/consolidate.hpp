// consolidate.hpp — one fp32 safetensors file of the full model from a sharded checkpoint, written
// unit by unit so that peak memory is about one unit, not the model.
#pragma once

#include <cstdint>
#include <filesystem>

namespace zl {

/// What consolidate() wrote.
struct ConsolidateResult {
  std::int64_t step = 0;           ///< the checkpoint's step
  std::int64_t tensors = 0;        ///< tensors in the output
  std::int64_t param_elems = 0;    ///< model parameters (Psi), padding and padded rows removed
  std::uint64_t output_bytes = 0;  ///< size of the output file
};

/// Writes the checkpoint at `checkpoint` (a checkpoint directory or a step directory, verified as
/// read_manifest does) to `out` as one fp32 safetensors file: every parameter under its model name
/// and real shape (e.g. `layers.0.weight` [out, in], GPT-2's `wte.weight` [vocab, C] without its
/// padded rows), padding removed; with `with_optimizer` also
/// `<name>.exp_avg` and `<name>.exp_avg_sq` of the same shape. Tensors come unit by unit (a unit's
/// parameters, then its exp_avg, then its exp_avg_sq); metadata: model_metadata() of the
/// checkpoint's model ({"format": "pt"}, the model and its sizes) and "step": N. The
/// header is computed from the manifest first, then the data streamed one unit at a time through
/// an atomic file: on any error `out` is untouched and zl::Error names the file and the problem.
ConsolidateResult consolidate(const std::filesystem::path& checkpoint,
                              const std::filesystem::path& out, bool with_optimizer);

}  // namespace zl
