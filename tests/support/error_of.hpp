// error_of.hpp — the message of the zl::Error an action throws, for tests that check an error's
// one line.
#pragma once

#include <string>

#include "core/error.hpp"

namespace zl::test {

/// What `action()` throws as zl::Error, or "" when it throws none.
template <class Fn>
std::string error_of(Fn action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace zl::test
