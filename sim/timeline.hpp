// timeline.hpp — the simulator's clocks (docs/timeline.md). Every rank has a compute stream and
// a comm stream, each with a clock in simulated milliseconds:
//   compute  advances by the measured CPU time of the rank's thread between its Comm calls,
//            times a scale (1, or measured CPU GFLOP/s over a device preset's);
//   comm     a collective starts when every rank is ready for it,
//              start = max over ranks of max(comm clock, compute clock at issue),
//            and takes alpha + wire_bytes / busbw (links.hpp); the comm clock moves to its end;
//   waits    a blocking call, or wait() on an async one, joins the clocks:
//              compute = max(compute, end of the call);
//   copies   a copy between device and host (offload) blocks the compute stream for
//              latency + bytes / bandwidth on the host link (links.hpp), drawn on its own row;
//              a read or write of a swap file (ZeRO-Infinity's NVMe tier) does the same on the
//              disk link.
// Exposed comm is the part of those waits during which the rank's comm stream was busy (the
// rest of a wait is waiting for slower ranks); so exposed <= comm, and with blocking calls only
// exposed == comm. The same clocks replay a recorded program with other comm costs: that is how
// `--what-if-world N` predicts a larger world.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "call_desc.hpp"
#include "comm/traffic_ledger.hpp"
#include "links.hpp"

namespace zl {

/// One collective call as the timeline sees it: the same on every rank of its group but for
/// `sent_bytes`.
struct CallInfo {
  /// The rank's call number, 1-based, counted over the world's calls and its groups' (in a world
  /// that never splits, the rendezvous key)
  std::int64_t number = 0;
  CollectiveKind kind = CollectiveKind::Barrier;  ///< which collective
  std::int64_t buffer_elems = 0;  ///< whole ring buffer (ring_buffer_elems)
  std::int64_t elem_bytes = 0;    ///< bytes per element of the call's dtype (2, 4 or 8)
  std::int64_t sent_bytes = 0;  ///< this rank's ring volume (the traffic ledger's)
  std::int64_t wire_bytes = 0;  ///< the busiest rank's ring volume (links.hpp wire_bytes)
  /// Carried out inside the nodes, across them and inside again (plan_collective): set when it
  /// is priced.
  bool hierarchical = false;
  /// A group's call (Comm::split): its ranks, and the nodes they span; 0 for the world's.
  int group_ranks = 0;
  int group_nodes = 0;  ///< with group_ranks
  /// With group_ranks: the group's lowest world rank, which tells a call's groups apart (the
  /// replay starts each group's call when the last of its own ranks is ready).
  int group_leader = 0;
};

/// Where a group's calls sit (Comm::split): the nodes its ranks span and its lowest world rank;
/// `nodes` 0 for the world's calls.
struct GroupPlace {
  int nodes = 0;   ///< nodes the group's ranks span (CallInfo::group_nodes)
  int leader = 0;  ///< the group's lowest world rank (CallInfo::group_leader)
};

/// Records rank `rank`'s call `call` among `world` ranks in `ledger`, its ring volume under
/// `level`, and returns its CallInfo for the rank's timeline (`number` left 0 for the caller to
/// set): what the sim and mpi backends do after every call.
CallInfo record_call(TrafficLedger& ledger, LinkLevel level, const CallDesc& call, int rank,
                     int world, GroupPlace group = {});

/// One step of a rank's program, enough to replay its clocks with other comm costs.
struct TimelineOp {
  /// What the op does to the clocks: Compute advances the compute stream by compute_ms, Issue
  /// puts a collective on the comm stream, Wait makes the compute stream wait for an async call,
  /// Copy blocks the compute stream for a host copy (or a swap-file read or write), DiskStart puts
  /// a swap-file read or write on the disk stream while compute goes on and DiskWait makes the
  /// compute stream wait for it, BeginStep and EndStep open and close a training step.
  enum class Kind : std::uint8_t {
    Compute,
    Issue,
    Wait,
    Copy,
    DiskStart,
    DiskWait,
    BeginStep,
    EndStep
  };
  Kind kind = Kind::Compute;  ///< which of the fields below apply
  double compute_ms = 0.0;  ///< Compute: simulated duration
  std::string label{};      ///< Compute: "forward 2", "backward 0", "update", "compute"
  CallInfo call{};          ///< Issue: the call; Wait: call.number
  bool async = false;       ///< Issue: the compute stream goes on until a Wait
  std::int64_t step = -1;   ///< BeginStep: the 0-based step
  HostCopy copy = HostCopy::ToHost;  ///< Copy: which way
  std::int64_t copy_bytes = 0;       ///< Copy: bytes copied (priced by the host or disk link)
  bool disk = false;                 ///< Copy: a swap-file read or write, not a host copy
  DiskIo disk_io = DiskIo::Read;     ///< Copy with disk, DiskStart: which way
  std::int64_t disk_id = 0;          ///< DiskStart, DiskWait: the read or write (1, 2, ...)
};

/// The streams of a rank: Host is the host link and the disk, whose copies block the compute
/// stream; Disk is the disk's reads and writes that run while compute goes on (pipeline_read and
/// pipeline_write).
enum class Stream : std::uint8_t { Compute, Comm, Host, Disk };

/// One span on a stream, for the trace. Compute spans are computation (named by their label) or
/// waits ("wait all_gather"); comm spans are collectives (named as in the traffic ledger); host
/// spans are copies ("copy to_host", "copy to_device").
struct TimelineEvent {
  Stream stream = Stream::Compute;  ///< the row of the trace it is drawn on
  std::string name{};               ///< compute label, "wait all_gather", or the collective
  double start_ms = 0.0;            ///< simulated start on the stream's clock
  double dur_ms = 0.0;              ///< simulated duration, >= 0
  std::int64_t step = -1;   ///< -1 outside steps (set-up, checkpoints, the final gather)
  CallInfo call{};          ///< collectives and waits; number 0 for computation
  bool async = false;       ///< collectives: issued by an async call
  double issue_ms = 0.0;    ///< collectives: compute clock when the rank issued it
  double exposed_ms = 0.0;  ///< waits: the part during which the comm stream was busy
  std::int64_t copy_bytes = 0;  ///< copies: bytes copied
};

/// One rank's simulated times over one step (or summed over steps).
struct StepTimes {
  std::int64_t step = -1;        ///< the 0-based step; -1 for totals
  double start_ms = 0.0;         ///< compute clock when the step began
  double compute_ms = 0.0;       ///< compute-stream time spent computing
  double comm_ms = 0.0;          ///< comm-stream time of the collectives issued in the step
  double exposed_comm_ms = 0.0;  ///< compute-stream time spent waiting while comm was busy
  double copy_ms = 0.0;          ///< compute-stream time blocked by host copies (offload)
  double step_ms = 0.0;          ///< compute clock at the step's end minus at its start
};

/// The clocks of one rank: a pure state machine, driven live by SimComm and in replay().
/// Not thread-safe: one per rank.
class RankClocks {
 public:
  /// `record_program` keeps every op for replay(); `record_events` every span for the trace.
  RankClocks(bool record_program, bool record_events);

  /// Simulated time at which the compute stream is free, from the start of the run.
  double compute_clock_ms() const { return compute_ms_; }
  /// Simulated time at which the comm stream finishes its last collective.
  double comm_clock_ms() const { return comm_ms_; }
  /// When this rank could start its next collective: max(compute clock, comm clock).
  double ready_ms() const;

  /// The compute stream computes for `ms` (>= 0).
  void compute(double ms, std::string_view label);
  /// `call` runs on the comm stream from `start_ms` (>= ready_ms()) for `dur_ms`. A blocking call
  /// then joins the clocks; an async one waits for wait(call.number).
  void issue(const CallInfo& call, bool async, double start_ms, double dur_ms);
  /// The compute stream waits for async call `call_number`; throws zl::Error if it was never
  /// issued async or was already waited.
  void wait(std::int64_t call_number);
  /// A copy of `bytes` going `direction` blocks the compute stream for `dur_ms` (>= 0).
  void host_copy(HostCopy direction, std::int64_t bytes, double dur_ms);
  /// A swap-file read or write of `bytes` blocks the compute stream for `dur_ms` (>= 0); it counts
  /// as copy time.
  void disk_io(DiskIo direction, std::int64_t bytes, double dur_ms);
  /// A swap-file read or write of `bytes` starts on the disk stream, when the disk's earlier ones
  /// have ended and not before the compute clock, and takes `dur_ms` (>= 0) while compute goes
  /// on. Returns its id for disk_wait().
  std::int64_t disk_start(DiskIo direction, std::int64_t bytes, double dur_ms);
  /// The compute stream waits until read or write `id` has ended; the wait counts as copy time
  /// (the part of the disk's time compute did not hide). Throws zl::Error for an id not started
  /// or already waited.
  void disk_wait(std::int64_t id);
  /// Opens step `step` (0-based); closes an open one first.
  void begin_step(std::int64_t step);
  /// Closes the open step and returns its times (step -1 and zeros if none is open).
  StepTimes end_step();

  /// Running totals since the start: compute, comm, exposed comm and copies (step_ms is the
  /// compute clock).
  StepTimes totals() const;
  /// Times of every closed step, in order.
  const std::vector<StepTimes>& steps() const { return steps_; }
  /// Every op so far, in order; empty unless constructed with `record_program`.
  const std::vector<TimelineOp>& program() const { return program_; }
  /// Every span so far, in order; empty unless constructed with `record_events`.
  const std::vector<TimelineEvent>& events() const { return events_; }

 private:
  struct Busy {
    double start_ms, end_ms, dur_ms;
  };
  struct Pending {
    CallInfo call;
    double end_ms;
  };
  void join(const CallInfo& call, double end_ms);
  void push(TimelineOp op);
  // Blocks the compute stream for `dur_ms` of a copy named `name`, drawn on the host row.
  void block_for_copy(std::string name, std::int64_t bytes, double dur_ms);

  bool record_program_, record_events_;
  double compute_ms_ = 0.0, comm_ms_ = 0.0;
  double compute_total_ms_ = 0.0, comm_total_ms_ = 0.0, exposed_total_ms_ = 0.0;
  double copy_total_ms_ = 0.0;
  std::vector<Busy> busy_;      // comm spans, in order; those before first_busy_ are behind
  std::size_t first_busy_ = 0;  // the compute clock for good
  std::map<std::int64_t, Pending> pending_;  // async calls not yet waited
  double disk_ms_ = 0.0;                     // the disk stream's clock
  std::int64_t disk_started_ = 0;            // disk_start() calls so far
  std::map<std::int64_t, double> disk_pending_;  // disk reads and writes not yet waited: end
  std::int64_t step_ = -1;
  StepTimes step_start_;  // totals when the open step began
  std::vector<StepTimes> steps_;
  std::vector<TimelineOp> program_;
  std::vector<TimelineEvent> events_;
};

/// One rank's timeline after a run.
struct TimelineRecord {
  int rank = 0;                       ///< the rank these times belong to
  std::vector<StepTimes> steps;       ///< every step's times
  std::vector<TimelineOp> program;    ///< with TimelineOptions::record_program
  std::vector<TimelineEvent> events;  ///< with TimelineOptions::record_events
  /// The steps summed (step -1; step_ms is the sum of step times).
  StepTimes totals() const;
};

/// Replays the ranks' programs (the same call sequence on every rank) with comm costs from `link`
/// among `world` ranks on `nodes` (plan_collective over each call's kind and buffer; a group's
/// call, plan_group_collective over its ranks and nodes), host copies priced on `host_link` and
/// swap-file reads and writes on `disk_link`: the same clocks as a live run, so programs recorded
/// at W and replayed with W's costs give the recorded times. A call starts when the last rank of
/// its group (group_leader tells them apart; the world's calls, of all ranks) is ready. Throws
/// zl::Error if the programs' call numbers or kinds disagree.
std::vector<TimelineRecord> replay(const std::vector<std::vector<TimelineOp>>& programs,
                                   const LinkPreset& link, const HostLinkPreset& host_link,
                                   const DiskLinkPreset& disk_link, int world,
                                   bool record_events = false, const NodeLinks& nodes = {});

/// How a simulated world keeps its timeline.
struct TimelineOptions {
  /// Prices every collective (alpha-beta) inside a node; the default is kDefaultLink.
  LinkPreset link = link_preset(kDefaultLink);
  /// The world's nodes and the links between them (plan_collective); SimWorld sets its
  /// gpus_per_node from SimOptions::gpus_per_node. The default: one node.
  NodeLinks nodes{};
  /// Prices every host copy (offload); the default is kDefaultHostLink.
  HostLinkPreset host_link = host_link_preset(kDefaultHostLink);
  /// Prices every swap-file read and write (the NVMe tier); the default is kDefaultDiskLink.
  DiskLinkPreset disk_link = disk_link_preset(kDefaultDiskLink);
  /// Simulated compute ms per measured CPU ms (1: CPU time as measured).
  double compute_scale = 1.0;
  bool record_program = false;  ///< keep the ops, for replay() (what-if)
  bool record_events = false;   ///< keep the spans, for the Chrome trace
};

/// Where the ranks of one run leave their ready times, so each can start a collective at the
/// latest of them. Thread-safe; one per SimWorld::run().
class TimelineBoard {
 public:
  /// A board for `world` ranks: each call's entry is freed once all of them have read it.
  explicit TimelineBoard(int world) : world_(world) {}
  /// Rank's ready time for call `call_number`; publish before posting the call.
  void publish(std::int64_t call_number, double ready_ms);
  /// The latest ready time of call `call_number` over all ranks; call after the call completed
  /// at the rendezvous (then every rank has published). The last of the W readers frees it.
  double start_ms(std::int64_t call_number);

 private:
  struct Entry {
    double latest_ms = 0.0;
    int published = 0;
    int read = 0;
  };
  const int world_;
  std::mutex mutex_;
  std::map<std::int64_t, Entry> entries_;
};

/// CPU time the calling thread has used, in ms (CLOCK_THREAD_CPUTIME_ID): what a rank computed,
/// whatever the other ranks' threads did meanwhile on the shared cores.
double thread_cpu_ms();

/// A rank's live timeline: its clocks, fed with the measured CPU time of its thread. Every call
/// but the constructor must come from the rank's own thread.
class RankTimeline {
 public:
  /// A timeline for one rank of `world`; `options` sets the link, the compute scale and what is
  /// recorded. Measuring starts at start().
  RankTimeline(int world, TimelineOptions options);

  /// Starts measuring (at the start of the rank's thread).
  void start();
  /// Ends the compute span running since the last mark as `label`.
  void mark(std::string_view label);
  /// Drops the CPU time since the last mark: work that is not the training's (an observer's).
  void discard();
  /// Drops the CPU time since the last mark (set-up, checkpoint files: not a step's work) and
  /// opens step `step`.
  void begin_step(std::int64_t step);
  /// Ends the compute span ("compute"), closes the step and returns its times.
  StepTimes end_step();

  /// Before posting a collective: ends the compute span and returns the rank's ready time.
  double before_call();
  /// After the collective completed at the rendezvous, which started at `start_ms`: puts it on
  /// the comm stream and restarts the CPU-time mark (the rendezvous is not computation).
  void after_call(CallInfo call, bool async, double start_ms);
  /// wait() on an async call: ends the compute span, then joins the clocks.
  void wait(std::int64_t call_number);
  /// A host copy of `bytes` going `direction`, made just now: cuts the compute span running since
  /// the last mark and blocks the compute stream for the copy's time on the host link. The cut
  /// pieces take the name of the span they belong to, given by the next mark.
  void host_copy(HostCopy direction, std::int64_t bytes);
  /// A swap-file read or write of `bytes`, made just now: as host_copy, priced on the disk link.
  void disk_io(DiskIo direction, std::int64_t bytes);
  /// A swap-file read or write of `bytes` started just now, going on while the rank computes:
  /// RankClocks::disk_start, priced on the disk link. Returns its id.
  std::int64_t disk_start(DiskIo direction, std::int64_t bytes);
  /// The rank waits for read or write `id` now: RankClocks::disk_wait.
  void disk_wait(std::int64_t id);

  /// The clocks so far: steps, totals, and the program and events when recorded.
  const RankClocks& clocks() const { return clocks_; }
  /// The options the timeline was made with.
  const TimelineOptions& options() const { return options_; }

 private:
  // A piece of the running compute span, cut by the copy (or swap-file read or write) after it.
  struct CutCopy {
    double compute_ms;
    HostCopy direction;
    std::int64_t bytes;
    bool disk = false;
    DiskIo disk_io = DiskIo::Read;
    enum class Disk : std::uint8_t { Blocking, Start, Wait } disk_kind = Disk::Blocking;
    std::int64_t disk_id = 0;  // Start, Wait: the clocks' id (they number starts in this order)
  };
  // Cuts the computation since the last mark there, with `cut` after it.
  void cut(CutCopy cut);
  // Puts the pieces cut since the last mark on the clocks, named `label`, each with its copy.
  void flush_cuts(std::string_view label);

  int world_;
  TimelineOptions options_;
  RankClocks clocks_;
  std::int64_t disk_started_ = 0;  // disk_start() calls so far: the clocks' ids
  double mark_cpu_ms_ = 0.0;
  std::vector<CutCopy> cuts_;  // since the last mark
};

}  // namespace zl
