// gpt_head.cpp — the tied LM head and the loss when activations are kept in 16 bits. They run in
// chunks of Gpt::kHeadChunkRows token rows (Vp = padded_vocab() columns, the padded ones masked
// in the loss): the head's product reads ln_f's 16-bit output and writes the 16-bit logits, the
// loss reads them and writes their gradient over them in 16 bits, and the head's backward reads
// that, so the [N, Vp] logits and their gradient exist only in 16 bits (a device that computes a
// 16-bit kernel through fp32 scratch needs one chunk of it). Every value is rounded to nearest
// even once, as it is written, as autocast rounds a matrix product's output and the gradient of a
// 16-bit tensor; the loss sums the rows' losses in row order in double, the chunks one after
// another, on the device, and the host reads the total once.
#include <algorithm>

#include "model/gpt.hpp"

namespace zl {

namespace {

// Calls fn(first, rows) for each chunk of at most Gpt::kHeadChunkRows of the `token_rows` rows.
template <class Fn>
void for_each_chunk(std::int64_t token_rows, Fn fn) {
  for (std::int64_t first = 0; first < token_rows; first += Gpt::kHeadChunkRows) {
    fn(first, std::min(Gpt::kHeadChunkRows, token_rows - first));
  }
}

}  // namespace

void* Gpt::rows_of(Buffer& buffer, std::int64_t first, std::int64_t width) {
  return static_cast<char*>(buffer.data()) +
         first * width * static_cast<std::int64_t>(dtype_bytes(buffer.dtype()));
}

void Gpt::head_forward_chunked(TensorIn params) {
  const std::int64_t N = token_rows(), C = config_.n_embd, Vp = padded_vocab(config_);
  for_each_chunk(N, [&](std::int64_t first, std::int64_t rows) {
    device_.linear_forward(
        TensorIn(rows_of(lnf_, first, C), rows * C, activation_dtype_), params.first(Vp * C), {},
        TensorOut(rows_of(logits_, first, Vp), rows * Vp, activation_dtype_), rows, C, Vp);
  });
}

void Gpt::loss_sum_chunked(float grad_scale, std::span<double> loss_sum) {
  const std::int64_t N = token_rows(), Vp = padded_vocab(config_);
  const auto targets = targets_.as<std::int64_t>();
  // The chunks' sums add up on the device: the host reads at most the total.
  for_each_chunk(N, [&](std::int64_t first, std::int64_t rows) {
    const TensorOut logits(rows_of(logits_, first, Vp), rows * Vp, activation_dtype_);
    // The gradient (softmax - onehot) / N over the real vocabulary, zero in the padded columns,
    // scaled, written over the logits in 16 bits.
    device_.cross_entropy_add_forward_backward(
        logits, targets.subspan(static_cast<std::size_t>(first), static_cast<std::size_t>(rows)),
        logits, rows, config_.vocab, Vp, N, loss_sum, grad_scale);
  });
}

void Gpt::head_backward_chunked(TensorIn params, std::span<float> grads) {
  const std::int64_t N = token_rows(), C = config_.n_embd, Vp = padded_vocab(config_);
  for_each_chunk(N, [&](std::int64_t first, std::int64_t rows) {
    const TensorIn x(rows_of(lnf_, first, C), rows * C, activation_dtype_);
    const TensorIn dlogits(rows_of(logits_, first, Vp), rows * Vp, activation_dtype_);
    // d wte [Vp, C] += dlogits^T ln_f(x), chunk after chunk; d ln_f(x) rows = dlogits wte.
    device_.linear_backward(x, params.first(Vp * C), dlogits, grads.first(Vp * C), {},
                            dln_.as<float>().subspan(static_cast<std::size_t>(first * C),
                                                     static_cast<std::size_t>(rows * C)),
                            rows, C, Vp);
  });
}

}  // namespace zl
