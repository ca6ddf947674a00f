// reduce.cpp — rank-order reduction for every dtype and op.
#include "comm/reduce.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.hpp"

namespace zl {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
  }
  fail("unknown reduce op {}", static_cast<int>(op));
}

namespace {

template <class Acc>
Acc combine(Acc acc, Acc value, ReduceOp op) {
  if (op != ReduceOp::Max) return acc + value;
  if (std::isnan(acc) || std::isnan(value)) return std::isnan(acc) ? acc : value;
  return value > acc ? value : acc;
}

// Stored element type T, accumulated as Acc; load/store convert between them.
template <class T, class Acc, class Load, class Store>
void reduce_typed(std::span<const void* const> inputs, void* out, std::size_t count, ReduceOp op,
                  Load load, Store store) {
  const auto world = static_cast<Acc>(inputs.size());
  auto* dst = static_cast<T*>(out);
  std::vector<const T*> src(inputs.size());
  for (std::size_t r = 0; r < inputs.size(); ++r) src[r] = static_cast<const T*>(inputs[r]);
  for (std::size_t i = 0; i < count; ++i) {
    Acc acc = load(src[0][i]);
    for (std::size_t r = 1; r < src.size(); ++r) acc = combine(acc, load(src[r][i]), op);
    if (op == ReduceOp::Avg) acc = acc / world;
    dst[i] = store(acc);
  }
}

}  // namespace

void reduce_rank_order(std::span<const void* const> inputs, void* out, std::size_t count, DType dtype,
                       ReduceOp op) {
  ZL_CHECK(!inputs.empty(), "reduce over zero ranks");
  switch (dtype) {
    case DType::F32:
      return reduce_typed<float, float>(inputs, out, count, op, [](float x) { return x; },
                                        [](float x) { return x; });
    case DType::F64:
      return reduce_typed<double, double>(inputs, out, count, op, [](double x) { return x; },
                                          [](double x) { return x; });
    case DType::BF16:
      return reduce_typed<std::uint16_t, float>(inputs, out, count, op, bf16_to_f32, f32_to_bf16);
    case DType::F16:
      return reduce_typed<std::uint16_t, float>(inputs, out, count, op, f16_to_f32, f32_to_f16);
    case DType::I64: break;
  }
  fail("reductions over {} are not supported: reduce fp32, bf16, fp16 or fp64", dtype_name(dtype));
}

}  // namespace zl
