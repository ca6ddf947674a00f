// rank_reports.hpp — what the processes of an `mpi` run send to rank 0's process, which prints and
// writes the run's reports: each rank's ledgers and step times (RankReport and its timeline's
// steps) and each rank's part of a checkpoint save (its file entry, or why it could not write
// it), as plain bytes and back. On the sim backend the ranks share one process and need none of
// this.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ckpt/manifest.hpp"
#include "run/train.hpp"

namespace zl {

/// One rank's ledgers and the times of its steps, as sent to rank 0.
struct RankTotals {
  RankReport report;             ///< the rank's memory and traffic ledgers
  std::vector<StepTimes> steps;  ///< its timeline's steps
};

/// `totals` as bytes (native byte order: the processes of one run share a machine type).
std::string encode_rank_totals(const RankTotals& totals);

/// The RankTotals that encode_rank_totals() wrote into `bytes`. The memory ledger is rebuilt with
/// the same current and peak bytes per category, the same total in use, the same total, device and
/// host peaks, and the same activation bytes by kind, now and at their peak. Throws zl::Error if
/// `bytes` is not such an encoding.
RankTotals decode_rank_totals(std::string_view bytes);

/// A rank's part of a checkpoint save: the file it wrote, or why it could not write it.
struct RankFile {
  FileEntry entry{};    ///< the file written (when `error` is empty)
  std::string error{};  ///< why the rank could not write its file, in one line; empty if it did

  /// Same entry and error.
  bool operator==(const RankFile&) const = default;
};

/// `file` as bytes.
std::string encode_rank_file(const RankFile& file);

/// The RankFile that encode_rank_file() wrote into `bytes`; throws zl::Error if it is not one.
RankFile decode_rank_file(std::string_view bytes);

}  // namespace zl
