// partition.hpp — the shard math, pure and shared by every engine. Each unit is one flat buffer
// of its parameters back to back, padded with zeros to a multiple of W * kNormBlockElems and cut
// into W equal shards; rank r owns [r*S, (r+1)*S). ZeRO-1, -2 and -3 share this layout, so a
// shard of optimizer state means the same elements at every stage. No threads, no communication.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/buffer.hpp"
#include "model/model.hpp"
#include "optim/grad_norm.hpp"

namespace zl {

/// Where one parameter sits inside its unit's flat buffer.
struct ParamSlot {
  std::string name;               ///< the parameter's stable name (ParamSpec::name)
  Shape shape;                    ///< its dimensions, outermost first
  std::int64_t offset_elems = 0;  ///< first element in the unit's flat buffer (back to back)
  std::int64_t numel = 0;         ///< elements, numel(shape)
  std::int64_t pad_rows = 0;      ///< zero rows at the end of shape (ParamSpec::pad_rows)
  /// The shape without the padded rows, as files in Hugging Face's shapes hold the parameter.
  Shape real_shape() const { return zl::real_shape(shape, pad_rows); }
  /// Elements of real_shape(): the first real_numel() of the parameter's numel elements.
  std::int64_t real_numel() const { return zl::numel(real_shape()); }
};

/// A unit laid out for a world of W ranks.
struct UnitLayout {
  std::string name;               ///< the unit's stable name (UnitSpec::name)
  std::vector<ParamSlot> params;  ///< in buffer order; the last ends at numel
  std::int64_t numel = 0;         ///< real elements
  std::int64_t padded_elems = 0;  ///< numel rounded up to a multiple of W * kNormBlockElems
  std::int64_t shard_elems = 0;   ///< padded_elems / W
};

/// Half-open element range [begin, end) of a unit's flat buffer.
struct ShardRange {
  std::int64_t begin = 0;  ///< first element, r * shard_elems for rank r
  std::int64_t end = 0;    ///< one past the last element
  /// Elements in the range (shard_elems for a rank's shard).
  std::int64_t size() const { return end - begin; }
};

/// `numel` rounded up to a multiple of world * kNormBlockElems (at least one block per rank).
std::int64_t padded_elems(std::int64_t numel, int world);

/// Lays out every unit for `world` ranks. Throws if world < 1 or a parameter is empty.
std::vector<UnitLayout> layout_units(const std::vector<UnitSpec>& units, int world);

/// The elements rank `rank` owns of `unit` (laid out for `world`).
ShardRange shard_of(const UnitLayout& unit, int rank, int world);

/// Sum of numel over units (the elements of the flat buffers, padded rows included).
std::int64_t total_numel(const std::vector<UnitLayout>& units);

/// Sum of real_numel over every parameter of `units`: the model's Psi, as Hugging Face counts it.
std::int64_t total_real_numel(const std::vector<UnitLayout>& units);

/// Sum of padded_elems over units (Psi with padding).
std::int64_t total_padded_elems(const std::vector<UnitLayout>& units);

}  // namespace zl
