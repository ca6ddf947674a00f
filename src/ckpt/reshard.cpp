// reshard.cpp — the piece math (which old shard holds which elements of a range), the model check,
// and reading ranges of units from the old ranks' files, one shard tensor at a time.
#include "ckpt/reshard.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "core/error.hpp"

namespace zl {

namespace {

// The first way `model` differs from the checkpoint's `saved` units, or nothing.
std::optional<std::string> model_difference(const std::vector<UnitLayout>& saved,
                                            const std::vector<UnitLayout>& model) {
  if (saved.size() != model.size()) {
    return fmt::format("the checkpoint has {} units, the model {}", saved.size(), model.size());
  }
  for (std::size_t u = 0; u < saved.size(); ++u) {
    const UnitLayout& old_unit = saved[u];
    const UnitLayout& new_unit = model[u];
    if (old_unit.name != new_unit.name) {
      return fmt::format("unit {} is {:?} in the checkpoint but {:?} in the model", u,
                         old_unit.name, new_unit.name);
    }
    if (old_unit.params.size() != new_unit.params.size()) {
      return fmt::format("unit {:?} has {} parameters in the checkpoint but {} in the model",
                         old_unit.name, old_unit.params.size(), new_unit.params.size());
    }
    for (std::size_t p = 0; p < old_unit.params.size(); ++p) {
      const ParamSlot& old_param = old_unit.params[p];
      const ParamSlot& new_param = new_unit.params[p];
      if (old_param.name != new_param.name) {
        return fmt::format(
            "parameter {} of unit {:?} is {:?} in the checkpoint but {:?} in the model", p,
            old_unit.name, old_param.name, new_param.name);
      }
      if (old_param.shape != new_param.shape) {
        return fmt::format("parameter {:?} has shape {} in the checkpoint but {} in the model",
                           old_param.name, shape_string(old_param.shape),
                           shape_string(new_param.shape));
      }
      if (old_param.pad_rows != new_param.pad_rows) {
        return fmt::format(
            "parameter {:?} has {} padded rows in the checkpoint but {} in the model",
            old_param.name, old_param.pad_rows, new_param.pad_rows);
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::vector<ShardPiece> pieces_of(const UnitLayout& unit, int world, ShardRange range) {
  ZL_CHECK(world >= 1 && unit.shard_elems > 0 && unit.shard_elems * world == unit.padded_elems &&
               unit.numel <= unit.padded_elems,
           "unit {} (numel {}, padded_elems {}, shard_elems {}) is not laid out for world {}: lay "
           "it out with layout_units",
           unit.name, unit.numel, unit.padded_elems, unit.shard_elems, world);
  ZL_CHECK(0 <= range.begin && range.begin <= range.end,
           "range [{}, {}) of unit {} is not a range of elements", range.begin, range.end,
           unit.name);
  std::vector<ShardPiece> pieces;
  const std::int64_t real_end = std::min(range.end, unit.numel);
  for (std::int64_t element = range.begin; element < real_end;) {
    const auto rank = static_cast<int>(element / unit.shard_elems);
    const std::int64_t shard_begin = rank * unit.shard_elems;
    const std::int64_t elems = std::min(real_end, shard_begin + unit.shard_elems) - element;
    pieces.push_back({rank, element - shard_begin, element - range.begin, elems});
    element += elems;
  }
  return pieces;
}

void check_same_model(const Manifest& manifest, const std::vector<UnitLayout>& layout) {
  // A checkpoint from before the vocabulary was padded holds the same model with fewer rows.
  for (std::size_t u = 0; u < std::min(manifest.units.size(), layout.size()); ++u) {
    const auto& saved = manifest.units[u].params;
    const auto& model = layout[u].params;
    for (std::size_t p = 0; p < std::min(saved.size(), model.size()); ++p) {
      const ParamSlot& old_param = saved[p];
      const ParamSlot& new_param = model[p];
      if (old_param.name == new_param.name && old_param.pad_rows == 0 && new_param.pad_rows > 0 &&
          old_param.shape == new_param.real_shape()) {
        fail(
            "cannot load {}: parameter {:?} is saved unpadded, {}, by a zerolab from before the "
            "vocabulary was padded to a multiple of 128 (this model holds {}): consolidate the "
            "checkpoint with the zerolab that wrote it and start from that file with --init",
            (manifest.step_dir / "manifest.json").string(), old_param.name,
            shape_string(old_param.shape), shape_string(new_param.shape));
      }
    }
  }
  // The checkpoint is sound; the model asked of it is another: the request's fault.
  if (const auto difference = model_difference(manifest.units, layout)) {
    throw Error(fmt::format("cannot load {}: it holds another model: {}: load it into the model it "
                            "was saved from ({})",
                            (manifest.step_dir / "manifest.json").string(), *difference,
                            model_summary(manifest)),
                ErrorKind::Usage);
  }
}

ShardReader::ShardReader(const Manifest& manifest) : manifest_(manifest) {
  for (const auto& file : manifest.files) {
    files_.push_back(read_safetensors_index(manifest.step_dir / file.name));
  }
}

std::vector<float> ShardReader::read_range(std::size_t unit, ShardTensor tensor,
                                           ShardRange range) const {
  const UnitLayout& layout = manifest_.units.at(unit);
  const std::string name = shard_tensor_name(layout.name, tensor);
  std::vector<float> values(static_cast<std::size_t>(range.size()), 0.0f);
  for (const ShardPiece& piece : pieces_of(layout, manifest_.world, range)) {
    const SafetensorsIndex& file = files_.at(static_cast<std::size_t>(piece.rank));
    const TensorRecord shard = read_tensor(file, name);
    ZL_CHECK(shard.dtype == DType::F32 && shard.shape == Shape{layout.shard_elems},
             "cannot read {}: tensor {:?} is {} {} but the manifest needs F32 [{}]: the file "
             "belongs to another checkpoint: restore it or use another step",
             file.path.string(), name, safetensors_dtype(shard.dtype), shape_string(shard.shape),
             layout.shard_elems);
    std::memcpy(values.data() + piece.out_offset_elems,
                shard.bytes.data() + piece.shard_offset_elems * sizeof(float),
                static_cast<std::size_t>(piece.elems) * sizeof(float));
    // What training wrote is finite, and Adam's second moment is never negative: anything else
    // is damage the checksums did not catch (or were recomputed over).
    for (std::int64_t i = 0; i < piece.elems; ++i) {
      const float value = values[static_cast<std::size_t>(piece.out_offset_elems + i)];
      ZL_CHECK(std::isfinite(value) && (tensor != ShardTensor::ExpAvgSq || value >= 0.0f),
               "cannot read {}: tensor {:?} element {} is {}, which training never writes{}: "
               "restore the file or resume from another step",
               file.path.string(), name, piece.shard_offset_elems + i, value,
               std::isfinite(value) ? " (Adam's second moment is never negative)" : "");
    }
  }
  return values;
}

ShardState load_rank_shards(const Manifest& manifest, const std::vector<UnitLayout>& new_layout,
                            int new_rank, int new_world) {
  check_same_model(manifest, new_layout);
  const ShardReader reader(manifest);
  ShardState state;
  state.adam_updates = manifest.adam_updates;
  for (std::size_t u = 0; u < new_layout.size(); ++u) {
    const ShardRange range = shard_of(new_layout[u], new_rank, new_world);
    ZL_CHECK(range.size() == new_layout[u].shard_elems,
             "unit {} has shard_elems {} but world {} cuts it into shards of {}: lay it out with "
             "layout_units",
             new_layout[u].name, new_layout[u].shard_elems, new_world, range.size());
    for (const ShardTensor tensor : kShardTensors) {
      shard_member(state, tensor).push_back(reader.read_range(u, tensor, range));
    }
  }
  return state;
}

}  // namespace zl
