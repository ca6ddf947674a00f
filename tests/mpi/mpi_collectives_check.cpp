// mpi_collectives_check.cpp — run under `mpirun -np W`: every MpiComm collective, every dtype and
// op, on counts that do and do not divide by W, against the answer computed locally (each rank
// can build every rank's input, since inputs are a function of rank and index). Deterministic
// mode must match reduce_rank_order bit for bit; native mode within 1e-6 relative (fp32, fp64)
// or one rounding of the 16-bit type (2^-7 bf16, 2^-10 fp16, relative to the largest |value|).
// Also: NaN reaches every rank through Max in both modes, and the traffic ledger holds the ring
// volume of every call. Prints one line per check ("OK ..." or "NOT OK ... first difference")
// and exits 1 if any failed.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "comm/mpi/mpi_comm.hpp"
#include "comm/reduce.hpp"

namespace zl {
namespace {

int failures = 0;

void report(const MpiComm& comm, bool ok, const std::string& what) {
  if (comm.rank() != 0 && ok) return;
  fmt::print("{} rank {}: {}\n", ok ? "OK" : "NOT OK", comm.rank(), what);
  if (!ok) ++failures;
}

// Rank `rank`'s value at index i: varied magnitudes and signs, so sums round.
double input_value(int rank, std::size_t i) {
  const double x = std::sin(static_cast<double>(i) * 0.37 + rank * 1.3) * (1.0 + rank * 0.71);
  return x * std::pow(10.0, static_cast<double>((i + rank) % 5) - 2.0);
}

std::vector<std::byte> encode(const std::vector<double>& values, DType dtype) {
  std::vector<std::byte> bytes(values.size() * dtype_bytes(dtype));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    void* dst = bytes.data() + i * dtype_bytes(dtype);
    if (dtype == DType::F32) {
      const auto f = static_cast<float>(v);
      std::memcpy(dst, &f, sizeof f);
    } else if (dtype == DType::F64) {
      std::memcpy(dst, &v, sizeof v);
    } else {
      const std::uint16_t h = dtype == DType::BF16 ? f32_to_bf16(static_cast<float>(v))
                                                   : f32_to_f16(static_cast<float>(v));
      std::memcpy(dst, &h, sizeof h);
    }
  }
  return bytes;
}

double decode(const std::vector<std::byte>& bytes, std::size_t i, DType dtype) {
  const void* src = bytes.data() + i * dtype_bytes(dtype);
  if (dtype == DType::F32) {
    float f;
    std::memcpy(&f, src, sizeof f);
    return f;
  }
  if (dtype == DType::F64) {
    double d;
    std::memcpy(&d, src, sizeof d);
    return d;
  }
  std::uint16_t h;
  std::memcpy(&h, src, sizeof h);
  return dtype == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

std::vector<std::byte> rank_input(int rank, std::size_t count, DType dtype) {
  std::vector<double> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = input_value(rank, i);
  return encode(values, dtype);
}

// The answer key: reduce_rank_order over every rank's input.
std::vector<std::byte> expected(int world, std::size_t count, DType dtype, ReduceOp op) {
  std::vector<std::vector<std::byte>> inputs;
  std::vector<const void*> pointers;
  for (int r = 0; r < world; ++r) inputs.push_back(rank_input(r, count, dtype));
  for (const auto& input : inputs) pointers.push_back(input.data());
  std::vector<std::byte> out(count * dtype_bytes(dtype));
  reduce_rank_order(pointers, out.data(), count, dtype, op);
  return out;
}

double tolerance(DType dtype) {
  switch (dtype) {
    case DType::BF16:
      return 1.0 / 128;
    case DType::F16:
      return 1.0 / 1024;
    default:
      return 1e-6;
  }
}

// "" when equal (bitwise, or within the native tolerance relative to the largest |expected|),
// else the first difference.
std::string compare(const std::vector<std::byte>& got, const std::vector<std::byte>& want,
                    std::size_t offset, std::size_t count, DType dtype, bool bitwise) {
  double scale = 0.0;
  for (std::size_t i = 0; i < count; ++i)
    scale = std::max(scale, std::abs(decode(want, offset + i, dtype)));
  for (std::size_t i = 0; i < count; ++i) {
    const double a = decode(got, i, dtype), b = decode(want, offset + i, dtype);
    const std::size_t eb = dtype_bytes(dtype);
    const bool same =
        bitwise ? std::memcmp(got.data() + i * eb, want.data() + (offset + i) * eb, eb) == 0
                : std::abs(a - b) <= tolerance(dtype) * scale;
    if (!same) return fmt::format("element {}: got {} want {}", i, a, b);
  }
  return "";
}

void check_reductions(MpiComm& comm, bool bitwise) {
  const int world = comm.size();
  const std::string mode(mpi_reduce_name(comm.mode()));
  for (const DType dtype : {DType::F32, DType::F64, DType::BF16, DType::F16}) {
    for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
      for (const std::size_t count :
           {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{1000}, std::size_t{4099}}) {
        const std::vector<std::byte> want = expected(world, count, dtype, op);
        std::vector<std::byte> data = rank_input(comm.rank(), count, dtype);
        comm.all_reduce(data.data(), count, dtype, op);
        const std::string diff =
            compare(data, want, 0, count, dtype, bitwise || op == ReduceOp::Max);
        report(comm, diff.empty(),
               fmt::format("{} all_reduce {} {} x{} {}", mode, dtype_name(dtype),
                           reduce_op_name(op), count, diff));
        // reduce_scatter: the whole input is W blocks of `count`; rank r gets block r reduced.
        const std::size_t whole = count * static_cast<std::size_t>(world);
        const std::vector<std::byte> whole_want = expected(world, whole, dtype, op);
        const std::vector<std::byte> send = rank_input(comm.rank(), whole, dtype);
        std::vector<std::byte> recv(count * dtype_bytes(dtype));
        comm.reduce_scatter(send.data(), recv.data(), count, dtype, op);
        const std::string rs_diff =
            compare(recv, whole_want, count * static_cast<std::size_t>(comm.rank()), count, dtype,
                    bitwise || op == ReduceOp::Max);
        report(comm, rs_diff.empty(),
               fmt::format("{} reduce_scatter {} {} x{} {}", mode, dtype_name(dtype),
                           reduce_op_name(op), count, rs_diff));
      }
    }
  }
}

void check_nan_reaches_everyone(MpiComm& comm) {
  std::vector<float> values(7, 1.0f);
  if (comm.rank() == comm.size() - 1) values[3] = std::numeric_limits<float>::quiet_NaN();
  comm.all_reduce(values.data(), values.size(), DType::F32, ReduceOp::Max);
  report(comm, std::isnan(values[3]) && values[0] == 1.0f,
         fmt::format("{} max carries a NaN from the last rank", mpi_reduce_name(comm.mode())));
}

void check_movers(MpiComm& comm) {
  const int world = comm.size();
  const std::size_t count = 5;
  std::vector<std::byte> whole = rank_input(0, count * static_cast<std::size_t>(world), DType::F64);
  // all_gather: block r of the output is rank r's block; once from a separate buffer, once in
  // place.
  std::vector<std::byte> mine(
      whole.begin() +
          static_cast<std::ptrdiff_t>(count * 8 * static_cast<std::size_t>(comm.rank())),
      whole.begin() +
          static_cast<std::ptrdiff_t>(count * 8 * static_cast<std::size_t>(comm.rank() + 1)));
  std::vector<std::byte> out(whole.size());
  comm.all_gather(mine.data(), out.data(), count, DType::F64);
  report(comm, out == whole, "all_gather f64");
  std::vector<std::byte> in_place(whole.size());
  std::memcpy(in_place.data() + count * 8 * static_cast<std::size_t>(comm.rank()), mine.data(),
              mine.size());
  comm.all_gather(in_place.data() + count * 8 * static_cast<std::size_t>(comm.rank()),
                  in_place.data(), count, DType::F64);
  report(comm, in_place == whole, "all_gather f64 in place");
  const int root = world - 1;
  std::vector<std::byte> data = rank_input(comm.rank(), 9, DType::BF16);
  comm.broadcast(data.data(), 9, DType::BF16, root);
  report(comm, data == rank_input(root, 9, DType::BF16), "broadcast bf16 from the last rank");
  comm.barrier();
}

// The ring volumes, as the sim records them (comm/traffic_ledger.hpp).
void check_ledger(MpiComm& comm) {
  const TrafficLedger before = comm.traffic();
  std::vector<float> data(10, 1.0f);
  comm.all_reduce(data.data(), data.size(), DType::F32, ReduceOp::Sum);
  const RingVolume want = ring_volume(CollectiveKind::AllReduce, 10, 4, comm.rank(), comm.size());
  const TrafficLedger& after = comm.traffic();
  const bool ok =
      after.calls(CollectiveKind::AllReduce) == before.calls(CollectiveKind::AllReduce) + 1 &&
      after.sent_bytes(CollectiveKind::AllReduce) - before.sent_bytes(CollectiveKind::AllReduce) ==
          want.sent_bytes &&
      after.recv_bytes(CollectiveKind::AllReduce) - before.recv_bytes(CollectiveKind::AllReduce) ==
          want.recv_bytes;
  report(comm, ok,
         fmt::format("traffic ledger: all_reduce of 10 fp32 sends {} bytes", want.sent_bytes));
}

}  // namespace
}  // namespace zl

int main() {
  using namespace zl;
  for (const MpiReduce mode : {MpiReduce::Deterministic, MpiReduce::Native}) {
    MpiComm comm(mode);
    check_reductions(comm, mode == MpiReduce::Deterministic);
    check_nan_reaches_everyone(comm);
    check_movers(comm);
    check_ledger(comm);
  }
  int failed_anywhere = 0;
  MPI_Allreduce(&failures, &failed_anywhere, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (mpi_world_rank() == 0) {
    fmt::print("{}\n", failed_anywhere == 0 ? "all collectives OK"
                                            : fmt::format("{} checks NOT OK", failed_anywhere));
  }
  return failed_anywhere == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
