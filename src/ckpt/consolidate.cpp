// consolidate.cpp — the header from the manifest (names and shapes of the model), then per unit:
// read its flat buffer back from the shards (ShardReader), cut it into parameters, append them.
#include "ckpt/consolidate.hpp"

#include <string>
#include <vector>

#include "ckpt/checkpoint.hpp"
#include "ckpt/model_metadata.hpp"
#include "ckpt/reshard.hpp"
#include "ckpt/safetensors_stream.hpp"
#include "core/atomic_file.hpp"

namespace zl {

namespace {

// The output name of `param`'s `tensor`: the parameter's own name, or "<name>.<suffix>" for the
// Adam moments.
std::string output_name(const ParamSlot& param, ShardTensor tensor) {
  if (tensor == ShardTensor::Params) return param.name;
  return param.name + "." + std::string(shard_tensor_suffix(tensor));
}

// The tensors consolidate writes for each unit, in order.
std::vector<ShardTensor> output_tensors(bool with_optimizer) {
  if (!with_optimizer) return {ShardTensor::Params};
  return {kShardTensors.begin(), kShardTensors.end()};
}

}  // namespace

ConsolidateResult consolidate(const std::filesystem::path& checkpoint,
                              const std::filesystem::path& out, bool with_optimizer) {
  check_writable(out, "consolidate output");
  const Manifest manifest = read_manifest(checkpoint);
  const std::vector<ShardTensor> kinds = output_tensors(with_optimizer);

  std::vector<TensorInfo> tensors;
  for (const auto& unit : manifest.units) {
    for (const ShardTensor kind : kinds) {
      for (const auto& param : unit.params) {
        tensors.push_back({output_name(param, kind), DType::F32, param.real_shape()});
      }
    }
  }
  ConsolidateResult result;
  result.step = manifest.step;
  result.tensors = static_cast<std::int64_t>(tensors.size());
  result.param_elems = total_real_numel(manifest.units);

  Metadata metadata =
      manifest.model_kind == "gpt" ? model_metadata(manifest.gpt) : model_metadata(manifest.mlp);
  metadata["step"] = std::to_string(manifest.step);
  SafetensorsStreamWriter writer(out, std::move(tensors), metadata);
  const ShardReader reader(manifest);
  for (std::size_t u = 0; u < manifest.units.size(); ++u) {
    const UnitLayout& unit = manifest.units[u];
    for (const ShardTensor kind : kinds) {
      // flat holds the unit's unpadded buffer [numel]: its parameters back to back. A parameter's
      // padded rows (wte's beyond the vocabulary) come last in it and are left out.
      const std::vector<float> flat = reader.read_range(u, kind, {0, unit.numel});
      for (const auto& param : unit.params) {
        const std::span<const float> values(flat.data() + param.offset_elems,
                                            static_cast<std::size_t>(param.real_numel()));
        writer.write_tensor(output_name(param, kind), std::as_bytes(values));
      }
    }
  }
  result.output_bytes = writer.commit();
  return result;
}

}  // namespace zl
