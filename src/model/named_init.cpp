// named_init.cpp — checks named tensors against the model's parameters and copies them at init.
#include "model/named_init.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.hpp"

namespace zl {

namespace {

// Hugging Face GPT-2's LM head: with tie_word_embeddings, the same values as wte.weight.
constexpr std::string_view kHeadName = "lm_head.weight";

// Tensors of a Hugging Face GPT-2 file that are not parameters here: the tied LM head (checked
// against wte.weight) and the causal-mask buffers of older checkpoints.
bool hugging_face_extra(const std::string& name) {
  return name == kHeadName || name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
}

// The file `tensor` was read from, or the model's source when it was not recorded.
const std::string& file_of(const NamedTensor& tensor, const std::string& source) {
  return tensor.file.empty() ? source : tensor.file;
}

// The flags that set a parameter's shape, for the message when a file's shape differs.
std::string_view size_flags(const std::string& param) {
  return param.starts_with("layers.") ? "--layers, --width, --in, --classes"
                                      : "--n-layer, --n-head, --n-embd, --block-size, --vocab";
}

}  // namespace

NamedInitModel::NamedInitModel(Model& model, const NamedTensors& tensors, const std::string& source)
    : model_(model), tensors_(tensors) {
  std::set<std::string> used;
  for (const auto& unit : model_.units()) {
    for (const auto& param : unit.params) {
      const auto* found = find(param.name);
      ZL_CHECK(found != nullptr,
               "{} has no tensor {}: give a file of this model (zerolab consolidate writes one)",
               source, param.name);
      ZL_CHECK(found->second.shape == param.real_shape(),
               "{}: {} has shape {} but the model needs {}: check {}",
               file_of(found->second, source), param.name, shape_string(found->second.shape),
               shape_string(param.real_shape()), size_flags(param.name));
      const auto& values = found->second.values;
      const auto bad = std::ranges::find_if(values, [](float v) { return !std::isfinite(v); });
      ZL_CHECK(bad == values.end(),
               "{}: {} element {} is {}: initial parameters must be finite: give a file without "
               "NaN or infinite values",
               file_of(found->second, source), found->first, bad - values.begin(), *bad);
      used.insert(found->first);
    }
  }
  for (const auto& [name, tensor] : tensors_) {
    ZL_CHECK(used.contains(name) || name.ends_with(".exp_avg") || name.ends_with(".exp_avg_sq") ||
                 hugging_face_extra(name),
             "{}: tensor {} is not a parameter of this model: give a file of this model",
             file_of(tensor, source), name);
  }
  // An lm_head.weight unlike wte.weight belongs to an untied model, whichever the config says;
  // transformers' versions disagree on which of the two a tied model then uses.
  const auto head = tensors_.find(std::string(kHeadName));
  const auto* wte = find("wte.weight");
  if (head == tensors_.end() || wte == nullptr) return;
  ZL_CHECK(head->second.shape == wte->second.shape && head->second.values == wte->second.values,
           "{}: {} differs from {}, but zerolab's GPT ties the head to wte: give weights without "
           "{} or with it equal to {}",
           file_of(head->second, source), kHeadName, wte->first, kHeadName, wte->first);
}

const std::pair<const std::string, NamedTensor>* NamedInitModel::find(
    const std::string& name) const {
  auto found = tensors_.find(name);
  if (found == tensors_.end()) found = tensors_.find("transformer." + name);
  return found == tensors_.end() ? nullptr : &*found;
}

void NamedInitModel::init_unit(int unit, std::span<float> flat, std::uint64_t) const {
  auto out = flat.begin();
  for (const auto& param : model_.units().at(static_cast<std::size_t>(unit)).params) {
    const auto& values = find(param.name)->second.values;
    out = std::copy(values.begin(), values.end(), out);
    // The file holds the real rows; the padded rows after them (wte's) start at zero.
    const auto padding =
        static_cast<std::ptrdiff_t>(numel(param.shape) - numel(param.real_shape()));
    out = std::fill_n(out, padding, 0.0f);
  }
}

}  // namespace zl
