// comm.cpp — what the Comm interface itself does: split() where a backend has no groups.
#include "comm/comm.hpp"

#include "core/error.hpp"

namespace zl {

std::unique_ptr<Comm> Comm::split(int color) {
  static_cast<void>(color);
  fail("this backend cannot split its ranks into groups: use --backend sim");
}

}  // namespace zl
