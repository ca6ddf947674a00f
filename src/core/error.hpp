// error.hpp — zerolab's one error type and ZL_CHECK, which turns a broken precondition into a
// one-line message that says what is wrong and what to do about it.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace zl {

/// What an Error reports, for the zerolab command's exit code (docs/usage.md, "Exit codes").
enum class ErrorKind : std::uint8_t {
  Runtime,  ///< a fault while running: a collective timeout, an injected fault, a failed write
  Usage,    ///< the command line or config asks for what zerolab cannot do (flags, sizes, memory)
  Input,    ///< a file the run reads is wrong: --data, --init, the checkpoint resumed
};

/// The exit code of a failure of `kind`, the same for the zerolab command and the lessons
/// (docs/usage.md, "Exit codes"): 1 a fault while running, 2 a request that cannot work, 3 a file
/// the run reads that is wrong.
constexpr int exit_code_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Usage:
      return 2;
    case ErrorKind::Input:
      return 3;
    case ErrorKind::Runtime:
      break;
  }
  return 1;
}

/// The exception every zerolab check throws. what() is a single line meant for the user.
class Error : public std::runtime_error {
 public:
  /// An error of `kind` (Runtime unless a phase of the run says otherwise: with_error_kind).
  explicit Error(const std::string& what, ErrorKind kind = ErrorKind::Runtime)
      : std::runtime_error(what), kind_(kind) {}
  /// What the error reports.
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

/// Runs `fn` and returns what it returns; an Error of kind Runtime that it throws leaves as an
/// Error of `kind` with the same message (a phase of the run, such as reading its inputs, says
/// what its failures are).
template <class Fn>
decltype(auto) with_error_kind(ErrorKind kind, Fn&& fn) {
  try {
    return std::forward<Fn>(fn)();
  } catch (const Error& error) {
    if (error.kind() != ErrorKind::Runtime) throw;
    throw Error(error.what(), kind);
  }
}

/// Throws zl::Error with a fmt-formatted message.
template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace zl

/// ZL_CHECK(cond, "what is wrong: {}; what to do", args...) throws zl::Error when cond is false.
#define ZL_CHECK(cond, ...)    \
  do {                         \
    if (!(cond)) {             \
      ::zl::fail(__VA_ARGS__); \
    }                          \
  } while (0)
