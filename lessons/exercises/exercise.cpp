// exercise.cpp — the TODO marker, the exercises' feature check and the factory by stage.
#include "exercise.hpp"

#include <atomic>

namespace zl::exercise {

namespace {
std::atomic<bool> hints{false};
}  // namespace

void show_hints(bool show) {
  hints = show;
}

void todo(std::string_view file, int number, std::string_view idea, std::string_view call) {
  throw TodoError(hints ? fmt::format("{} TODO {} is not written yet: {}. The call: {}", file,
                                      number, idea, call)
                        : fmt::format("{} TODO {} is not written yet: {} (--hint names the call)",
                                      file, number, idea));
}

void check_exercise_features(const TrainingFeatures& features) {
  const TrainingFeatures plain{};
  ZL_CHECK(!features.overlap_comm && !features.offload_optimizer && !features.offload_param &&
               features.reduce_bucket_elems == plain.reduce_bucket_elems &&
               features.allgather_bucket_elems == plain.allgather_bucket_elems &&
               features.prefetch_bucket_elems == 0 && features.persistence_threshold_elems == 0,
           "the exercise engines train without overlap_comm, buckets, offload, prefetch and "
           "persistence: leave those settings at their defaults");
}

std::unique_ptr<Engine> make_exercise_engine(EngineKind kind, Model& model, Device& device,
                                             Comm& comm, const EngineOptions& options) {
  check_exercise_features(options.features);
  switch (kind) {
    case EngineKind::Ddp:
      return make_ddp(model, device, comm, options);
    case EngineKind::Zero1:
      return make_zero1(model, device, comm, options);
    case EngineKind::Zero2:
      return make_zero2(model, device, comm, options);
    case EngineKind::Zero3:
      return make_zero3(model, device, comm, options);
    case EngineKind::Reference:
      break;
  }
  fail("there is no exercise for the {} engine", engine_name(kind));
}

void no_checkpoints() {
  fail("the exercise engines do not save or resume checkpoints: zerolab's own engines do");
}

}  // namespace zl::exercise
