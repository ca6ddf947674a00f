// ds_json.hpp — the JSON side of reading a DeepSpeed config (cli/ds_config.cpp): parsing with
// one-line errors (the line and column of malformed text, a key twice in one object), values
// quoted on one line, and the Checker whose reads name each key and what to use instead, keep
// every problem of a file, sort the keys it does not read into known and unknown, and note
// "auto".
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace zl::ds {

/// The JSON type the config is read into.
using json = nlohmann::json;

/// `value` as compact JSON on one line, cut to 40 characters (ending in "...").
std::string shown(const json& value);

/// "parent.key", or "key" at the top; control characters in the key escaped.
std::string path_of(std::string_view parent, std::string_view key);

/// Parses `text`, the config named `source` in messages. Throws zl::Error in one line for text
/// that is not JSON ("<source>: line L, column C: not valid JSON: ...") and for a key that appears
/// twice in one object ("<source>: key a.b appears twice in one object: ..."), and for objects
/// and arrays nested deeper than 64 levels, as soon as the parse reaches them. Linear in the
/// text's length.
json parse_config(std::string_view text, std::string_view source);

/// Reads the value of one key; gets the value and its full path ("zero_optimization.stage").
using Reader = std::function<void(const json& value, const std::string& path)>;
/// One section's readers, by key.
using Readers = std::map<std::string, Reader, std::less<>>;

/// Reads values of one config into checked C++ values; every failure names the source and key.
/// A failing key does not stop the reading: its problem is kept and the next key is read, so a
/// file's problems are reported together.
class Checker {
 public:
  /// Reads the config named `source` in messages, adding warnings to `warnings` (both outlive it).
  Checker(std::string_view source, std::vector<std::string>& warnings)
      : source_(source), warnings_(warnings) {}

  /// Throws "<source>: <path> is <value>: <use>" (kept as the key's problem by section()).
  [[noreturn]] void bad(const std::string& path, const json& value, std::string_view use) const {
    fail("{}: {} is {}: {}", source_, path, shown(value), use);
  }

  /// Warns about a key that is read but does nothing in zerolab, saying why (--strict: an error).
  void warn(const std::string& path, std::string_view why) const {
    warnings_.push_back(fmt::format("{}: {} {}", source_, path, why));
  }

  /// Runs the reader of each key of the object at `path`. A reader's zl::Error is kept as a
  /// problem and the next key is read. "auto" skips the reader (the run's own value stays; the
  /// path is kept in autos()). A key with no reader is a warning: known to DeepSpeed and not
  /// implemented (an error if its value would change the run), or unknown (with the nearest
  /// known key, as a likely typo).
  void section(const json& object, const std::string& path, const Readers& readers) const;

  /// Reads `value` at `path` with `read`, keeping a zl::Error as a problem.
  void guarded(const std::string& path, const json& value, const Reader& read) const;

  /// Adds a problem of the whole file (not of one key), e.g. two settings that disagree.
  void problem(std::string message) const { problems_.push_back(std::move(message)); }

  /// Every problem found so far, one line each, in reading order.
  const std::vector<std::string>& problems() const { return problems_; }

  /// The paths whose value was "auto", in reading order.
  const std::vector<std::string>& autos() const { return autos_; }

  /// A whole number in [min, max]; integral-valued doubles (5e8) count, 1.5 does not.
  std::int64_t whole(const json& value, const std::string& path, std::int64_t min, std::int64_t max,
                     std::string_view use) const {
    std::int64_t number = 0;
    if (value.is_number_unsigned()) {
      const auto unsigned_number = value.get<std::uint64_t>();
      if (unsigned_number > static_cast<std::uint64_t>(max)) bad(path, value, use);
      number = static_cast<std::int64_t>(unsigned_number);
    } else if (value.is_number_integer()) {
      number = value.get<std::int64_t>();
    } else if (value.is_number_float()) {
      const double real = value.get<double>();
      constexpr double kTwoTo63 = 9223372036854775808.0;
      if (!std::isfinite(real) || std::floor(real) != real || real < -kTwoTo63 ||
          real >= kTwoTo63) {
        bad(path, value, use);
      }
      number = static_cast<std::int64_t>(real);
    } else {
      bad(path, value, use);
    }
    if (number < min || number > max) bad(path, value, use);
    return number;
  }

  /// A whole number >= min.
  std::int64_t at_least(const json& value, const std::string& path, std::int64_t min,
                        std::string_view use) const {
    return whole(value, path, min, std::numeric_limits<std::int64_t>::max(), use);
  }

  /// A finite number that `accepts`.
  double real(const json& value, const std::string& path, bool (*accepts)(double),
              std::string_view use) const {
    if (!value.is_number()) bad(path, value, use);
    const double number = value.get<double>();
    if (!std::isfinite(number) || !accepts(number)) bad(path, value, use);
    return number;
  }

  /// true or false.
  bool boolean(const json& value, const std::string& path) const {
    if (!value.is_boolean()) bad(path, value, "use true or false");
    return value.get<bool>();
  }

  /// The config's name in messages.
  std::string_view source() const { return source_; }

 private:
  void unread_key(const std::string& path, const json& value, const Readers& readers) const;

  std::string_view source_;
  std::vector<std::string>& warnings_;
  mutable std::vector<std::string> problems_;
  mutable std::vector<std::string> autos_;
};


}  // namespace zl::ds
