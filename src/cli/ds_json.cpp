// ds_json.cpp — values quoted on one line, where malformed JSON first goes wrong, and keys
// that appear twice in one object, for the DeepSpeed config reader.
#include "cli/ds_json.hpp"

#include "cli/ds_known_keys.hpp"

#include <algorithm>
#include <set>
#include <utility>

namespace zl::ds {

namespace {

// Longest value a message quotes; longer ones are cut and end in "...".
constexpr std::size_t kShownChars = 40;

// Deepest nesting a config may have. DeepSpeed's own keys nest three levels; the bound keeps a
// hostile file from making the parse, the messages or the value's destruction deep.
constexpr int kMaxConfigDepth = 64;

// A key as a message shows it: control characters escaped, so a message stays one line.
std::string printable(std::string_view key) {
  const bool plain = std::ranges::none_of(
      key, [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
  if (plain) return std::string(key);
  const std::string quoted = json(key).dump(-1, ' ', false, json::error_handler_t::replace);
  return quoted.substr(1, quoted.size() - 2);
}


// Appends `value` as compact JSON, stopping soon after `out` passes kShownChars: every level adds
// a character, so even a deeply nested value recurses only about kShownChars deep.
void render(const json& value, std::string& out) {
  if (!value.is_structured()) {
    out += value.dump(-1, ' ', false, json::error_handler_t::replace);
    return;
  }
  out += value.is_array() ? '[' : '{';
  bool first = true;
  for (const auto& [key, element] : value.items()) {
    if (out.size() > kShownChars) return;
    if (!first) out += ',';
    first = false;
    if (value.is_object()) {
      out += json(key).dump(-1, ' ', false, json::error_handler_t::replace) + ":";
    }
    render(element, out);
  }
  out += value.is_array() ? ']' : '}';
}


// A parse error's byte position as 1-based line and column: nlohmann's `byte` is the 1-based
// index of the character it stopped at (one past the end for an early end of input).
std::pair<std::size_t, std::size_t> line_and_column(std::string_view text, std::size_t byte) {
  const std::size_t index = std::min(byte == 0 ? 0 : byte - 1, text.size());
  const std::string_view before = text.substr(0, index);
  const std::size_t line = 1 + static_cast<std::size_t>(std::ranges::count(before, '\n'));
  const std::size_t last_newline = before.rfind('\n');
  const std::size_t column =
      last_newline == std::string_view::npos ? index + 1 : index - last_newline;
  return {line, column};
}

// Reads JSON without building it, to learn where it first goes wrong: nlohmann reports every
// error here with its position, also a number too large for a double, which json::parse throws
// without one.
class ErrorLocator : public json::json_sax_t {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(json::number_integer_t) override { return true; }
  bool number_unsigned(json::number_unsigned_t) override { return true; }
  bool number_float(json::number_float_t, const json::string_t&) override { return true; }
  bool string(json::string_t&) override { return true; }
  bool binary(json::binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(json::string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&,
                   const json::exception& error) override {
    byte = position;
    reason = error.what();
    return false;
  }

  std::size_t byte = 0;
  std::string reason;
};

// The one-line error for text json::parse rejected: "<source>: line L, column C: not valid JSON:
// <nlohmann's reason, without its "[json.exception...] parse error at ...: " prefix>".
[[noreturn]] void fail_malformed(std::string_view text, std::string_view source) {
  ErrorLocator locator;
  json::sax_parse(text, &locator);
  std::string_view reason = locator.reason;
  if (const std::size_t bracket = reason.find("] "); bracket != std::string_view::npos) {
    reason.remove_prefix(bracket + 2);
  }
  if (const std::size_t colon = reason.find(": ");
      reason.starts_with("parse error") && colon != std::string_view::npos) {
    reason.remove_prefix(colon + 2);
  }
  const auto [line, column] = line_and_column(text, locator.byte);
  fail("{}: line {}, column {}: not valid JSON: {}", source, line, column, reason);
}

// json::parse keeps the last of two equal keys in one object without a word; this parser
// callback refuses the second, naming its full path ("zero_optimization.stage"). It also bounds
// the nesting as the parse goes. Each event costs time independent of the depth (the open
// objects' path is kept as one string with its length at each level), so a parse is linear.
class DuplicateKeys {
 public:
  explicit DuplicateKeys(std::string_view source) : source_(source) {}
  bool operator()(int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        ZL_CHECK(depth < kMaxConfigDepth,
                 "{}: objects and arrays nest deeper than {} levels: a DeepSpeed config nests a "
                 "few; give a DeepSpeed JSON config",
                 source_, kMaxConfigDepth);
        keys_.emplace_back();
        prefix_sizes_.push_back(prefix_.size());
        if (!key_.empty()) prefix_ += printable(key_) + ".";
        key_.clear();
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        keys_.pop_back();
        prefix_.resize(prefix_sizes_.back());
        prefix_sizes_.pop_back();
        break;
      case json::parse_event_t::key:
        key_ = parsed.get<std::string>();
        ZL_CHECK(keys_.back().insert(key_).second,
                 "{}: key {} appears twice in one object: keep one (JSON parsers disagree on "
                 "which wins)",
                 source_, prefix_ + printable(key_));
        break;
      case json::parse_event_t::value:
        key_.clear();
        break;
    }
    return true;
  }

 private:
  std::string source_;
  std::vector<std::set<std::string>> keys_;  // the keys seen in each open object
  std::string prefix_;                       // "a.b." for the open objects under keys a and b
  std::vector<std::size_t> prefix_sizes_;    // prefix_'s size before each open level was added
  std::string key_;                          // the last key read, until its value is read
};

}  // namespace

void Checker::guarded(const std::string& path, const json& value, const Reader& read) const {
  try {
    read(value, path);
  } catch (const Error& error) {
    problems_.emplace_back(error.what());
  }
}

void Checker::section(const json& object, const std::string& path, const Readers& readers) const {
  if (!object.is_object()) bad(path, object, "use an object");
  for (const auto& [key, value] : object.items()) {
    const std::string key_path = path_of(path, key);
    const auto reader = readers.find(key);
    if (reader == readers.end()) {
      unread_key(key_path, value, readers);
    } else if (value.is_string() && value.get<std::string>() == "auto") {
      autos_.push_back(key_path);
    } else {
      guarded(key_path, value, reader->second);
    }
  }
}

void Checker::unread_key(const std::string& path, const json& value, const Readers& readers) const {
  if (const KnownKey* known = known_key(path)) {
    if (harmless_value(*known, value)) {
      warnings_.push_back(fmt::format("{}: {} is a DeepSpeed key zerolab does not implement ({}); "
                                      "ignored",
                                      source_, path, known->instead));
    } else {
      problems_.push_back(fmt::format(
          "{}: {} is {}: zerolab does not implement it ({}) and this value would change the run: "
          "use {} or leave it out",
          source_, path, shown(value), known->instead, known->harmless));
    }
    return;
  }
  const std::size_t dot = path.rfind('.');
  const std::string parent = dot == std::string::npos ? "" : path.substr(0, dot);
  std::vector<std::string> candidates = known_keys_under(parent);
  for (const auto& [name, reader] : readers) candidates.push_back(name);
  const std::string nearest = nearest_key(path.substr(dot == std::string::npos ? 0 : dot + 1),
                                          candidates);
  warnings_.push_back(nearest.empty()
                          ? fmt::format("{}: unknown key {} ignored", source_, path)
                          : fmt::format("{}: unknown key {} ignored: did you mean {}?", source_,
                                        path, path_of(parent, nearest)));
}

std::string path_of(std::string_view parent, std::string_view key) {
  return parent.empty() ? printable(key) : fmt::format("{}.{}", parent, printable(key));
}

std::string shown(const json& value) {
  std::string text;
  render(value, text);
  return text.size() <= kShownChars ? text : text.substr(0, kShownChars - 3) + "...";
}

json parse_config(std::string_view text, std::string_view source) {
  try {
    DuplicateKeys duplicates(source);
    return json::parse(text, [&duplicates](int depth, json::parse_event_t event, json& parsed) {
      return duplicates(depth, event, parsed);
    });
  } catch (const json::exception&) {  // a parse_error, or out_of_range for a number like 1e400
    fail_malformed(text, source);
  }
}

}  // namespace zl::ds
