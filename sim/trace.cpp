// trace.cpp — Chrome trace JSON from the ranks' timeline records.
#include "trace.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/atomic_file.hpp"

namespace zl {

namespace {

using nlohmann::json;

constexpr double kUsPerMs = 1e3;

json metadata(std::string_view name, int pid, int tid, const json& args) {
  json event = {{"name", name}, {"ph", "M"}, {"pid", pid}, {"args", args}};
  if (tid >= 0) event["tid"] = tid;
  return event;
}

json span(std::string name, std::string_view category, int pid, int tid, double start_ms,
          double dur_ms, json args) {
  return {{"name", std::move(name)},
          {"cat", category},
          {"ph", "X"},
          {"pid", pid},
          {"tid", tid},
          {"ts", start_ms * kUsPerMs},
          {"dur", dur_ms * kUsPerMs},
          {"args", std::move(args)}};
}

json comm_args(const TimelineEvent& event) {
  return {{"bytes", event.call.sent_bytes},
          {"wire_bytes", event.call.wire_bytes},
          {"buffer_bytes", event.call.buffer_elems * event.call.elem_bytes},
          {"elems", event.call.buffer_elems},
          {"call", event.call.number},
          {"step", event.step},
          {"async", event.async},
          {"hierarchical", event.call.hierarchical},
          {"group_ranks", event.call.group_ranks},
          {"issue_ms", event.issue_ms}};
}

void add_rank(json& events, const TimelineRecord& rank) {
  const int pid = rank.rank;
  events.push_back(metadata("process_name", pid, -1, {{"name", fmt::format("rank {}", pid)}}));
  events.push_back(metadata("process_sort_index", pid, -1, {{"sort_index", pid}}));
  const std::pair<int, std::string_view> tracks[] = {{kStepTrack, "steps"},
                                                     {kComputeTrack, "compute"},
                                                     {kCommTrack, "comm"},
                                                     {kHostTrack, "host copies"},
                                                     {kDiskTrack, "disk"}};
  for (const auto& [tid, name] : tracks) {
    events.push_back(metadata("thread_name", pid, tid, {{"name", name}}));
    events.push_back(metadata("thread_sort_index", pid, tid, {{"sort_index", tid}}));
  }
  for (const auto& step : rank.steps) {
    events.push_back(span(fmt::format("step {}", step.step + 1), "step", pid, kStepTrack,
                          step.start_ms, step.step_ms,
                          {{"compute_ms", step.compute_ms},
                           {"comm_ms", step.comm_ms},
                           {"exposed_comm_ms", step.exposed_comm_ms},
                           {"copy_ms", step.copy_ms}}));
  }
  for (const auto& event : rank.events) {
    if (event.stream == Stream::Comm) {
      events.push_back(span(event.name, "comm", pid, kCommTrack, event.start_ms, event.dur_ms,
                            comm_args(event)));
    } else if (event.stream == Stream::Host || event.stream == Stream::Disk) {
      events.push_back(span(event.name, "copy", pid,
                            event.stream == Stream::Host ? kHostTrack : kDiskTrack, event.start_ms,
                            event.dur_ms, {{"bytes", event.copy_bytes}, {"step", event.step}}));
    } else if (event.call.number != 0) {
      events.push_back(span(
          event.name, "wait", pid, kComputeTrack, event.start_ms, event.dur_ms,
          {{"call", event.call.number}, {"step", event.step}, {"exposed_ms", event.exposed_ms}}));
    } else {
      events.push_back(span(event.name, "compute", pid, kComputeTrack, event.start_ms, event.dur_ms,
                            {{"step", event.step}}));
    }
  }
}

}  // namespace

std::string chrome_trace_json(const std::vector<TimelineRecord>& ranks, const TraceInfo& info) {
  json events = json::array();
  for (const auto& rank : ranks) add_rank(events, rank);
  const json document = {{"traceEvents", std::move(events)},
                         {"displayTimeUnit", "ms"},
                         {"otherData",
                          {{"engine", info.engine},
                           {"world", info.world},
                           {"link", info.link},
                           {"gpus_per_node", info.gpus_per_node},
                           {"link_across", info.link_across},
                           {"nics_per_node", info.nics_per_node},
                           {"host_link", info.host_link},
                           {"device", info.device},
                           {"compute_scale", info.compute_scale},
                           {"time", "simulated"}}}};
  return document.dump() + "\n";
}

void write_chrome_trace(const std::filesystem::path& path, const std::vector<TimelineRecord>& ranks,
                        const TraceInfo& info) {
  write_file_atomically(path, chrome_trace_json(ranks, info));
}

}  // namespace zl
