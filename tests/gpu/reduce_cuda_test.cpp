// reduce_cuda_test.cpp — the device rank-order reduction against comm/reduce.hpp's
// reduce_rank_order, bit for bit, for W = 1..4 ranks, every dtype it reduces (fp32, fp64, bf16,
// fp16) and every op, on values with ties to round, infinities and NaN (a NaN matches a NaN
// whatever its payload). This is what a simulator on one GPU needs for its ranks' buffers.
#include "ops/cuda/reduce_cuda.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "comm/reduce.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "gpu_test_support.hpp"

namespace zl {
namespace {

using test::download_bytes;
using test::random_values;
using test::upload_bytes;
using test::value_at;

TEST(GpuReduce, RankOrderKernelGivesTheHostBits) {
  ZL_REQUIRE_GPU();
  CudaDevice device(0);
  constexpr std::size_t kElems = 3001;
  for (const DType dtype : {DType::F32, DType::F64, DType::BF16, DType::F16}) {
    for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
      for (int world = 1; world <= 4; ++world) {
        std::vector<std::vector<std::byte>> host;
        std::vector<Buffer> ranks;
        std::vector<const void*> host_inputs, device_inputs;
        for (int r = 0; r < world; ++r) {
          host.push_back(
              random_values(dtype, kElems, 1000 + 10 * r, op == ReduceOp::Max && r == 1));
        }
        for (int r = 0; r < world; ++r) {
          ranks.push_back(upload_bytes(device, host[r], dtype, kElems));
          host_inputs.push_back(host[r].data());
          device_inputs.push_back(ranks.back().data());
        }
        std::vector<std::byte> expected(kElems * dtype_bytes(dtype));
        reduce_rank_order(host_inputs, expected.data(), kElems, dtype, op);
        Buffer out = device.alloc(MemCategory::CommBuffer, dtype, {kElems});
        reduce_rank_order_cuda(device_inputs, out.data(), kElems, dtype, op, device.stream());
        const auto actual = download_bytes(device, out);
        for (std::size_t i = 0; i < kElems; ++i) {
          const std::size_t width = dtype_bytes(dtype);
          const bool same_bits =
              std::memcmp(actual.data() + width * i, expected.data() + width * i, width) == 0;
          const bool both_nan =
              std::isnan(value_at(actual, dtype, i)) && std::isnan(value_at(expected, dtype, i));
          ASSERT_TRUE(same_bits || both_nan)
              << dtype_name(dtype) << " " << reduce_op_name(op) << " W=" << world << " element "
              << i << ": gpu " << value_at(actual, dtype, i) << ", host "
              << value_at(expected, dtype, i);
        }
      }
    }
  }
}

TEST(GpuReduce, BadArgumentsAreOneLineErrors) {
  // Checked on the host before any launch: needs no GPU.
  std::vector<const void*> none;
  EXPECT_THROW(reduce_rank_order_cuda(none, nullptr, 0, DType::F32, ReduceOp::Sum, nullptr), Error);
  std::vector<const void*> too_many(kReduceMaxRanks + 1, nullptr);
  EXPECT_THROW(reduce_rank_order_cuda(too_many, nullptr, 0, DType::F32, ReduceOp::Sum, nullptr),
               Error);
  std::vector<const void*> one(1, nullptr);
  EXPECT_THROW(reduce_rank_order_cuda(one, nullptr, 0, DType::I64, ReduceOp::Sum, nullptr), Error);
}

}  // namespace
}  // namespace zl
