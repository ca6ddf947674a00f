// micro_batch.cpp — the visit loop of one micro-batch.
#include "engines/micro_batch.hpp"

#include "engines/unit_buffers.hpp"

namespace zl {

namespace {

// The first `numel` of a visit's parameters, as the model reads them: in the training dtype.
TensorIn model_params(const UnitParams& params, std::int64_t numel) {
  return tensor_of(params.view).first(numel);
}

}  // namespace

void run_micro_batch(Model& model, const Batch& batch, const std::vector<UnitLayout>& layout,
                     DType precision, float grad_scale, const MicroBatchHooks& hooks,
                     const EngineOptions& options, Device& device, std::span<float> loss_sum) {
  const std::vector<int> order = model.forward_order();
  const auto units = static_cast<int>(layout.size());
  for (const int u : order) {
    ZL_CHECK(u >= 0 && u < units, "the model's forward order names unit {} of {}", u, units);
  }
  model.begin(batch);
  for (const int u : order) {
    const UnitParams params = hooks.params(u, /*backward=*/false);
    model.forward_unit(u, model_params(params, layout[u].numel));
    notify(options, device, "forward", u);
  }
  model.add_loss(grad_scale, loss_sum);

  // Backward visits the order reversed; a unit's gradient is complete at its last visit there,
  // which is its first position in the forward order.
  std::vector<std::ptrdiff_t> first_visit(layout.size(), -1);
  for (std::size_t i = order.size(); i-- > 0;)
    first_visit[order[i]] = static_cast<std::ptrdiff_t>(i);
  std::vector<Buffer> temp(layout.size());
  std::vector<std::span<float>> grad(layout.size());
  for (auto i = static_cast<std::ptrdiff_t>(order.size()) - 1; i >= 0; --i) {
    const int u = order[static_cast<std::size_t>(i)];
    const auto numel = static_cast<std::size_t>(layout[u].numel);
    if (grad[u].empty()) {  // the unit's first backward visit: its fp32 gradient starts at 0
      if (precision == DType::F32 && hooks.grad_buffer) {
        const TypedSpan own = hooks.grad_buffer(u);
        device.fill_zero(own.data, static_cast<std::size_t>(own.bytes()));
        grad[u] =
            std::span<float>(static_cast<float*>(own.data), static_cast<std::size_t>(own.elems));
      } else {
        temp[u] = device.alloc(MemCategory::Grads, DType::F32, {layout[u].padded_elems});
        grad[u] = temp[u].as<float>();
      }
    }
    {
      const UnitParams params = hooks.params(u, /*backward=*/true);
      model.backward_unit(u, model_params(params, layout[u].numel), grad[u].first(numel));
      notify(options, device, "backward", u);
    }                                   // the visit's parameters are released here
    if (first_visit[u] != i) continue;  // the unit runs again further down: not complete yet
    if (precision == DType::F32) {
      hooks.grad_ready(u, {grad[u].data(), layout[u].padded_elems, DType::F32});
      temp[u] = Buffer();
      continue;
    }
    Buffer rounded;  // a temporary, unless the engine gave its own buffer
    TypedSpan target;
    if (hooks.grad_buffer) {
      target = hooks.grad_buffer(u);
    } else {
      rounded = device.alloc_unset(MemCategory::Grads, precision, {layout[u].padded_elems});
      target = view_of(rounded);
    }
    round_into(device, grad[u], target);
    temp[u] = Buffer();  // the fp32 gradient goes before the engine reduces the rounded one
    hooks.grad_ready(u, target);
  }
}

}  // namespace zl
