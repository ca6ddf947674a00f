// run_fingerprint.hpp — what each rank of a process backend believes the run is, field by field
// (model, sizes, engine, world, precision, optimizer and schedule, seed, data, features, and on
// nccl whether ZL_COLLECTIVE_CHECKS is on), so a job whose processes were started with different
// flags or settings fails before its first step, naming the first field that differs and which
// ranks hold which value, instead of hanging or training a wrong result. Rank 0 settles the
// comparison and the run id for every process.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "run/run_plan.hpp"

namespace zl {

/// One field of a run as a rank sees it: its flag-like name and its value in words.
using FingerprintField = std::pair<std::string, std::string>;

/// The fields of `plan`, in a fixed order, that every rank must agree on; on the nccl backend the
/// last is ZL_COLLECTIVE_CHECKS (collective_checks_setting()).
std::vector<FingerprintField> run_fingerprint(const RunPlan& plan);

/// The fields as one text, a "name=value" line each, to send to another rank.
std::string encode_fingerprint(const std::vector<FingerprintField>& fields);

/// Each rank's encoded fingerprint (index = rank) compared with the others: nothing when all are
/// equal, else one line naming the first field that differs and the ranks of each value, e.g.
/// "the ranks disagree on --lr: rank 0 has 0.001, rank 1 has 0.02: start every rank with the
/// same flags".
std::optional<std::string> fingerprint_mismatch(const std::vector<std::string>& per_rank);

/// What rank 0 settles for every process of a run before the first step, as one text to send to
/// them all: the run id every rank takes (rank 0's `run_id`), and fingerprint_mismatch() over
/// every rank's encoded fingerprint (index = rank).
std::string settle_run(const std::vector<std::string>& fingerprints, const std::string& run_id);

/// The run id in settle_run's text. Throws zl::Error with the mismatch line when the ranks
/// disagree.
std::string agreed_run_id(const std::string& settled);

}  // namespace zl
