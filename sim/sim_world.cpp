// sim_world.cpp — SimWorld::run(): one thread per rank, a shared rendezvous, then the root cause.
#include "sim_world.hpp"

#include <fmt/format.h>

#include <exception>
#include <memory>
#include <system_error>
#include <thread>

#include "core/error.hpp"
#include "rendezvous.hpp"
#include "sim_comm.hpp"

namespace zl {

namespace {

// Runs one rank's body and tells the rendezvous how it ended, so no other rank waits for it.
void run_rank(const std::function<void(Comm&)>& body, SimComm& comm, Rendezvous& rendezvous) {
  try {
    body(comm);
    rendezvous.mark_returned(comm.rank());
  } catch (const std::exception& e) {
    rendezvous.mark_failed(comm.rank(), e.what());
  } catch (...) {
    rendezvous.mark_failed(comm.rank(), "threw an exception that is not a std::exception");
  }
}

}  // namespace

SimWorld::SimWorld(int world, SimOptions options)
    : world_(world), options_(options), traffic_(static_cast<std::size_t>(world > 0 ? world : 0)) {
  ZL_CHECK(world >= 1, "world size {} is invalid: use 1 or more ranks", world);
  ZL_CHECK(options.timeout.count() > 0, "sim timeout of {} ms is invalid: use a positive timeout",
           options.timeout.count());
  validate_faults(options.faults, world);
}

void SimWorld::run(const std::function<void(Comm&)>& body) {
  Rendezvous rendezvous(world_, options_.timeout);
  std::vector<std::unique_ptr<SimComm>> comms;
  for (int r = 0; r < world_; ++r) {
    comms.push_back(std::make_unique<SimComm>(r, world_, rendezvous, options_.faults));
  }
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(world_));
  for (int r = 0; r < world_; ++r) {
    try {
      threads.emplace_back(run_rank, std::cref(body), std::ref(*comms[static_cast<std::size_t>(r)]),
                           std::ref(rendezvous));
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
    traffic_[static_cast<std::size_t>(r)] = comms[static_cast<std::size_t>(r)]->traffic();
  }
  if (auto cause = rendezvous.root_cause()) throw Error(*cause);
  for (const auto& comm : comms) {
    if (auto unfired = comm->unfired_fault()) throw Error(*unfired);
  }
}

}  // namespace zl
