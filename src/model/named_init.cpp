// named_init.cpp — checks named tensors against the model's parameters and copies them at init.
#include "model/named_init.hpp"

#include <algorithm>
#include <set>

#include "core/error.hpp"

namespace zl {

NamedInitModel::NamedInitModel(Model& model, const NamedTensors& tensors, const std::string& source)
    : model_(model), tensors_(tensors) {
  std::set<std::string> used;
  for (const auto& unit : model_.units()) {
    for (const auto& param : unit.params) {
      const auto found = tensors_.find(param.name);
      ZL_CHECK(found != tensors_.end(),
               "{} has no tensor {}: give a file of this model (zerolab consolidate writes one)",
               source, param.name);
      ZL_CHECK(
          found->second.shape == param.shape,
          "{}: {} has shape {} but the model needs {}: check --layers, --width, --in, --classes",
          source, param.name, shape_string(found->second.shape), shape_string(param.shape));
      used.insert(param.name);
    }
  }
  for (const auto& [name, tensor] : tensors_) {
    ZL_CHECK(used.contains(name) || name.ends_with(".exp_avg") || name.ends_with(".exp_avg_sq"),
             "{}: tensor {} is not a parameter of this model: give a file of this model", source,
             name);
  }
}

void NamedInitModel::init_unit(int unit, std::span<float> flat, std::uint64_t) const {
  auto out = flat.begin();
  for (const auto& param : model_.units().at(static_cast<std::size_t>(unit)).params) {
    const auto& values = tensors_.at(param.name).values;
    out = std::copy(values.begin(), values.end(), out);
  }
}

}  // namespace zl
