// recording_device.hpp — a CPU device that also writes down, while asked to, the name of each
// call that queues work on a GPU (kernels, copies, fills, conversions): what a test compares to
// hold two engines to the same sequence of device work.
#pragma once

#include <string>
#include <vector>

#include "ops/cpu/cpu_device.hpp"

namespace zl::test {

/// CpuDevice, each call of its work also noted in calls() while recording() is set.
class RecordingDevice final : public CpuDevice {
 public:
  /// Notes calls from now on (true) or not (false).
  void set_recording(bool on) { recording_ = on; }
  /// The calls noted, oldest first: each its name in ops/device.hpp, without the "do_".
  const std::vector<std::string>& calls() const { return calls_; }

  // ---- each call noted, then CpuDevice's; a zeroed allocation is a fill on a GPU ----
  void* allocate(std::size_t bytes) override {
    record("allocate_zeroed", bytes);
    return CpuDevice::allocate(bytes);
  }
  void copy_from_host(void* device, const void* host, std::size_t bytes) override {
    record("copy_from_host", bytes);
    CpuDevice::copy_from_host(device, host, bytes);
  }
  void copy_to_host(void* host, const void* device, std::size_t bytes) override {
    record("copy_to_host", bytes);
    CpuDevice::copy_to_host(host, device, bytes);
  }
  void copy(void* to, const void* from, std::size_t bytes) override {
    record(to == from ? "copy_in_place" : "copy", bytes);
    CpuDevice::copy(to, from, bytes);
  }
  void fill_zero(void* device, std::size_t bytes) override {
    record("fill_zero", bytes);
    CpuDevice::fill_zero(device, bytes);
  }
  void convert(const void* in, DType in_dtype, void* out, DType out_dtype,
               std::int64_t elems) override {
    record("convert");
    CpuDevice::convert(in, in_dtype, out, out_dtype, elems);
  }
  void add(void* acc, const void* addend, DType dtype, std::int64_t elems) override {
    record("add");
    CpuDevice::add(acc, addend, dtype, elems);
  }
  void scale(std::span<float> x, float factor) override {
    record("scale");
    CpuDevice::scale(x, factor);
  }
  void round_to(std::span<float> x, DType dtype) override {
    record("round_to");
    CpuDevice::round_to(x, dtype);
  }
  void divide(std::span<float> x, float divisor) override {
    record("divide");
    CpuDevice::divide(x, divisor);
  }
  void block_sumsq(std::span<const float> grads, std::span<double> partials) override {
    record("block_sumsq");
    CpuDevice::block_sumsq(grads, partials);
  }
  void adamw_update(std::span<float> params, std::span<const float> grads, std::span<float> exp_avg,
                    std::span<float> exp_avg_sq, const AdamWScalars& scalars) override {
    record("adamw_update");
    CpuDevice::adamw_update(params, grads, exp_avg, exp_avg_sq, scalars);
  }
  void do_block_sumsq_unscaled(TensorIn grads, float divisor, std::span<double> partials) override {
    record("block_sumsq_unscaled");
    CpuDevice::do_block_sumsq_unscaled(grads, divisor, partials);
  }
  void do_tree_cover_sums(std::span<const double> leaves, std::int64_t first_leaf,
                          std::span<double> sums) override {
    record("tree_cover_sums");
    CpuDevice::do_tree_cover_sums(leaves, first_leaf, sums);
  }
  void do_adamw_update_unscaled(std::span<float> master, TensorIn grads, float divisor, float clip,
                                std::span<float> exp_avg, std::span<float> exp_avg_sq,
                                const AdamWScalars& scalars, void* rounded,
                                DType rounded_dtype) override {
    record("adamw_update_unscaled");
    CpuDevice::do_adamw_update_unscaled(master, grads, divisor, clip, exp_avg, exp_avg_sq, scalars,
                                        rounded, rounded_dtype);
  }
  void do_linear_forward(std::span<const float> x, std::span<const float> w,
                         std::span<const float> b, std::span<float> y, std::int64_t rows,
                         std::int64_t in, std::int64_t out) override {
    record("linear_forward");
    CpuDevice::do_linear_forward(x, w, b, y, rows, in, out);
  }
  void do_linear_backward(std::span<const float> x, std::span<const float> w,
                          std::span<const float> dy, std::span<float> dw, std::span<float> db,
                          std::span<float> dx, std::int64_t rows, std::int64_t in,
                          std::int64_t out) override {
    record("linear_backward");
    CpuDevice::do_linear_backward(x, w, dy, dw, db, dx, rows, in, out);
  }
  void do_gelu_forward(std::span<const float> x, std::span<float> y) override {
    record("gelu_forward");
    CpuDevice::do_gelu_forward(x, y);
  }
  void do_gelu_backward(std::span<const float> x, std::span<const float> dy,
                        std::span<float> dx) override {
    record("gelu_backward");
    CpuDevice::do_gelu_backward(x, dy, dx);
  }
  double do_cross_entropy_forward_backward(std::span<const float> logits,
                                           std::span<const std::int64_t> labels,
                                           std::span<float> dlogits, std::int64_t rows,
                                           std::int64_t classes, std::int64_t padded_classes,
                                           std::int64_t mean_rows) override {
    record("cross_entropy_forward_backward");
    return CpuDevice::do_cross_entropy_forward_backward(logits, labels, dlogits, rows, classes,
                                                        padded_classes, mean_rows);
  }
  void do_add_mean_loss(std::span<const double> loss_sum, std::int64_t rows,
                        std::span<float> total) override {
    record("add_mean_loss");
    CpuDevice::do_add_mean_loss(loss_sum, rows, total);
  }
  void do_cross_entropy_add_forward_backward(std::span<const float> logits,
                                             std::span<const std::int64_t> labels,
                                             std::span<float> dlogits, std::int64_t rows,
                                             std::int64_t classes, std::int64_t padded_classes,
                                             std::int64_t mean_rows,
                                             std::span<double> loss_sum) override {
    record("cross_entropy_add_forward_backward");
    CpuDevice::do_cross_entropy_add_forward_backward(logits, labels, dlogits, rows, classes,
                                                     padded_classes, mean_rows, loss_sum);
  }
  void do_embedding_forward(std::span<const std::int64_t> tokens, std::span<const float> wte,
                            std::span<const float> wpe, std::span<float> x, std::int64_t batch,
                            std::int64_t seq_len, std::int64_t channels,
                            std::int64_t vocab) override {
    record("embedding_forward");
    CpuDevice::do_embedding_forward(tokens, wte, wpe, x, batch, seq_len, channels, vocab);
  }
  void do_embedding_backward(std::span<const std::int64_t> tokens, std::span<const float> dx,
                             std::span<float> dwte, std::span<float> dwpe, std::int64_t batch,
                             std::int64_t seq_len, std::int64_t channels,
                             std::int64_t vocab) override {
    record("embedding_backward");
    CpuDevice::do_embedding_backward(tokens, dx, dwte, dwpe, batch, seq_len, channels, vocab);
  }
  void do_layernorm_forward(std::span<const float> x, std::span<const float> weight,
                            std::span<const float> bias, std::span<float> y, std::span<float> mean,
                            std::span<float> rstd, std::int64_t rows,
                            std::int64_t channels) override {
    record("layernorm_forward");
    CpuDevice::do_layernorm_forward(x, weight, bias, y, mean, rstd, rows, channels);
  }
  void do_layernorm_backward(std::span<const float> x, std::span<const float> weight,
                             std::span<const float> mean, std::span<const float> rstd,
                             std::span<const float> dy, std::span<float> dx,
                             std::span<float> dweight, std::span<float> dbias, std::int64_t rows,
                             std::int64_t channels) override {
    record("layernorm_backward");
    CpuDevice::do_layernorm_backward(x, weight, mean, rstd, dy, dx, dweight, dbias, rows, channels);
  }
  void do_conv1d_forward(std::span<const float> x, std::span<const float> w,
                         std::span<const float> b, std::span<float> y, std::int64_t rows,
                         std::int64_t in, std::int64_t out) override {
    record("conv1d_forward");
    CpuDevice::do_conv1d_forward(x, w, b, y, rows, in, out);
  }
  void do_conv1d_backward(std::span<const float> x, std::span<const float> w,
                          std::span<const float> dy, std::span<float> dw, std::span<float> db,
                          std::span<float> dx, std::int64_t rows, std::int64_t in,
                          std::int64_t out) override {
    record("conv1d_backward");
    CpuDevice::do_conv1d_backward(x, w, dy, dw, db, dx, rows, in, out);
  }
  void do_gelu_tanh_forward(std::span<const float> x, std::span<float> y) override {
    record("gelu_tanh_forward");
    CpuDevice::do_gelu_tanh_forward(x, y);
  }
  void do_gelu_tanh_backward(std::span<const float> x, std::span<const float> dy,
                             std::span<float> dx) override {
    record("gelu_tanh_backward");
    CpuDevice::do_gelu_tanh_backward(x, dy, dx);
  }
  void do_attention_forward(std::span<const float> qkv, std::span<float> stats,
                            std::span<float> out, std::int64_t batch, std::int64_t seq_len,
                            std::int64_t channels, std::int64_t heads) override {
    record("attention_forward");
    CpuDevice::do_attention_forward(qkv, stats, out, batch, seq_len, channels, heads);
  }
  void do_attention_backward(std::span<const float> qkv, std::span<const float> stats,
                             std::span<const float> out, std::span<const float> dout,
                             std::span<float> dqkv, std::int64_t batch, std::int64_t seq_len,
                             std::int64_t channels, std::int64_t heads) override {
    record("attention_backward");
    CpuDevice::do_attention_backward(qkv, stats, out, dout, dqkv, batch, seq_len, channels, heads);
  }

 private:
  void record(const char* name, std::size_t bytes = 0) {
    if (!recording_) return;
    calls_.emplace_back(bytes == 0 ? std::string(name)
                                   : std::string(name) + " " + std::to_string(bytes));
  }
  bool recording_ = false;
  std::vector<std::string> calls_;
};

}  // namespace zl::test
