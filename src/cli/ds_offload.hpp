// ds_offload.hpp — DeepSpeed's offload sections read into a DsConfig:
// zero_optimization.offload_optimizer ({"device": "none"}, {"device": "cpu"} for ZeRO-Offload, or
// {"device": "nvme", "nvme_path": DIR} for ZeRO-Infinity, with its pipeline keys),
// zero_optimization.offload_param (the same devices for ZeRO-3's parameter shards) and the
// top-level `aio` section (how the swap files move their bytes).
#pragma once

#include "cli/ds_config.hpp"
#include "cli/ds_json.hpp"

namespace zl::ds {

/// zero_optimization.offload_optimizer's keys: device, nvme_path, pipeline_read, pipeline_write,
/// buffer_count.
Readers offload_optimizer_readers(const Checker& check, DsConfig& ds);

/// zero_optimization.offload_param's keys: device, nvme_path.
Readers offload_param_readers(const Checker& check, DsConfig& ds);

/// aio's keys: block_size, queue_depth, thread_count; single_submit and overlap_events are checked
/// and have no effect (zerolab's queue submits what it has, and overlaps reads and writes always).
Readers aio_readers(const Checker& check, DsConfig& ds);

}  // namespace zl::ds
