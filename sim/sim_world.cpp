// sim_world.cpp — SimWorld::run(): one thread per rank, a shared rendezvous, then the root cause.
#include "sim_world.hpp"

#include <fmt/format.h>

#include <exception>
#include <memory>
#include <system_error>
#include <thread>
#include <utility>

#include "core/error.hpp"
#include "rendezvous.hpp"
#include "sim_comm.hpp"
#include "sim_groups.hpp"

namespace zl {

namespace {

// Runs one rank's body and tells the rendezvous when it started (no wait's clock runs before every
// rank's thread has) and how it ended, so no other rank waits for it, in the world or in a group.
void run_rank(const std::function<void(Comm&)>& body, SimComm& comm, Rendezvous& rendezvous,
              SimGroups& groups) {
  rendezvous.mark_started(comm.rank());
  const auto failed = [&](const std::string& message, ErrorKind kind) {
    rendezvous.mark_failed(comm.rank(), message, kind);
    groups.mark_failed(comm.rank(), message, kind);
  };
  try {
    comm.timeline()->start();
    body(comm);
    rendezvous.mark_returned(comm.rank());
    groups.mark_returned(comm.rank());
  } catch (const Error& e) {
    failed(e.what(), e.kind());
  } catch (const std::exception& e) {
    failed(e.what(), ErrorKind::Runtime);
  } catch (...) {
    failed("threw an exception that is not a std::exception", ErrorKind::Runtime);
  }
}

}  // namespace

SimWorld::SimWorld(int world, SimOptions options)
    : world_(world),
      options_(std::move(options)),
      traffic_(static_cast<std::size_t>(world > 0 ? world : 0)),
      timelines_(traffic_.size()) {
  ZL_CHECK(world >= 1, "world size {} is invalid: use 1 or more ranks", world);
  ZL_CHECK(options_.timeout.count() > 0, "sim timeout of {} ms is invalid: use a positive timeout",
           options_.timeout.count());
  ZL_CHECK(options_.timeline.link.busbw_gbps > 0.0 && options_.timeline.link.alpha_us >= 0.0,
           "link {} is invalid: give a bus bandwidth > 0 GB/s and a latency >= 0 us",
           options_.timeline.link.name);
  ZL_CHECK(options_.timeline.host_link.gbps > 0.0 && options_.timeline.host_link.latency_us >= 0.0,
           "host link {} is invalid: give a bandwidth > 0 GB/s and a latency >= 0 us",
           options_.timeline.host_link.name);
  ZL_CHECK(options_.timeline.disk_link.gbps > 0.0 && options_.timeline.disk_link.latency_us >= 0.0,
           "disk link {} is invalid: give a bandwidth > 0 GB/s and a latency >= 0 us",
           options_.timeline.disk_link.name);
  ZL_CHECK(options_.timeline.compute_scale > 0.0,
           "compute scale {} is invalid: simulated compute needs a factor > 0",
           options_.timeline.compute_scale);
  ZL_CHECK(options_.gpus_per_node == kOneNode ||
               (options_.gpus_per_node >= 1 && world % options_.gpus_per_node == 0),
           "--gpus-per-node {} does not divide --world {}: pass a number of GPUs a node that "
           "divides the world",
           options_.gpus_per_node, world);
  options_.timeline.nodes.gpus_per_node = options_.gpus_per_node;
  validate_faults(options_.faults, world);
}

void SimWorld::run(const std::function<void(Comm&)>& body) {
  Rendezvous rendezvous(world_, options_.timeout, options_.gpus_per_node);
  SimGroups groups(options_.timeout);
  TimelineBoard board(world_);
  std::vector<std::unique_ptr<SimComm>> comms;
  for (int r = 0; r < world_; ++r) {
    comms.push_back(std::make_unique<SimComm>(r, world_, rendezvous, options_.faults, &board,
                                              options_.timeline, &groups));
  }
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(world_));
  for (int r = 0; r < world_; ++r) {
    try {
      threads.emplace_back(run_rank, std::cref(body), std::ref(*comms[static_cast<std::size_t>(r)]),
                           std::ref(rendezvous), std::ref(groups));
    } catch (const std::system_error& e) {
      // Ranks without a thread count as failed, so the started ones stop waiting for them.
      for (int q = r; q < world_; ++q) {
        rendezvous.mark_failed(q, fmt::format("could not start its thread: {}", e.what()));
      }
      break;
    }
  }
  for (auto& thread : threads) thread.join();
  for (int r = 0; r < world_; ++r) {
    const SimComm& comm = *comms[static_cast<std::size_t>(r)];
    traffic_[static_cast<std::size_t>(r)] = comm.traffic();
    const RankClocks& clocks = comm.timeline()->clocks();
    timelines_[static_cast<std::size_t>(r)] = {
        .rank = r, .steps = clocks.steps(), .program = clocks.program(), .events = clocks.events()};
  }
  if (auto cause = rendezvous.root_cause()) throw *cause;
  for (const auto& comm : comms) {
    if (auto unfired = comm->unfired_fault()) throw Error(*unfired);
  }
}

}  // namespace zl
