// grader.hpp — grades one exercise engine on one training configuration, the way zerolab's own
// engines are graded: bit for bit against the unsharded reference (step by step, the whole
// parameters every rank computes with at each visit of a unit, then the step's loss, gradient norm
// and learning rate; after the last step, every rank's parameters for a next forward, then the
// final parameters and Adam moments), each rank's traffic per collective and each rank's
// model-state bytes against zerolab's engine of the same stage (whose ledgers the Ledgers tests
// hold equal to the closed forms), and the async rules GradingComm checks. A failure is told in the
// learner's terms: which stage, step, unit, element and rank, expected against got, and which phase
// of the step to look at.
#pragma once

#include <optional>
#include <string>

#include "run/train.hpp"

namespace zl::exercise {

/// How an exercise engine failed a configuration.
struct Failure {
  /// True when the run stopped at a part still to write (exercise::todo()).
  bool todo = false;
  /// One paragraph: what differs, where, expected against got, and where to look.
  std::string message;
};

/// Trains `config` (its engine a stage 0-3, the sim backend, the exercises' features) with
/// `learner` building every rank's engine, and compares it with the reference and with
/// zerolab's engine of that stage. Empty when every check passes.
std::optional<Failure> grade(const TrainConfig& config, const EngineFactory& learner);

/// `config` in one line, as a learner would set it up: stage, world, model, steps, features.
std::string describe(const TrainConfig& config);

}  // namespace zl::exercise
