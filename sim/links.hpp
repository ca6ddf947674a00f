// links.hpp — the presets of the simulator's timeline (docs/timeline.md). A link is an alpha-beta
// model of one ring collective: a fixed latency alpha per call plus the bytes the busiest rank
// puts on the wire divided by the link's bus bandwidth,
//   comm_ms = alpha_us / 1e3 + wire_bytes / (busbw_gbps * 1e9) * 1e3,
// with bus bandwidth as nccl-tests defines it (doc/PERFORMANCE.md there): busbw = algbw * 2(W-1)/W
// for all_reduce and (W-1)/W for reduce_scatter and all_gather, which is exactly the ring volume
// one rank sends divided by the time. A device is the peak throughput that measured CPU compute is
// scaled to. The sources of the numbers are beside them in links.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "comm/reduce.hpp"
#include "comm/traffic_ledger.hpp"
#include "core/dtype.hpp"

namespace zl {

/// An interconnect as the timeline models it: latency per collective call and ring bus bandwidth.
struct LinkPreset {
  std::string name;         ///< "h100-nvlink", ...
  double alpha_us = 0.0;    ///< fixed cost of one collective call, microseconds
  double busbw_gbps = 1.0;  ///< bus bandwidth, GB/s (1e9 bytes per second)
  std::string source;       ///< where the numbers come from, one line
};

/// The link presets: h100-nvlink, a100-nvlink, ib-400g, pcie4.
const std::vector<LinkPreset>& link_presets();

/// The preset named `name`; throws zl::Error naming the known presets otherwise.
LinkPreset link_preset(std::string_view name);

/// "h100-nvlink", the default of `zerolab train --link`.
inline constexpr std::string_view kDefaultLink = "h100-nvlink";

/// A link that copies: between a device and its host's memory (PCIe), which prices ZeRO-Offload's
/// and offload_param's copies, or between host memory and a local disk (DiskLinkPreset), which
/// prices ZeRO-Infinity's swap-file reads and writes: copy_ms = latency_us / 1e3 + bytes / (gbps *
/// 1e9) * 1e3.
struct HostLinkPreset {
  std::string name;         ///< "pcie4-x16", "pcie5-x16"
  double latency_us = 0.0;  ///< fixed cost of one copy, microseconds
  double gbps = 1.0;        ///< effective bandwidth of one direction, GB/s (1e9 bytes per second)
  std::string source;       ///< where the numbers come from, one line
};

/// The host link presets: pcie4-x16, pcie5-x16.
const std::vector<HostLinkPreset>& host_link_presets();

/// The preset named `name`; throws zl::Error naming the known presets otherwise.
HostLinkPreset host_link_preset(std::string_view name);

/// "pcie5-x16", the default of `zerolab train --host-link` (an H100's host link, as the default
/// --link is H100 NVLink).
inline constexpr std::string_view kDefaultHostLink = "pcie5-x16";

/// Milliseconds one copy of `bytes` takes on `link` (a host link or a disk link):
/// latency + bytes / bandwidth.
double host_copy_ms(const HostLinkPreset& link, std::int64_t bytes);

/// The link between host memory and a local NVMe disk: the same form as a host link.
using DiskLinkPreset = HostLinkPreset;

/// The disk link presets: nvme-gen4.
const std::vector<DiskLinkPreset>& disk_link_presets();

/// The preset named `name`, or a bandwidth in GB/s with no latency ("2.5": what `zerolab bench
/// nvme` measured for a folder); throws zl::Error naming the presets otherwise.
DiskLinkPreset disk_link_preset(std::string_view name);

/// "nvme-gen4", the default of `zerolab train --disk-link`.
inline constexpr std::string_view kDefaultDiskLink = "nvme-gen4";

/// A device the measured CPU compute can be scaled to (docs/timeline.md, "Compute").
struct DevicePreset {
  std::string name;          ///< "h100", "a100", or "cpu" (no scaling)
  double fp32_tflops = 0.0;  ///< dense fp32 peak (no tensor cores); 0 for "cpu"
  double bf16_tflops = 0.0;  ///< dense bf16/fp16 tensor-core peak; 0 for "cpu"
  double utilization =
      1.0;             ///< fraction of peak a training step achieves (model FLOPs utilization)
  std::string source;  ///< where the numbers come from, one line
};

/// The device presets: cpu, a100, h100.
const std::vector<DevicePreset>& device_presets();

/// The preset named `name`; throws zl::Error naming the known presets otherwise.
DevicePreset device_preset(std::string_view name);

/// True for the "cpu" preset: compute is the measured CPU time, unscaled.
bool is_measured_cpu(const DevicePreset& device);

/// GFLOP/s a training step reaches on `device` in `precision`: peak (fp32, or bf16/fp16 tensor
/// cores) times utilization. Throws zl::Error for the "cpu" preset, which has no model.
double achieved_gflops(const DevicePreset& device, DType precision);

/// Bytes the busiest rank sends in one ring collective over a buffer of `buffer_elems` elements
/// (the full W-block buffer for reduce_scatter, all_gather and all_to_all, as ring_volume()
/// takes it):
/// the largest sent_bytes of ring_volume() over the ranks. 0 on one rank and for barrier.
std::int64_t wire_bytes(CollectiveKind kind, std::int64_t buffer_elems, std::int64_t elem_bytes,
                        int world);

/// Milliseconds one collective takes on `link` among `world` ranks: alpha + wire_bytes / busbw.
/// 0 on one rank, which has no peer and no link.
double collective_ms(const LinkPreset& link, std::int64_t wire_bytes, int world);

/// "ib-400g", the default of `zerolab train --link-across`.
inline constexpr std::string_view kDefaultLinkAcross = "ib-400g";

/// The nodes of a world as the timeline prices them (docs/timeline.md, "Nodes"): ranks nG ..
/// nG+G-1 share node n and its `--link` (NVLink); the nodes are joined by `nics_per_node` NICs
/// each, every NIC an `across` link, shared by the node's G GPUs.
struct NodeLinks {
  /// G; kOneNode: every rank on one node, every collective priced on `--link` alone.
  int gpus_per_node = kOneNode;
  /// One NIC between nodes (its bus bandwidth is one rail's).
  LinkPreset across = link_preset(kDefaultLinkAcross);
  /// NICs a node; 0: one per GPU, as on rail-optimized H100 and A100 systems.
  int nics_per_node = 0;
};

/// NICs a node of a world of `world` ranks on `nodes`: nics_per_node, or one per GPU.
int nics_a_node(const NodeLinks& nodes, int world);

/// How a collective is carried out in a world of nodes, and its time.
struct CollectivePlan {
  double ms = 0.0;  ///< simulated duration
  /// True when it runs inside the nodes, then across them, then inside again (cheaper here than
  /// one ring through every rank); false for the ring, and in a world of one node.
  bool hierarchical = false;
};

/// The time of one `kind` collective over a buffer of `buffer_elems` elements of `elem_bytes`
/// (the whole ring buffer, as wire_bytes() takes it) among `world` ranks on `nodes`. One node:
/// collective_ms on `inside`. Several: the cheaper of
///   ring          one ring through every rank: alpha = the larger link's, bus bandwidth =
///                 min(inside's, nics_per_node x across's): every NIC of a node carries a ring
///   hierarchical  (all_reduce, reduce_scatter, all_gather with G > 1) a reduce_scatter inside
///                 the node, the call across the nodes on 1/G of the buffer over each GPU's
///                 share of the NICs (nics_per_node / G of them), an all_gather inside
///                 (reduce_scatter and all_gather: only their own half of that).
/// An all_to_all has no ring: each rank's G-1 blocks for its own node go on `inside` while its
/// W-G blocks for the other nodes go on its share of the NICs, and the slower of the two counts.
/// Throws zl::Error when gpus_per_node does not divide the world or nics_per_node < 0.
CollectivePlan plan_collective(const LinkPreset& inside, const NodeLinks& nodes,
                               CollectiveKind kind, std::int64_t buffer_elems,
                               std::int64_t elem_bytes, int world);

/// plan_collective for a group of `group_ranks` ranks of the `world` (Comm::split) that spans
/// `group_nodes` nodes with as many of its ranks on each: one node, the inside link among them;
/// several, the two forms, on the group's share of each node's NICs (its ranks' share of the
/// node's GPUs: the node's other GPUs use the rest, as in the other groups of the same split).
/// Throws zl::Error for a group with a different number of ranks on its nodes, and as
/// plan_collective.
CollectivePlan plan_group_collective(const LinkPreset& inside, const NodeLinks& nodes, int world,
                                     int group_ranks, int group_nodes, CollectiveKind kind,
                                     std::int64_t buffer_elems, std::int64_t elem_bytes);

}  // namespace zl
