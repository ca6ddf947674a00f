// ds_offload.cpp — the offload sections' readers: the device and its nvme_path, read the same way
// for the optimizer and the parameters, then each section's own keys.
#include "cli/ds_offload.hpp"

#include <optional>
#include <string>

namespace zl::ds {

namespace {

// "device" (none, cpu or nvme) into `device` and "nvme_path" (a non-empty string) into
// `nvme_path`: what offload_optimizer and offload_param share.
Readers device_readers(const Checker& check, std::optional<std::string>& device,
                       std::optional<std::string>& nvme_path) {
  return {{"device",
           [&check, &device](const json& v, const std::string& p) {
             if (v != "none" && v != "cpu" && v != "nvme") check.bad(p, v, "use none, cpu or nvme");
             device = v.get<std::string>();
           }},
          {"nvme_path", [&check, &nvme_path](const json& v, const std::string& p) {
             nvme_path = v.is_string() ? v.get<std::string>() : "";
             if (nvme_path->empty()) check.bad(p, v, "use the path of a folder for the swap files");
           }}};
}

}  // namespace

Readers offload_optimizer_readers(const Checker& check, DsConfig& ds) {
  Readers readers =
      device_readers(check, ds.offload_optimizer_device, ds.offload_optimizer_nvme_path);
  readers.insert(
      {{"pipeline_read",
        [&](const json& v, const std::string& p) { ds.pipeline_read = check.boolean(v, p); }},
       {"pipeline_write",
        [&](const json& v, const std::string& p) { ds.pipeline_write = check.boolean(v, p); }},
       {"buffer_count", [&](const json& v, const std::string& p) {
          ds.swap_buffer_count =
              static_cast<int>(check.whole(v, p, 1, 1024, "use 1 to 1024 units"));
        }}});
  return readers;
}

Readers offload_param_readers(const Checker& check, DsConfig& ds) {
  Readers readers = device_readers(check, ds.offload_param_device, ds.offload_param_nvme_path);
  readers.insert({{"buffer_count",
                   [&](const json& v, const std::string& p) {
                     ds.param_buffer_count =
                         static_cast<int>(check.whole(v, p, 1, 1024, "use 1 to 1024 swap buffers"));
                   }},
                  {"buffer_size",
                   [&](const json& v, const std::string& p) {
                     ds.param_buffer_elems = check.at_least(v, p, 1, "use 1 or more elements");
                   }},
                  {"max_in_cpu", [&](const json& v, const std::string& p) {
                     ds.param_max_in_cpu_elems =
                         check.at_least(v, p, 0, "use 0 (every shard on disk) or more elements");
                   }}});
  return readers;
}

Readers aio_readers(const Checker& check, DsConfig& ds) {
  return {{"block_size",
           [&](const json& v, const std::string& p) {
             ds.aio_block_bytes = check.whole(v, p, 4096, 256ll << 20,
                                              "use a multiple of 4096 bytes up to 268435456");
           }},
          {"queue_depth",
           [&](const json& v, const std::string& p) {
             ds.aio_queue_depth = static_cast<int>(check.whole(v, p, 1, 256, "use 1 to 256"));
           }},
          {"thread_count",
           [&](const json& v, const std::string& p) {
             ds.aio_thread_count = static_cast<int>(check.whole(v, p, 1, 256, "use 1 to 256"));
           }},
          {"single_submit", [&](const json& v, const std::string& p) { check.boolean(v, p); }},
          {"overlap_events", [&](const json& v, const std::string& p) { check.boolean(v, p); }}};
}

}  // namespace zl::ds
