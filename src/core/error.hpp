// error.hpp — zerolab's one error type and ZL_CHECK, which turns a broken precondition into a
// one-line message that says what is wrong and what to do about it.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace zl {

/// The exception every zerolab check throws. what() is a single line meant for the user.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Throws zl::Error with a fmt-formatted message.
template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace zl

/// ZL_CHECK(cond, "what is wrong: {}; what to do", args...) throws zl::Error when cond is false.
#define ZL_CHECK(cond, ...)        \
  do {                             \
    if (!(cond)) {                 \
      ::zl::fail(__VA_ARGS__);     \
    }                              \
  } while (0)
