// fault_injection_test.cpp — injected faults in the simulator: the spec parser and its one-line
// errors; a rank that throws, skips or arrives late at a chosen call ends the run within the
// timeout with an error naming the rank, the collective and its number; and after every failure
// the process has no more threads than before the run.
#include <gtest/gtest.h>

#include <thread>

#include "sim_test_support.hpp"
#include "support/fault_timing.hpp"

namespace zl::simtest {
namespace {

// Four ranks, each making `steps` rounds of all_reduce, reduce_scatter, all_gather, broadcast and
// barrier: collective k of each kind is call 5 (k - 1) + 1 + position of the kind. With
// `all_to_all` each round ends with one too, and the rounds are six calls long.
void five_kinds(Comm& comm, int steps = 3, bool all_to_all = false) {
  std::vector<float> full(8, 1.0f);
  std::vector<float> block(2);
  for (int i = 0; i < steps; ++i) {
    comm.all_reduce(full.data(), full.size(), DType::F32, ReduceOp::Sum);
    comm.reduce_scatter(full.data(), block.data(), block.size(), DType::F32, ReduceOp::Avg);
    comm.all_gather(block.data(), full.data(), block.size(), DType::F32);
    comm.broadcast(full.data(), full.size(), DType::F32, 0);
    comm.barrier();
    if (all_to_all) {
      std::vector<float> received(full.size());
      comm.all_to_all(full.data(), received.data(), block.size(), DType::F32);
    }
  }
}

// Runs five_kinds on 4 ranks with `fault` and returns run()'s error, checking the time it took
// and that no thread outlives the run.
std::string fault_error(const FaultSpec& fault, bool all_to_all = false) {
  SimWorld sim(4, SimOptions{.timeout = kFaultTimeout, .faults = {fault}});
  const int threads_before = baseline_thread_count();
  std::string error;
  const double seconds = seconds_taken(
      [&] { error = run_error(sim, [all_to_all](Comm& c) { five_kinds(c, 3, all_to_all); }); });
  EXPECT_LT(seconds, kFaultBoundSeconds) << to_string(fault);
  EXPECT_LE(settled_thread_count(threads_before), threads_before) << to_string(fault);
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  return error;
}

TEST(SimFaultSpec, parses_and_prints_round_trip) {
  const FaultSpec fault = parse_fault_spec("rank=2,at=all_gather:5,kind=throw");
  EXPECT_EQ(
      fault,
      (FaultSpec{
          .rank = 2, .collective = CollectiveKind::AllGather, .nth = 5, .kind = FaultKind::Throw}));
  EXPECT_EQ(
      parse_fault_spec("kind=slow,at=barrier:1,rank=0"),
      (FaultSpec{
          .rank = 0, .collective = CollectiveKind::Barrier, .nth = 1, .kind = FaultKind::Slow}));
  for (const char* text :
       {"rank=0,at=all_reduce:1,kind=skip", "rank=7,at=reduce_scatter:12,kind=slow",
        "rank=1,at=broadcast:3,kind=throw", "rank=3,at=barrier:9,kind=skip"}) {
    EXPECT_EQ(to_string(parse_fault_spec(text)), text);
  }
}

TEST(SimFaultSpec, bad_specs_name_the_part_and_the_form) {
  const std::string form = "; expected rank=R,at=COLLECTIVE:N,kind=throw|skip|slow";
  const std::pair<const char*, std::string> cases[] = {
      {"rank=2,at=all_gather:5,kind=explode",
       R"(kind "explode" is unknown: use throw, skip or slow)"},
      {"rank=two,at=all_gather:5,kind=throw", R"(rank "two" is not a rank number (0, 1, ...))"},
      {"rank=-1,at=all_gather:5,kind=throw", R"(rank "-1" is not a rank number (0, 1, ...))"},
      {"rank=2,at=allgather:5,kind=throw", R"(collective "allgather" is unknown: use all_reduce,)"},
      {"rank=2,at=all_gather,kind=throw",
       R"(at "all_gather" has no call number: write it as all_gather:5)"},
      {"rank=2,at=all_gather:0,kind=throw", R"(call number "0" is not 1 or more)"},
      {"rank=2,at=all_gather:5x,kind=throw", R"(call number "5x" is not 1 or more)"},
      {"rank=2,at=all_gather:5", "kind is missing"},
      {"at=all_gather:5,kind=skip", "rank is missing"},
      {"rank=2,kind=skip", "at is missing"},
      {"rank=2,rank=3,at=all_gather:5,kind=skip", "rank is given twice"},
      {"rank=2,,at=all_gather:5,kind=skip", R"("" is not key=value)"},
      {"rank=2,at=all_gather:5,kind=skip,", R"("" is not key=value)"},
      {"rank=2,at=all_gather:5,when=now", R"(key "when" is unknown: use rank, at and kind)"},
      {"", R"("" is not key=value)"},
  };
  for (const auto& [text, part] : cases) {
    try {
      parse_fault_spec(text, "--inject-fault");
      ADD_FAILURE() << text << " parsed";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_TRUE(message.starts_with(fmt::format("--inject-fault {:?}: ", std::string(text))))
          << message;
      EXPECT_TRUE(contains(message, part));
      EXPECT_TRUE(message.ends_with(form)) << message;
    }
  }
  // Control characters are escaped, so the error stays on one line.
  try {
    parse_fault_spec("rank=1\n,at=barrier:1,kind=skip");
    ADD_FAILURE() << "parsed";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

TEST(SimFaultSpec, faults_must_fit_the_world) {
  const auto error_of = [](std::vector<FaultSpec> faults, int world) {
    try {
      SimWorld sim(world, SimOptions{.faults = std::move(faults)});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of({parse_fault_spec("rank=4,at=barrier:1,kind=throw")}, 4),
            "fault rank=4,at=barrier:1,kind=throw: rank 4 is outside the world of 4 ranks: use "
            "rank 0..3");
  EXPECT_EQ(
      error_of({parse_fault_spec("rank=0,at=barrier:1,kind=skip")}, 1),
      "fault rank=0,at=barrier:1,kind=skip: kind=skip needs a world of 2 or more ranks: a lone "
      "rank has no peer to notice it");
  EXPECT_TRUE(contains(error_of({parse_fault_spec("rank=0,at=barrier:1,kind=slow")}, 1),
                       "kind=slow needs a world of 2 or more ranks"));
  EXPECT_EQ(error_of({parse_fault_spec("rank=1,at=barrier:2,kind=skip"),
                      parse_fault_spec("rank=1,at=barrier:2,kind=throw")},
                     2),
            "fault rank=1,at=barrier:2,kind=skip and rank=1,at=barrier:2,kind=throw hit the same "
            "call: give each call one fault");
  EXPECT_EQ(error_of({parse_fault_spec("rank=0,at=barrier:1,kind=throw")}, 1), "no error");
}

// throw: the rank throws at exactly that call; the message is the rank's own.
TEST(SimFaults, throw_names_rank_collective_and_call) {
  EXPECT_EQ(fault_error(parse_fault_spec("rank=2,at=all_gather:2,kind=throw")),
            "rank 2: injected fault at all_gather #2 (call #8)");
  EXPECT_EQ(fault_error(parse_fault_spec("rank=0,at=all_reduce:1,kind=throw")),
            "rank 0: injected fault at all_reduce #1 (call #1)");
  EXPECT_EQ(fault_error(parse_fault_spec("rank=3,at=barrier:3,kind=throw")),
            "rank 3: injected fault at barrier #3 (call #15)");
}

// skip: the rank leaves the call out; the others' next call disagrees with its next one.
TEST(SimFaults, skip_becomes_a_mismatch_naming_both_calls) {
  const std::string error = fault_error(parse_fault_spec("rank=1,at=reduce_scatter:2,kind=skip"));
  EXPECT_TRUE(
      error.starts_with("rank 1: injected fault at reduce_scatter #2 (call #7): skipped the "
                        "call; then rank "))
      << error;
  EXPECT_TRUE(contains(error,
                       "collective mismatch at call #7: rank 0 called reduce_scatter(fp32, 2 "
                       "elems, avg) but rank 1 called all_gather(fp32, 2 elems)"));
}

// skip of a rank's last call: the others wait for a rank that has returned.
TEST(SimFaults, skip_of_the_last_call_is_an_early_return) {
  const std::string error = fault_error(parse_fault_spec("rank=3,at=barrier:3,kind=skip"));
  EXPECT_TRUE(
      error.starts_with("rank 3: injected fault at barrier #3 (call #15): skipped the call; "
                        "then rank "))
      << error;
  EXPECT_TRUE(
      contains(error, "waits in call #15 barrier but rank 3 returned after 14 collectives"));
}

// slow: the others time out waiting for it.
TEST(SimFaults, slow_rank_makes_the_others_time_out) {
  const std::string error = fault_error(parse_fault_spec("rank=2,at=broadcast:2,kind=slow"));
  EXPECT_TRUE(
      error.starts_with(fmt::format("rank 2: injected fault at broadcast #2 (call #9): held back "
                                    "for twice the {} ms collective timeout; then rank ",
                                    kFaultTimeout.count())))
      << error;
  EXPECT_TRUE(contains(error, fmt::format("timeout after {} ms: rank ", kFaultTimeout.count())));
  EXPECT_TRUE(contains(error, "waits in call #9 broadcast(fp32, 8 elems, root 0); rank"));
  EXPECT_TRUE(contains(error, "2 never arrived"));
}

// The slow rank stops sleeping once the others have failed: the run ends about one timeout after
// the call, not two.
TEST(SimFaults, slow_rank_wakes_when_the_others_give_up) {
  SimWorld sim(3, SimOptions{.timeout = kFaultTimeout,
                             .faults = {parse_fault_spec("rank=1,at=barrier:1,kind=slow")}});
  const double seconds = seconds_taken([&] { run_error(sim, [](Comm& comm) { comm.barrier(); }); });
  const double timeout_seconds = std::chrono::duration<double>(kFaultTimeout).count();
  EXPECT_GE(seconds, timeout_seconds);
  EXPECT_LT(seconds, 1.9 * timeout_seconds);  // sleeping on would take twice the timeout
}

// Every kind at every collective ends in bounded time with the rank and the call named.
TEST(SimFaults, every_kind_at_every_collective_ends_with_the_call_named) {
  for (const char* kind : {"throw", "skip", "slow"}) {
    for (int k = 0; k < kCollectiveKindCount; ++k) {
      const auto collective = static_cast<CollectiveKind>(k);
      const FaultSpec fault = parse_fault_spec(
          fmt::format("rank=1,at={}:2,kind={}", collective_name(collective), kind));
      const std::string error = fault_error(fault, /*all_to_all=*/true);
      EXPECT_TRUE(error.starts_with(fmt::format("rank 1: injected fault at {} #2 (call #{})",
                                                collective_name(collective), 6 + k + 1)))
          << error;
    }
  }
}

// A fault whose call never comes fails the run rather than passing silently.
TEST(SimFaults, fault_that_never_fires_is_an_error) {
  EXPECT_EQ(
      fault_error(parse_fault_spec("rank=1,at=all_gather:4,kind=throw")),
      "rank 1: fault rank=1,at=all_gather:4,kind=throw never fired: the rank made 3 all_gather "
      "calls");
}

// Faults count per rank: the same spec on another rank changes nothing on this one.
TEST(SimFaults, only_the_named_rank_is_faulty) {
  SimWorld sim(3, SimOptions{.faults = {parse_fault_spec("rank=1,at=barrier:2,kind=throw")}});
  std::vector<int> barriers_done(3, 0);
  const std::string error = run_error(sim, [&](Comm& comm) {
    for (int i = 0; i < 3; ++i) {
      comm.barrier();
      ++barriers_done[static_cast<std::size_t>(comm.rank())];
    }
  });
  EXPECT_EQ(error, "rank 1: injected fault at barrier #2 (call #2)");
  EXPECT_EQ(barriers_done[1], 1);
  EXPECT_LE(barriers_done[0], 1);  // the others cannot pass barrier #2 without rank 1
}

// The other failure modes, too, leave no thread behind.
TEST(SimFaults, no_thread_is_left_running_after_any_failure) {
  const int threads_before = baseline_thread_count();
  SimWorld sim(6, SimOptions{.timeout = kFaultTimeout});
  const std::function<void(Comm&)> bodies[] = {
      [](Comm& comm) {  // throws mid-run while the others wait in a collective
        comm.barrier();
        if (comm.rank() == 4) throw Error("boom");
        comm.barrier();
      },
      [](Comm& comm) {  // mismatched sizes
        std::vector<float> data(8);
        comm.all_reduce(data.data(), comm.rank() == 5 ? 7 : 8, DType::F32, ReduceOp::Sum);
      },
      [](Comm& comm) {  // arrives after the timeout
        if (comm.rank() == 0) std::this_thread::sleep_for(2 * kFaultTimeout);
        comm.barrier();
      },
      [](Comm& comm) {  // returns early
        comm.barrier();
        if (comm.rank() != 3) comm.barrier();
      },
  };
  for (const auto& body : bodies) {
    const double seconds = seconds_taken([&] { run_error(sim, body); });
    EXPECT_LT(seconds, kFaultBoundSeconds);
    EXPECT_LE(settled_thread_count(threads_before), threads_before);
  }
}

}  // namespace
}  // namespace zl::simtest
