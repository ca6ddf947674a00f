// partition.cpp — padding and shard ranges.
#include "engines/partition.hpp"

#include "core/error.hpp"

namespace zl {

std::int64_t padded_elems(std::int64_t numel, int world) {
  ZL_CHECK(world >= 1, "world size {} is invalid: use --world 1 or more", world);
  const std::int64_t multiple = world * kNormBlockElems;
  const std::int64_t blocks = (numel + multiple - 1) / multiple;
  return (blocks == 0 ? 1 : blocks) * multiple;
}

std::vector<UnitLayout> layout_units(const std::vector<UnitSpec>& units, int world) {
  ZL_CHECK(world >= 1, "world size {} is invalid: use --world 1 or more", world);
  std::vector<UnitLayout> layouts;
  layouts.reserve(units.size());
  for (const auto& unit : units) {
    UnitLayout layout;
    layout.name = unit.name;
    for (const auto& param : unit.params) {
      const std::int64_t count = numel(param.shape);
      ZL_CHECK(count > 0,
               "parameter {} has shape {} with no elements: every layer needs a size >= 1",
               param.name, shape_string(param.shape));
      layout.params.push_back({param.name, param.shape, layout.numel, count, param.pad_rows});
      layout.numel += count;
    }
    layout.padded_elems = padded_elems(layout.numel, world);
    layout.shard_elems = layout.padded_elems / world;
    layouts.push_back(std::move(layout));
  }
  return layouts;
}

ShardRange shard_of(const UnitLayout& unit, int rank, int world) {
  ZL_CHECK(unit.padded_elems % (world * kNormBlockElems) == 0,
           "unit {} is padded to {} elements, not a multiple of {} * {}: lay it out with "
           "layout_units for world {}",
           unit.name, unit.padded_elems, world, kNormBlockElems, world);
  ZL_CHECK(rank >= 0 && rank < world, "rank {} is outside world {}", rank, world);
  const std::int64_t shard = unit.padded_elems / world;
  return {rank * shard, (rank + 1) * shard};
}

std::int64_t total_numel(const std::vector<UnitLayout>& units) {
  std::int64_t count = 0;
  for (const auto& unit : units) count += unit.numel;
  return count;
}

std::int64_t total_real_numel(const std::vector<UnitLayout>& units) {
  std::int64_t count = 0;
  for (const auto& unit : units) {
    for (const auto& param : unit.params) count += param.real_numel();
  }
  return count;
}

std::int64_t total_padded_elems(const std::vector<UnitLayout>& units) {
  std::int64_t count = 0;
  for (const auto& unit : units) count += unit.padded_elems;
  return count;
}

}  // namespace zl
