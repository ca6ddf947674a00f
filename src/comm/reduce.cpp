// reduce.cpp — rank-order reduction for every dtype and op. fp32 sums and averages take a
// register path on CPUs with AVX2 or AVX-512 (chosen at run time, as src/optim/adamw_fused.cpp
// chooses its kernel): one vector of elements at a time, every rank's values added into a
// register in rank order, so the W inputs stream through the cache in lock step and no
// accumulator goes back to memory. Each lane does the scalar loop's IEEE adds and division, so
// the bits are the same. A world of nodes reduces in two levels (reduce.hpp), by the tiled loop.
#include "comm/reduce.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/error.hpp"

namespace zl {

int nodes_spanned(const std::vector<int>& world_ranks, int gpus_per_node) {
  std::vector<int> nodes;
  for (const int world_rank : world_ranks) nodes.push_back(node_of(world_rank, gpus_per_node));
  std::sort(nodes.begin(), nodes.end());
  return static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
}

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
  }
  fail("unknown reduce op {}", static_cast<int>(op));
}

namespace {

// Max that returns NaN when either side is NaN.
template <class Acc>
Acc max_or_nan(Acc acc, Acc value) {
  if (std::isnan(acc) || std::isnan(value)) return std::isnan(acc) ? acc : value;
  return value > acc ? value : acc;
}

// How each dtype is stored (T) and accumulated (Acc): load widens, store rounds to nearest even.
struct F32Codec {
  using T = float;
  using Acc = float;
  static Acc load(T x) { return x; }
  static T store(Acc x) { return x; }
};
struct F64Codec {
  using T = double;
  using Acc = double;
  static Acc load(T x) { return x; }
  static T store(Acc x) { return x; }
};
struct Bf16Codec {
  using T = std::uint16_t;
  using Acc = float;
  static Acc load(T x) { return bf16_to_f32(x); }
  static T store(Acc x) { return f32_to_bf16(x); }
};
struct F16Codec {
  using T = std::uint16_t;
  using Acc = float;
  static Acc load(T x) { return f16_to_f32(x); }
  static T store(Acc x) { return f32_to_f16(x); }
};

// Calls `fn(Codec{})` with `dtype`'s codec; throws zl::Error for a dtype no reduction takes.
template <class Fn>
void with_codec(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::F32:
      return fn(F32Codec{});
    case DType::F64:
      return fn(F64Codec{});
    case DType::BF16:
      return fn(Bf16Codec{});
    case DType::F16:
      return fn(F16Codec{});
    case DType::I64:
    case DType::I8:
      break;
  }
  fail("reductions over {} are not supported: reduce fp32, bf16, fp16 or fp64", dtype_name(dtype));
}

// Elements reduced at a time: the tile's accumulators stay in L1 while every rank's slice is
// added, so the per-element loops vectorize; each element still sees rank 0, 1, ..., W-1.
constexpr std::size_t kTileElems = 1024;

// The flat rank-order reduction of Codec's dtype.
template <class Codec>
void reduce_typed(std::span<const void* const> inputs, void* out, std::size_t count, ReduceOp op) {
  using T = typename Codec::T;
  using Acc = typename Codec::Acc;
  constexpr auto load = Codec::load;
  constexpr auto store = Codec::store;
  const auto world = static_cast<Acc>(inputs.size());
  auto* dst = static_cast<T*>(out);
  Acc acc[kTileElems];
  for (std::size_t lo = 0; lo < count; lo += kTileElems) {
    const std::size_t elems = std::min(kTileElems, count - lo);
    const T* first = static_cast<const T*>(inputs[0]) + lo;
    for (std::size_t j = 0; j < elems; ++j) acc[j] = load(first[j]);
    std::size_t r = 1;
    if (op != ReduceOp::Max) {  // three ranks a pass, added left to right: the order is kept
      for (; r + 3 <= inputs.size(); r += 3) {
        const T* a = static_cast<const T*>(inputs[r]) + lo;
        const T* b = static_cast<const T*>(inputs[r + 1]) + lo;
        const T* c = static_cast<const T*>(inputs[r + 2]) + lo;
        for (std::size_t j = 0; j < elems; ++j) acc[j] = acc[j] + load(a[j]) + load(b[j]) + load(c[j]);
      }
    }
    for (; r < inputs.size(); ++r) {
      const T* src = static_cast<const T*>(inputs[r]) + lo;
      if (op == ReduceOp::Max) {
        for (std::size_t j = 0; j < elems; ++j) acc[j] = max_or_nan(acc[j], load(src[j]));
      } else {
        for (std::size_t j = 0; j < elems; ++j) acc[j] = acc[j] + load(src[j]);
      }
    }
    if (op == ReduceOp::Avg) {
      for (std::size_t j = 0; j < elems; ++j) acc[j] = acc[j] / world;
    }
    for (std::size_t j = 0; j < elems; ++j) dst[lo + j] = store(acc[j]);
  }
}

// reduce_typed in two levels: each node's `per_node` inputs in rank order, its sum rounded to T
// (store then load: the node's partial as it travels between nodes), then the node sums in node
// order and Avg's division by the whole world last.
template <class Codec>
void reduce_by_node(std::span<const void* const> inputs, void* out, std::size_t count, ReduceOp op,
                    std::size_t per_node) {
  using T = typename Codec::T;
  using Acc = typename Codec::Acc;
  constexpr auto load = Codec::load;
  constexpr auto store = Codec::store;
  const auto world = static_cast<Acc>(inputs.size());
  const auto combine = [op](Acc acc, Acc value) {
    return op == ReduceOp::Max ? max_or_nan(acc, value) : acc + value;
  };
  auto* dst = static_cast<T*>(out);
  Acc node_acc[kTileElems];
  Acc acc[kTileElems];
  for (std::size_t lo = 0; lo < count; lo += kTileElems) {
    const std::size_t elems = std::min(kTileElems, count - lo);
    for (std::size_t first = 0; first < inputs.size(); first += per_node) {
      const T* head = static_cast<const T*>(inputs[first]) + lo;
      for (std::size_t j = 0; j < elems; ++j) node_acc[j] = load(head[j]);
      for (std::size_t r = first + 1; r < first + per_node; ++r) {
        const T* src = static_cast<const T*>(inputs[r]) + lo;
        for (std::size_t j = 0; j < elems; ++j) node_acc[j] = combine(node_acc[j], load(src[j]));
      }
      for (std::size_t j = 0; j < elems; ++j) {
        const Acc node_sum = load(store(node_acc[j]));
        acc[j] = first == 0 ? node_sum : combine(acc[j], node_sum);
      }
    }
    if (op == ReduceOp::Avg) {
      for (std::size_t j = 0; j < elems; ++j) acc[j] = acc[j] / world;
    }
    for (std::size_t j = 0; j < elems; ++j) dst[lo + j] = store(acc[j]);
  }
}

// fp32 Sum (or Avg when `average`) of elements [begin, count), one element at a time.
void sum_f32_scalar(std::span<const void* const> inputs, float* dst, std::size_t begin,
                    std::size_t count, bool average) {
  const auto world = static_cast<float>(inputs.size());
  for (std::size_t j = begin; j < count; ++j) {
    float acc = static_cast<const float*>(inputs[0])[j];
    for (std::size_t r = 1; r < inputs.size(); ++r) {
      acc = acc + static_cast<const float*>(inputs[r])[j];
    }
    dst[j] = average ? acc / world : acc;
  }
}

using SumF32 = void (*)(std::span<const void* const>, float*, std::size_t, bool);

// Elements before `first` + j sits on a 64-byte boundary (none when it never can): the vector
// loops then read rank 0's cache lines whole, and every rank's when their buffers share rank 0's
// offset, as large buffers from one allocator do.
std::size_t elems_to_line(const void* first, std::size_t count) {
  const auto misaligned_bytes = reinterpret_cast<std::uintptr_t>(first) % 64;
  if (misaligned_bytes % sizeof(float) != 0) return 0;
  return std::min(count, (64 - misaligned_bytes) % 64 / sizeof(float));
}

#if defined(__x86_64__)

[[gnu::target("avx2")]] void sum_f32_avx2(std::span<const void* const> inputs, float* dst,
                                          std::size_t count, bool average) {
  const __m256 world = _mm256_set1_ps(static_cast<float>(inputs.size()));
  std::size_t j = elems_to_line(inputs[0], count);
  sum_f32_scalar(inputs, dst, 0, j, average);
  for (; j + 8 <= count; j += 8) {
    __m256 acc = _mm256_loadu_ps(static_cast<const float*>(inputs[0]) + j);
    for (std::size_t r = 1; r < inputs.size(); ++r) {
      acc = _mm256_add_ps(acc, _mm256_loadu_ps(static_cast<const float*>(inputs[r]) + j));
    }
    _mm256_storeu_ps(dst + j, average ? _mm256_div_ps(acc, world) : acc);
  }
  sum_f32_scalar(inputs, dst, j, count, average);
}

[[gnu::target("avx512f")]] void sum_f32_avx512(std::span<const void* const> inputs, float* dst,
                                               std::size_t count, bool average) {
  const __m512 world = _mm512_set1_ps(static_cast<float>(inputs.size()));
  std::size_t j = elems_to_line(inputs[0], count);
  sum_f32_scalar(inputs, dst, 0, j, average);
  for (; j + 16 <= count; j += 16) {
    __m512 acc = _mm512_loadu_ps(static_cast<const float*>(inputs[0]) + j);
    for (std::size_t r = 1; r < inputs.size(); ++r) {
      acc = _mm512_add_ps(acc, _mm512_loadu_ps(static_cast<const float*>(inputs[r]) + j));
    }
    _mm512_storeu_ps(dst + j, average ? _mm512_div_ps(acc, world) : acc);
  }
  sum_f32_scalar(inputs, dst, j, count, average);
}

// The register path this CPU runs, or nullptr for the tiled loop of reduce_typed.
SumF32 pick_sum_f32() {
  if (__builtin_cpu_supports("avx512f")) return sum_f32_avx512;
  if (__builtin_cpu_supports("avx2")) return sum_f32_avx2;
  return nullptr;
}

#else

SumF32 pick_sum_f32() { return nullptr; }

#endif

}  // namespace

void reduce_rank_order(std::span<const void* const> inputs, void* out, std::size_t count,
                       DType dtype, ReduceOp op, int gpus_per_node) {
  ZL_CHECK(!inputs.empty(), "reduce over zero ranks");
  ZL_CHECK(
      gpus_per_node >= 0 && (gpus_per_node == kOneNode ||
                             inputs.size() % static_cast<std::size_t>(gpus_per_node) == 0),
      "{} GPUs a node do not divide a world of {}: pass a --gpus-per-node that divides --world",
      gpus_per_node, inputs.size());
  const auto per_node = static_cast<std::size_t>(gpus_per_node);
  if (per_node > 1 && per_node < inputs.size()) {
    return with_codec(dtype, [&](auto codec) {
      reduce_by_node<decltype(codec)>(inputs, out, count, op, per_node);
    });
  }
  static const SumF32 sum_f32 = pick_sum_f32();
  if (dtype == DType::F32 && sum_f32 != nullptr && op != ReduceOp::Max) {
    return sum_f32(inputs, static_cast<float*>(out), count, op == ReduceOp::Avg);
  }
  with_codec(dtype, [&](auto codec) { reduce_typed<decltype(codec)>(inputs, out, count, op); });
}

}  // namespace zl
