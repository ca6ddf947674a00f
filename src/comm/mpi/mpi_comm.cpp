// mpi_comm.cpp — MpiComm: MPI's life in the process, the rank-order (deterministic) and native
// reductions, the plain data movers, and the bookkeeping every call shares with the sim.
#include "comm/mpi/mpi_comm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "comm/reduce.hpp"
#include "comm/traffic_ledger.hpp"
#include "core/error.hpp"
#include "links.hpp"

namespace zl {

namespace {

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized == 0) MPI_Finalize();
}

void ensure_initialized() {
  static std::once_flag once;
  std::call_once(once, [] {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized != 0) return;
    int provided = 0;
    ZL_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) == MPI_SUCCESS,
             "MPI_Init_thread failed: start zerolab with mpirun -np N (OpenMPI)");
    std::atexit(finalize_at_exit);
  });
}

// MPI counts are ints; a larger call must be split (reduce_bucket_size, allgather_bucket_size).
int mpi_count(std::size_t elems, const CallDesc& call) {
  ZL_CHECK(elems <= static_cast<std::size_t>(INT_MAX),
           "{} is too large for one MPI call ({} elems at most): lower reduce_bucket_size or "
           "allgather_bucket_size",
           describe(call), INT_MAX);
  return static_cast<int>(elems);
}

bool overlaps(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto* pa = static_cast<const std::byte*>(a);
  const auto* pb = static_cast<const std::byte*>(b);
  return pa < pb + b_bytes && pb < pa + a_bytes;
}

// A user op: inout = in (op) inout for `len` elements of kDType, computed by reduce_rank_order
// on the two arrays, so a pair is combined exactly as two ranks are (16-bit values in float).
template <DType kDType, ReduceOp kOp>
void combine_pair(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  thread_local std::vector<std::byte> out;
  const std::size_t elems = static_cast<std::size_t>(*len);
  out.resize(elems * dtype_bytes(kDType));
  const std::array<const void*, 2> inputs = {in, inout};
  reduce_rank_order(inputs, out.data(), elems, kDType, kOp);
  std::memcpy(inout, out.data(), out.size());
}

MPI_Op create_op(MPI_User_function* function) {
  MPI_Op op = MPI_OP_NULL;
  MPI_Op_create(function, /*commute=*/1, &op);
  return op;
}

// Native Avg: the sum, then one division by the world size, in the accumulation type.
void divide_by_world(void* data, std::size_t count, DType dtype, int world) {
  switch (dtype) {
    case DType::F32: {
      auto* values = static_cast<float*>(data);
      for (std::size_t i = 0; i < count; ++i) values[i] = values[i] / static_cast<float>(world);
      return;
    }
    case DType::F64: {
      auto* values = static_cast<double*>(data);
      for (std::size_t i = 0; i < count; ++i) values[i] = values[i] / static_cast<double>(world);
      return;
    }
    case DType::BF16: {
      auto* values = static_cast<std::uint16_t*>(data);
      for (std::size_t i = 0; i < count; ++i) {
        values[i] = f32_to_bf16(bf16_to_f32(values[i]) / static_cast<float>(world));
      }
      return;
    }
    case DType::F16: {
      auto* values = static_cast<std::uint16_t*>(data);
      for (std::size_t i = 0; i < count; ++i) {
        values[i] = f32_to_f16(f16_to_f32(values[i]) / static_cast<float>(world));
      }
      return;
    }
    case DType::I64:
    case DType::I8:
      break;
  }
  fail("avg over {} is not supported", dtype_name(dtype));
}

}  // namespace

MPI_Datatype mpi_datatype(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return MPI_FLOAT;
    case DType::F64:
      return MPI_DOUBLE;
    case DType::BF16:
    case DType::F16:
      return MPI_UINT16_T;  // moved as bits; only the reductions read them
    case DType::I64:
      return MPI_INT64_T;
    case DType::I8:
      return MPI_INT8_T;
  }
  fail("unknown dtype {}", static_cast<int>(dtype));
}

int mpi_world_size() {
  ensure_initialized();
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

int mpi_world_rank() {
  ensure_initialized();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

void mpi_abort(std::string_view message) {
  fmt::print(stderr, "zerolab: error: rank {}: {}\n", mpi_world_rank(), message);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; this is for the compiler
}

MpiComm::MpiComm(MpiReduce mode, const TimelineOptions& timeline, std::chrono::milliseconds timeout,
                 int gpus_per_node)
    : mode_(mode),
      gpus_per_node_(gpus_per_node),
      world_gpus_per_node_(gpus_per_node),
      timeout_(timeout),
      own_timeline_(std::make_unique<RankTimeline>(mpi_world_size(), timeline)),
      timeline_(own_timeline_.get()) {
  ZL_CHECK(timeout.count() > 0, "a collective timeout of {} ms is invalid: use a positive one",
           timeout.count());
  MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &world_);
  for (int r = 0; r < world_; ++r) world_ranks_.push_back(r);
  level_ = link_level_of(world_, node_count(world_, gpus_per_node_));
  create_user_ops();
  timeline_->start();
}

void MpiComm::create_user_ops() {
  user_ops_[{DType::BF16, ReduceOp::Sum}] = create_op(combine_pair<DType::BF16, ReduceOp::Sum>);
  user_ops_[{DType::F16, ReduceOp::Sum}] = create_op(combine_pair<DType::F16, ReduceOp::Sum>);
  user_ops_[{DType::F32, ReduceOp::Max}] = create_op(combine_pair<DType::F32, ReduceOp::Max>);
  user_ops_[{DType::F64, ReduceOp::Max}] = create_op(combine_pair<DType::F64, ReduceOp::Max>);
  user_ops_[{DType::BF16, ReduceOp::Max}] = create_op(combine_pair<DType::BF16, ReduceOp::Max>);
  user_ops_[{DType::F16, ReduceOp::Max}] = create_op(combine_pair<DType::F16, ReduceOp::Max>);
}

MpiComm::~MpiComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized != 0) return;
  for (auto& [key, op] : user_ops_) MPI_Op_free(&op);
  MPI_Comm_free(&comm_);
}

void MpiComm::run_call(const CallDesc& call, const std::function<void()>& transfer) {
  check_call_arguments(call, world_);  // this rank's own errors, before any rank is waited for
  const double ready_ms = timeline_->before_call();
  agree(++agreed_, call);
  transfer();
  CallInfo info =
      record_call(traffic(), level_, call, rank_, world_, {group_nodes_, group_leader_});
  info.number = ++*calls_;
  timeline_->after_call(info, /*async=*/false, ready_ms);
}

void MpiComm::all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op) {
  const CallDesc call{.kind = CollectiveKind::AllReduce,
                      .op = op,
                      .dtype = dtype,
                      .count = count,
                      .send = data,
                      .recv = data};
  run_call(call, [&] {
    mpi_count(count, call);
    if (mode_ == MpiReduce::Deterministic) {
      all_reduce_rank_order(data, count, dtype, op);
    } else {
      all_reduce_native(data, count, dtype, op);
    }
  });
}

void MpiComm::reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                             ReduceOp op) {
  const CallDesc call{.kind = CollectiveKind::ReduceScatter,
                      .op = op,
                      .dtype = dtype,
                      .count = recv_count,
                      .send = send,
                      .recv = recv};
  run_call(call, [&] {
    mpi_count(recv_count, call);
    if (mode_ == MpiReduce::Deterministic) {
      reduce_scatter_rank_order(send, recv, recv_count, dtype, op);
    } else {
      reduce_scatter_native(send, recv, recv_count, dtype, op);
    }
  });
}

void MpiComm::all_gather(const void* send, void* recv, std::size_t send_count, DType dtype) {
  const CallDesc call{.kind = CollectiveKind::AllGather,
                      .dtype = dtype,
                      .count = send_count,
                      .send = send,
                      .recv = recv};
  run_call(call, [&] {
    const int count = mpi_count(send_count, call);
    const std::size_t block_bytes = send_count * dtype_bytes(dtype);
    auto* own_block = static_cast<std::byte*>(recv) + static_cast<std::size_t>(rank_) * block_bytes;
    if (send == own_block) {  // already in place, as MPI wants it said
      MPI_Request request = MPI_REQUEST_NULL;
      MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, count, mpi_datatype(dtype), comm_,
                     &request);
      wait_or_abort(request);
      return;
    }
    std::vector<std::byte> copy;  // MPI forbids a send buffer inside the receive buffer
    if (overlaps(send, block_bytes, recv, block_bytes * static_cast<std::size_t>(world_))) {
      copy.assign(static_cast<const std::byte*>(send),
                  static_cast<const std::byte*>(send) + block_bytes);
      send = copy.data();
    }
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Iallgather(send, count, mpi_datatype(dtype), recv, count, mpi_datatype(dtype), comm_,
                   &request);
    wait_or_abort(request);
  });
}

void MpiComm::broadcast(void* data, std::size_t count, DType dtype, int root) {
  const CallDesc call{.kind = CollectiveKind::Broadcast,
                      .dtype = dtype,
                      .count = count,
                      .root = root,
                      .send = data,
                      .recv = data};
  run_call(call, [&] {
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Ibcast(data, mpi_count(count, call), mpi_datatype(dtype), root, comm_, &request);
    wait_or_abort(request);
  });
}

void MpiComm::barrier() {
  run_call({.kind = CollectiveKind::Barrier}, [&] {
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Ibarrier(comm_, &request);
    wait_or_abort(request);
  });
}

void MpiComm::host_copy(HostCopy direction, std::int64_t bytes) {
  traffic().record_copy(direction, bytes);
  timeline_->host_copy(direction, bytes);
}

void MpiComm::disk_io(DiskIo direction, std::int64_t bytes, double ms) {
  traffic().record_disk(direction, bytes, ms);
  timeline_->disk_io(direction, bytes);
}

std::int64_t MpiComm::disk_io_started(DiskIo direction, std::int64_t bytes) {
  return timeline_->disk_start(direction, bytes);
}

void MpiComm::disk_io_waited(std::int64_t id) {
  timeline_->disk_wait(id);
}

// Chunk c of W is [count*c/W, count*(c+1)/W): near-equal, and every rank cuts alike. Rank r
// receives chunk r of every rank, sums them in rank order, and the chunks are gathered back.
void MpiComm::all_reduce_rank_order(void* data, std::size_t count, DType dtype, ReduceOp op) {
  const std::size_t elem_bytes = dtype_bytes(dtype);
  const auto world = static_cast<std::size_t>(world_);
  std::vector<int> chunk_counts(world), chunk_displs(world);
  for (std::size_t c = 0; c < world; ++c) {
    chunk_displs[c] = static_cast<int>(count * c / world);
    chunk_counts[c] = static_cast<int>(count * (c + 1) / world) - chunk_displs[c];
  }
  const int own = chunk_counts[static_cast<std::size_t>(rank_)];
  std::vector<int> own_counts(world, own), own_displs(world);
  for (std::size_t r = 0; r < world; ++r) own_displs[r] = static_cast<int>(r) * own;
  // own_chunks is (W, own): row r is rank r's copy of this rank's chunk.
  std::vector<std::byte> own_chunks(world * static_cast<std::size_t>(own) * elem_bytes);
  const MPI_Datatype type = mpi_datatype(dtype);
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Ialltoallv(data, chunk_counts.data(), chunk_displs.data(), type, own_chunks.data(),
                 own_counts.data(), own_displs.data(), type, comm_, &request);
  wait_or_abort(request);
  std::vector<const void*> inputs(world);
  for (std::size_t r = 0; r < world; ++r) {
    inputs[r] = own_chunks.data() + r * static_cast<std::size_t>(own) * elem_bytes;
  }
  auto* own_chunk =
      static_cast<std::byte*>(data) +
      static_cast<std::size_t>(chunk_displs[static_cast<std::size_t>(rank_)]) * elem_bytes;
  reduce_rank_order(inputs, own_chunk, static_cast<std::size_t>(own), dtype, op, gpus_per_node_);
  MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, chunk_counts.data(),
                  chunk_displs.data(), type, comm_, &request);
  wait_or_abort(request);
}

// Block r of every rank's `send` goes to rank r, which sums the W blocks in rank order.
void MpiComm::reduce_scatter_rank_order(const void* send, void* recv, std::size_t recv_count,
                                        DType dtype, ReduceOp op) {
  const std::size_t block_bytes = recv_count * dtype_bytes(dtype);
  const auto world = static_cast<std::size_t>(world_);
  std::vector<std::byte> blocks(world * block_bytes);  // (W, recv_count): row r is rank r's block
  const MPI_Datatype type = mpi_datatype(dtype);
  const int count = static_cast<int>(recv_count);
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Ialltoall(send, count, type, blocks.data(), count, type, comm_, &request);
  wait_or_abort(request);
  std::vector<const void*> inputs(world);
  for (std::size_t r = 0; r < world; ++r) inputs[r] = blocks.data() + r * block_bytes;
  reduce_rank_order(inputs, recv, recv_count, dtype, op, gpus_per_node_);
}

MPI_Op MpiComm::native_op(DType dtype, ReduceOp op) const {
  if (op != ReduceOp::Max && (dtype == DType::F32 || dtype == DType::F64)) return MPI_SUM;
  return user_ops_.at({dtype, op == ReduceOp::Max ? ReduceOp::Max : ReduceOp::Sum});
}

void MpiComm::all_reduce_native(void* data, std::size_t count, DType dtype, ReduceOp op) {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), mpi_datatype(dtype),
                 native_op(dtype, op), comm_, &request);
  wait_or_abort(request);
  if (op == ReduceOp::Avg) divide_by_world(data, count, dtype, world_);
}

void MpiComm::reduce_scatter_native(const void* send, void* recv, std::size_t recv_count,
                                    DType dtype, ReduceOp op) {
  const std::size_t send_bytes = recv_count * dtype_bytes(dtype) * static_cast<std::size_t>(world_);
  std::vector<std::byte> copy;  // MPI forbids overlapping buffers
  if (overlaps(send, send_bytes, recv, recv_count * dtype_bytes(dtype))) {
    copy.assign(static_cast<const std::byte*>(send),
                static_cast<const std::byte*>(send) + send_bytes);
    send = copy.data();
  }
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Ireduce_scatter_block(send, recv, static_cast<int>(recv_count), mpi_datatype(dtype),
                            native_op(dtype, op), comm_, &request);
  wait_or_abort(request);
  if (op == ReduceOp::Avg) divide_by_world(recv, recv_count, dtype, world_);
}

std::vector<std::string> MpiComm::gather_to_root(std::string_view bytes) {
  ZL_CHECK(bytes.size() <= static_cast<std::size_t>(INT_MAX),
           "gather_to_root of {} bytes is too large for one MPI call", bytes.size());
  agree(++agreed_, {}, "gather_to_root");
  const int own_bytes = static_cast<int>(bytes.size());
  const bool is_root = rank_ == 0;
  std::vector<int> sizes(is_root ? static_cast<std::size_t>(world_) : 0);
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Igather(&own_bytes, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, comm_, &request);
  wait_or_abort(request);
  std::vector<int> displs(sizes.size());
  std::int64_t total = 0;
  for (std::size_t r = 0; r < sizes.size(); ++r) {
    displs[r] = static_cast<int>(total);
    total += sizes[r];
  }
  ZL_CHECK(total <= INT_MAX, "gather_to_root of {} bytes is too large for one MPI call", total);
  std::string all(static_cast<std::size_t>(total), '\0');
  MPI_Igatherv(bytes.data(), own_bytes, MPI_CHAR, all.data(), sizes.data(), displs.data(), MPI_CHAR,
               0, comm_, &request);
  wait_or_abort(request);
  std::vector<std::string> per_rank;
  for (std::size_t r = 0; r < sizes.size(); ++r) {
    per_rank.push_back(
        all.substr(static_cast<std::size_t>(displs[r]), static_cast<std::size_t>(sizes[r])));
  }
  return per_rank;
}

std::string MpiComm::broadcast_from_root(std::string_view bytes) {
  ZL_CHECK(bytes.size() <= static_cast<std::size_t>(INT_MAX),
           "broadcast_from_root of {} bytes is too large for one MPI call", bytes.size());
  agree(++agreed_, {}, "broadcast_from_root");
  int size = static_cast<int>(bytes.size());
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Ibcast(&size, 1, MPI_INT, 0, comm_, &request);
  wait_or_abort(request);
  std::string out =
      rank_ == 0 ? std::string(bytes) : std::string(static_cast<std::size_t>(size), '\0');
  MPI_Ibcast(out.data(), size, MPI_CHAR, 0, comm_, &request);
  wait_or_abort(request);
  return out;
}

}  // namespace zl
