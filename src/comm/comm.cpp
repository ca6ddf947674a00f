// comm.cpp — what the Comm interface itself does: split() and all_to_all() where a backend has
// neither.
#include "comm/comm.hpp"

#include "core/error.hpp"

namespace zl {

std::unique_ptr<Comm> Comm::split(int color) {
  static_cast<void>(color);
  fail("this backend cannot split its ranks into groups: use --backend sim or mpi");
}

void Comm::all_to_all(const void* send, void* recv, std::size_t count, DType dtype) {
  static_cast<void>(send);
  static_cast<void>(recv);
  fail("this backend has no all_to_all of {} {} elems: use --backend sim or mpi", count,
       dtype_name(dtype));
}

}  // namespace zl
