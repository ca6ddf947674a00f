// check_elems.hpp — the size check every Device kernel runs on its arguments (ops/device.cpp,
// once for every device, so all reject a mis-sized span with the same one-line message).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/error.hpp"

namespace zl {

/// Throws zl::Error unless a kernel's argument `what` has the elements its shapes need.
inline void check_elems(const char* kernel, const char* what, std::size_t actual_elems,
                        std::int64_t expected_elems) {
  ZL_CHECK(static_cast<std::int64_t>(actual_elems) == expected_elems,
           "{}: {} has {} elements but the shapes need {}", kernel, what, actual_elems,
           expected_elems);
}

}  // namespace zl
