// ds_known_keys.hpp — the DeepSpeed config keys zerolab knows but does not implement, each with
// what zerolab does instead and whether a value could change the run's results. A key that could
// is accepted only at the value that changes nothing (its DeepSpeed default, or "enabled": false);
// any other value is an error, never a silent no-op.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cli/ds_json.hpp"

namespace zl::ds {

/// A key DeepSpeed reads that zerolab does not implement.
struct KnownKey {
  std::string_view path;     ///< full path, "zero_optimization.sub_group_size"
  std::string_view instead;  ///< what zerolab does instead, for the message
  bool changes_results;      ///< a value other than `harmless` would change the run
  std::string_view harmless;  ///< JSON text of the value that changes nothing (when it matters)
};

/// The entry for `path` ("a.b.c"), or null when DeepSpeed has no such key that zerolab knows.
const KnownKey* known_key(std::string_view path);

/// Whether `value` at `key` changes nothing in zerolab: any value of a key that cannot change
/// results; otherwise the harmless value, or an object whose "enabled" is false.
bool harmless_value(const KnownKey& key, const json& value);

/// The known keys (implemented or not) directly under `parent` ("" is the top level), for
/// suggesting the nearest one to a misspelt key.
std::vector<std::string> known_keys_under(std::string_view parent);

/// The candidate closest to `key` by edit distance, or "" when none is close enough to be a
/// likely typo (at most a third of the key's length, and at least 1, edits away).
std::string nearest_key(std::string_view key, const std::vector<std::string>& candidates);

}  // namespace zl::ds
