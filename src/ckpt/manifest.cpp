// manifest.cpp — manifest.json written with nlohmann::json and read back key by key, each key
// checked for presence and type, so a damaged manifest is an error naming the key, not a crash.
// Its last key, manifest_sha256, hashes the canonical JSON of all the others, so an edited value
// is caught even where it still parses and stays consistent.
#include "ckpt/manifest.hpp"

#include <fmt/format.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "ckpt/sha256.hpp"
#include "core/error.hpp"

namespace zl {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kFormatName = "zerolab-checkpoint";
constexpr std::string_view kDamaged = "the manifest is damaged: restore it or use another step";
constexpr std::string_view kChecksumKey = "manifest_sha256";

// The SHA-256 of `json`'s canonical text, what manifest_sha256 covers: compact, keys sorted, so
// neither the layout of the file nor the order of its keys matters, only the values.
std::string content_sha256(const Json& json) {
  const std::string text = nlohmann::json::parse(json.dump()).dump();
  return sha256_hex(std::as_bytes(std::span(text.data(), text.size())));
}

// A JSON value and where it sits in the manifest ("units[1].params[0].shape"), for messages.
struct Field {
  const Json& value;
  std::string key;
};

// Reads typed values out of the manifest, failing with the key's path and the file's name.
class ManifestReader {
 public:
  explicit ManifestReader(std::string_view shown) : shown_(shown) {}

  [[noreturn]] void bad(const std::string& key, std::string_view what) const {
    fail("cannot read {}: key {:?} {}: {}", shown_, key, what, kDamaged);
  }

  Field member(const Field& object, std::string_view name) const {
    if (!object.value.is_object()) bad(object.key, "is not an object");
    const std::string key =
        object.key.empty() ? std::string(name) : object.key + "." + std::string(name);
    const auto found = object.value.find(name);
    if (found == object.value.end()) bad(key, "is missing");
    return {*found, key};
  }

  // The elements of an array field.
  std::vector<Field> elements(const Field& array) const {
    if (!array.value.is_array()) bad(array.key, "is not an array");
    std::vector<Field> fields;
    for (std::size_t i = 0; i < array.value.size(); ++i) {
      fields.push_back({array.value[i], fmt::format("{}[{}]", array.key, i)});
    }
    return fields;
  }

  std::int64_t integer(const Field& field,
                       std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                       std::int64_t max = std::numeric_limits<std::int64_t>::max()) const {
    const Json& value = field.value;
    if (!value.is_number_integer()) bad(field.key, "is not an integer");
    if (value.is_number_unsigned() &&
        value.get<std::uint64_t>() > static_cast<std::uint64_t>(max)) {
      bad(field.key, fmt::format("is {}, outside [{}, {}]", value.get<std::uint64_t>(), min, max));
    }
    const std::int64_t number = value.get<std::int64_t>();
    if (number < min || number > max)
      bad(field.key, fmt::format("is {}, outside [{}, {}]", number, min, max));
    return number;
  }

  std::uint64_t unsigned_integer(const Field& field) const {
    if (!field.value.is_number_unsigned()) bad(field.key, "is not a non-negative integer");
    return field.value.get<std::uint64_t>();
  }

  double number(const Field& field) const {
    if (!field.value.is_number()) bad(field.key, "is not a number");
    return field.value.get<double>();
  }

  std::string text(const Field& field) const {
    if (!field.value.is_string()) bad(field.key, "is not a string");
    return field.value.get<std::string>();
  }

  // A shape of positive dimensions with at most kMaxUnitElems elements.
  Shape shape(const Field& field) const {
    Shape dims;
    std::int64_t count = 1;
    for (const auto& dim : elements(field)) {
      dims.push_back(integer(dim, 1, kMaxUnitElems));
      if (__builtin_mul_overflow(count, dims.back(), &count) || count > kMaxUnitElems) {
        bad(field.key, "has more elements than any model holds");
      }
    }
    return dims;
  }

 private:
  std::string_view shown_;
};

Json lr_schedule_json(const LrSchedule& s) {
  Json json = {{"kind", lr_schedule_name(s.kind)},
               {"warmup_steps", s.warmup_steps},
               {"total_steps", s.total_steps},
               {"min_lr", s.min_lr},
               {"warmup_type", s.warmup_shape == WarmupShape::Log ? "log" : "linear"},
               {"warmup_min_ratio", s.warmup_min_ratio},
               {"cos_min_ratio", s.cos_min_ratio}};
  if (s.kind == LrScheduleKind::OneCycle) {
    const OneCycleParams& p = s.one_cycle;
    json["one_cycle"] = {{"first_step_size", p.first_step_size},
                         {"second_step_size", p.second_step_size},
                         {"first_stair_count", p.first_stair_count},
                         {"second_stair_count", p.second_stair_count},
                         {"decay_step_size", p.decay_step_size},
                         {"decay_lr_rate", p.decay_lr_rate},
                         {"cycle_momentum", p.cycle_momentum},
                         {"min_mom", p.min_mom},
                         {"max_mom", p.max_mom},
                         {"decay_mom_rate", p.decay_mom_rate}};
  }
  return json;
}

LrScheduleKind lr_schedule_kind_of(const ManifestReader& read, const Field& field) {
  const std::string name = read.text(field);
  for (const LrScheduleKind kind :
       {LrScheduleKind::Constant, LrScheduleKind::Linear, LrScheduleKind::Cosine,
        LrScheduleKind::WarmupLR, LrScheduleKind::WarmupDecayLR, LrScheduleKind::WarmupCosineLR,
        LrScheduleKind::OneCycle}) {
    if (name == lr_schedule_name(kind)) return kind;
  }
  read.bad(field.key, fmt::format("names no schedule zerolab knows ({:?})", name));
}

LrSchedule parse_lr_schedule(const ManifestReader& read, const Field& json) {
  LrSchedule s;
  s.kind = lr_schedule_kind_of(read, read.member(json, "kind"));
  s.warmup_steps = read.integer(read.member(json, "warmup_steps"), 0);
  s.total_steps = read.integer(read.member(json, "total_steps"), 0);
  s.min_lr = read.number(read.member(json, "min_lr"));
  const Field shape = read.member(json, "warmup_type");
  const std::string shape_name = read.text(shape);
  if (shape_name != "log" && shape_name != "linear") read.bad(shape.key, "is not log or linear");
  s.warmup_shape = shape_name == "log" ? WarmupShape::Log : WarmupShape::Linear;
  s.warmup_min_ratio = read.number(read.member(json, "warmup_min_ratio"));
  s.cos_min_ratio = read.number(read.member(json, "cos_min_ratio"));
  if (s.kind == LrScheduleKind::OneCycle) {
    const Field cycle = read.member(json, "one_cycle");
    OneCycleParams& p = s.one_cycle;
    p.first_step_size = read.number(read.member(cycle, "first_step_size"));
    p.second_step_size = read.number(read.member(cycle, "second_step_size"));
    p.first_stair_count = read.integer(read.member(cycle, "first_stair_count"));
    p.second_stair_count = read.integer(read.member(cycle, "second_stair_count"));
    p.decay_step_size = read.number(read.member(cycle, "decay_step_size"));
    p.decay_lr_rate = read.number(read.member(cycle, "decay_lr_rate"));
    const Field momentum = read.member(cycle, "cycle_momentum");
    if (!momentum.value.is_boolean()) read.bad(momentum.key, "is not true or false");
    p.cycle_momentum = momentum.value.get<bool>();
    p.min_mom = read.number(read.member(cycle, "min_mom"));
    p.max_mom = read.number(read.member(cycle, "max_mom"));
    p.decay_mom_rate = read.number(read.member(cycle, "decay_mom_rate"));
  }
  return s;
}

// The model, the optimizer and the data position as JSON.
Json run_json(const Manifest& manifest) {
  Json json = Json::object();
  if (manifest.model_kind == "gpt") {
    json["model"] = {{"kind", manifest.model_kind},           {"n_layer", manifest.gpt.n_layer},
                     {"n_head", manifest.gpt.n_head},         {"n_embd", manifest.gpt.n_embd},
                     {"block_size", manifest.gpt.block_size}, {"vocab", manifest.gpt.vocab}};
  } else {
    json["model"] = {{"kind", manifest.model_kind},
                     {"layers", manifest.mlp.layers},
                     {"width", manifest.mlp.width},
                     {"in", manifest.mlp.in},
                     {"classes", manifest.mlp.classes}};
  }
  json["seed"] = manifest.seed;
  json["micro_batch"] = manifest.micro_batch;
  json["gradient_accumulation_steps"] = manifest.grad_accum_steps;
  json["loss_scaler"] = nullptr;
  if (manifest.loss_scaler) {
    json["loss_scaler"] = {{"scale", manifest.loss_scaler->scale},
                           {"clean_steps", manifest.loss_scaler->clean_steps},
                           {"hysteresis_left", manifest.loss_scaler->hysteresis_left}};
  }
  json["adamw"] = {{"lr", manifest.adamw.lr},
                   {"beta1", manifest.adamw.beta1},
                   {"beta2", manifest.adamw.beta2},
                   {"eps", manifest.adamw.eps},
                   {"weight_decay", manifest.adamw.weight_decay}};
  json["lr_schedule"] = lr_schedule_json(manifest.lr_schedule);
  json["data"] = {{"next_sample", next_sample(manifest)}};
  json["adam_updates"] = manifest.adam_updates;
  return json;
}

Json units_json(const std::vector<UnitLayout>& units) {
  Json json = Json::array();
  for (const auto& unit : units) {
    Json params = Json::array();
    for (const auto& param : unit.params) {
      Json entry = {
          {"name", param.name}, {"shape", param.shape}, {"offset_elems", param.offset_elems}};
      // Only a padded parameter (GPT-2's wte) says how many of its rows are padding.
      if (param.pad_rows > 0) entry["pad_rows"] = param.pad_rows;
      params.push_back(std::move(entry));
    }
    json.push_back({{"name", unit.name},
                    {"numel", unit.numel},
                    {"padded_elems", unit.padded_elems},
                    {"shard_elems", unit.shard_elems},
                    {"params", std::move(params)}});
  }
  return json;
}

std::vector<UnitLayout> parse_units(const ManifestReader& read, const Field& field) {
  std::vector<UnitLayout> units;
  for (const auto& unit_field : read.elements(field)) {
    UnitLayout unit;
    unit.name = read.text(read.member(unit_field, "name"));
    unit.numel = read.integer(read.member(unit_field, "numel"), 1);
    unit.padded_elems = read.integer(read.member(unit_field, "padded_elems"), 1);
    unit.shard_elems = read.integer(read.member(unit_field, "shard_elems"), 1);
    for (const auto& param_field : read.elements(read.member(unit_field, "params"))) {
      ParamSlot param;
      param.name = read.text(read.member(param_field, "name"));
      param.shape = read.shape(read.member(param_field, "shape"));
      param.offset_elems = read.integer(read.member(param_field, "offset_elems"), 0);
      param.numel = numel(param.shape);
      // Absent for a parameter without padded rows (and in checkpoints from before wte's).
      if (param_field.value.is_object() && param_field.value.contains("pad_rows")) {
        param.pad_rows = read.integer(read.member(param_field, "pad_rows"), 1, kMaxUnitElems);
      }
      unit.params.push_back(std::move(param));
    }
    units.push_back(std::move(unit));
  }
  return units;
}

void check_version(int format_version, std::string_view shown) {
  ZL_CHECK(format_version >= kOldestCheckpointFormatVersion &&
               format_version <= kCheckpointFormatVersion,
           "cannot read {}: format_version {} is not one this zerolab reads ({} to {}): use the "
           "zerolab that wrote it",
           shown, format_version, kOldestCheckpointFormatVersion, kCheckpointFormatVersion);
}

// Takes manifest_sha256 out of `json` and checks it against the rest (from version 2 on).
void check_and_remove_checksum(const ManifestReader& read, Json& json, std::string_view shown) {
  const Field root{json, ""};
  const std::string stored = read.text(read.member(root, kChecksumKey));
  json.erase(std::string(kChecksumKey));
  const std::string actual = content_sha256(json);
  ZL_CHECK(stored == actual,
           "cannot read {}: its content hashes to manifest_sha256 {} but it records {}: the "
           "manifest was edited or damaged: restore it or use another step",
           shown, actual, stored);
}

}  // namespace

std::string new_run_id() {
  std::random_device device;
  std::string id;
  while (id.size() < kRunIdChars) id += fmt::format("{:08x}", device());
  return id.substr(0, kRunIdChars);
}

std::string manifest_json(const Manifest& manifest) {
  Json json = Json::object();
  json["format"] = kFormatName;
  json["format_version"] = manifest.format_version;
  if (manifest.format_version >= 2) json["run_id"] = manifest.run_id;
  json["step"] = manifest.step;
  json["stage"] = manifest.stage;
  json["world"] = manifest.world;
  json.update(run_json(manifest));
  json["units"] = units_json(manifest.units);
  Json files = Json::array();
  for (const auto& file : manifest.files) {
    files.push_back({{"name", file.name}, {"bytes", file.size_bytes}, {"sha256", file.sha256}});
  }
  json["files"] = std::move(files);
  if (manifest.format_version >= 2) json[std::string(kChecksumKey)] = content_sha256(json);
  return json.dump(2) + "\n";
}

Manifest parse_manifest(std::string_view text, std::string_view shown) {
  Json json;
  try {
    json = Json::parse(text);
  } catch (const Json::parse_error& error) {
    fail("cannot read {}: JSON is malformed near byte {}: {}", shown, error.byte, kDamaged);
  }
  ZL_CHECK(json.is_object(), "cannot read {}: the manifest is not a JSON object: {}", shown,
           kDamaged);
  const ManifestReader read(shown);
  const Field root{json, ""};
  const std::string format = read.text(read.member(root, "format"));
  ZL_CHECK(format == kFormatName,
           "cannot read {}: format is {:?}, not {:?}: it is not a zerolab checkpoint manifest",
           shown, format, kFormatName);

  Manifest manifest;
  constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
  manifest.format_version =
      static_cast<int>(read.integer(read.member(root, "format_version"), 0, kIntMax));
  check_version(manifest.format_version, shown);
  if (manifest.format_version >= 2) {
    check_and_remove_checksum(read, json, shown);
    manifest.run_id = read.text(read.member(root, "run_id"));
  }
  manifest.step = read.integer(read.member(root, "step"), 0);
  manifest.stage = static_cast<int>(read.integer(read.member(root, "stage"), 0, 3));
  manifest.world = static_cast<int>(read.integer(read.member(root, "world"), 1, kIntMax));
  const Field model = read.member(root, "model");
  manifest.model_kind = read.text(read.member(model, "kind"));
  ZL_CHECK(manifest.model_kind == "mlp" || manifest.model_kind == "gpt",
           "cannot read {}: model kind {:?} is not one this zerolab reads (mlp, gpt): use the "
           "zerolab that wrote it",
           shown, manifest.model_kind);
  if (manifest.model_kind == "gpt") {
    manifest.gpt.n_layer =
        static_cast<int>(read.integer(read.member(model, "n_layer"), 1, kIntMax));
    manifest.gpt.n_head = static_cast<int>(read.integer(read.member(model, "n_head"), 1, kIntMax));
    manifest.gpt.n_embd = read.integer(read.member(model, "n_embd"), 1);
    manifest.gpt.block_size = read.integer(read.member(model, "block_size"), 1);
    manifest.gpt.vocab = read.integer(read.member(model, "vocab"), 1);
  } else {
    manifest.mlp.layers = static_cast<int>(read.integer(read.member(model, "layers"), 1, kIntMax));
    manifest.mlp.width = read.integer(read.member(model, "width"), 1);
    manifest.mlp.in = read.integer(read.member(model, "in"), 1);
    manifest.mlp.classes = read.integer(read.member(model, "classes"), 1);
  }
  manifest.seed = read.unsigned_integer(read.member(root, "seed"));
  manifest.micro_batch = read.integer(read.member(root, "micro_batch"), 1);
  manifest.grad_accum_steps = read.integer(read.member(root, "gradient_accumulation_steps"), 1);
  if (json.contains("loss_scaler") && !json["loss_scaler"].is_null()) {
    const Field scaler = read.member(root, "loss_scaler");
    manifest.loss_scaler = LossScalerState{
        .scale = read.number(read.member(scaler, "scale")),
        .clean_steps = read.integer(read.member(scaler, "clean_steps"), 0),
        .hysteresis_left =
            static_cast<int>(read.integer(read.member(scaler, "hysteresis_left"), 0, kIntMax))};
  }
  manifest.adam_updates = read.integer(read.member(root, "adam_updates"), 0, manifest.step);
  const Field adamw = read.member(root, "adamw");
  manifest.adamw.lr = read.number(read.member(adamw, "lr"));
  manifest.adamw.beta1 = read.number(read.member(adamw, "beta1"));
  manifest.adamw.beta2 = read.number(read.member(adamw, "beta2"));
  manifest.adamw.eps = read.number(read.member(adamw, "eps"));
  manifest.adamw.weight_decay = read.number(read.member(adamw, "weight_decay"));
  // Written since schedules exist; a manifest without one trained at a constant lr.
  if (json.contains("lr_schedule")) {
    manifest.lr_schedule = parse_lr_schedule(read, read.member(root, "lr_schedule"));
  }
  manifest.units = parse_units(read, read.member(root, "units"));
  for (const auto& file : read.elements(read.member(root, "files"))) {
    manifest.files.push_back({read.text(read.member(file, "name")),
                              read.unsigned_integer(read.member(file, "bytes")),
                              read.text(read.member(file, "sha256"))});
  }
  if (const auto problem = manifest_problem(manifest)) {
    fail("cannot read {}: {}: {}", shown, *problem, kDamaged);
  }
  const std::int64_t stored_next_sample =
      read.integer(read.member(read.member(root, "data"), "next_sample"), 0);
  ZL_CHECK(
      stored_next_sample == next_sample(manifest),
      "cannot read {}: data.next_sample is {} but step * gradient_accumulation_steps * world * "
      "micro_batch is {}: {}",
      shown, stored_next_sample, next_sample(manifest), kDamaged);
  return manifest;
}

}  // namespace zl
