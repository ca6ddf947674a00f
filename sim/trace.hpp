// trace.hpp — the ranks' timelines as a Chrome trace (the JSON Trace Event Format that Perfetto
// and chrome://tracing open): one process per rank, with a track for its steps, one for its
// compute stream (computation and waits), one for its comm stream (one event per collective,
// its bytes in the args) and one for its host copies (offload; the compute stream is blocked
// meanwhile). Times are simulated microseconds.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "timeline.hpp"

namespace zl {

/// What the trace says about the run as a whole (its "otherData").
struct TraceInfo {
  std::string engine;  ///< "zero3", ...
  int world = 1;       ///< number of ranks, one trace process each
  std::string link;    ///< link preset name (inside a node)
  int gpus_per_node = kOneNode;  ///< GPUs a node; kOneNode: one node
  std::string link_across{};     ///< link preset between nodes (one NIC)
  int nics_per_node = 0;         ///< NICs a node; 0: one per GPU
  std::string host_link{};  ///< host link preset name (prices the copies of offload)
  std::string device;  ///< device preset name ("cpu": measured)
  double compute_scale = 1.0;  ///< simulated compute ms per measured CPU ms
};

/// Track (thread) ids inside each rank's process.
inline constexpr int kStepTrack = 0;
inline constexpr int kComputeTrack = 1;
inline constexpr int kCommTrack = 2;
inline constexpr int kHostTrack = 3;
inline constexpr int kDiskTrack = 4;

/// The trace document: {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}.
/// Process id = rank. Complete ("X") events: steps named "step N" (1-based, as printed), compute
/// spans by label, waits "wait <collective>" (args: call, step, exposed_ms), collectives by name
/// (args: bytes = this rank's sent bytes, wire_bytes, buffer_bytes, elems, call, step, async,
/// issue_ms), host copies "copy to_host" / "copy to_device" and blocking swaps "disk read" /
/// "disk write" on the host track, pipelined swaps on the disk track (args: bytes, step). Ranks
/// need their events recorded (TimelineOptions::record_events).
std::string chrome_trace_json(const std::vector<TimelineRecord>& ranks, const TraceInfo& info);

/// Writes chrome_trace_json() to `path` atomically.
void write_chrome_trace(const std::filesystem::path& path, const std::vector<TimelineRecord>& ranks,
                        const TraceInfo& info);

}  // namespace zl
