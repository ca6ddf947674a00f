// links.cpp — the link, host link and device presets with the source of every number, the
// alpha-beta cost of one collective and the cost of one host copy.
#include "links.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/error.hpp"

namespace zl {

namespace {

template <class Preset>
std::vector<std::string> names_of(const std::vector<Preset>& presets) {
  std::vector<std::string> names;
  for (const auto& preset : presets) names.push_back(preset.name);
  return names;
}

// The preset named `name`, or null.
template <class Preset>
const Preset* find_named(const std::vector<Preset>& presets, std::string_view name) {
  const auto it = std::ranges::find(presets, name, &Preset::name);
  return it == presets.end() ? nullptr : &*it;
}

// The preset named `name`; zl::Error "<kind> <name> is unknown: use one of ..." otherwise.
template <class Preset>
const Preset& named(const std::vector<Preset>& presets, std::string_view name,
                    std::string_view kind) {
  const Preset* preset = find_named(presets, name);
  ZL_CHECK(preset != nullptr, "{} {} is unknown: use one of {}", kind, name,
           fmt::join(names_of(presets), ", "));
  return *preset;
}

}  // namespace

const std::vector<LinkPreset>& link_presets() {
  static const std::vector<LinkPreset> presets = {
      // NVLink 4 on HGX/DGX H100: 900 GB/s bidirectional per GPU, 450 GB/s each way (H100
      // datasheet). NCCL's ring reaches ~370 GB/s busbw after ~20% protocol overhead (S. Jeaugey,
      // NCCL team, NVIDIA/nccl-tests#212, 2024-05). Alpha: a small all_reduce takes ~6 us on
      // HGX H100 with CUDA graphs (NVIDIA/nccl#1259) plus ~3 us of launch without
      // (NVIDIA/nccl#1984).
      {"h100-nvlink", 10.0, 370.0,
       "NVLink 4 (H100): 450 GB/s/direction line rate, ~370 GB/s NCCL ring busbw (nccl-tests#212); "
       "alpha ~6 us + launch (nccl#1259, nccl#1984)"},
      // NVLink 3 on DGX/HGX A100: 600 GB/s bidirectional per GPU, 300 GB/s each way (A100
      // datasheet); nccl-tests all_reduce on 8xA100 reports ~200-240 GB/s busbw (e.g.
      // NVIDIA/nccl-tests#149: ~200 GB/s on an HPE 8xA100 node). Alpha as for H100.
      {"a100-nvlink", 10.0, 230.0,
       "NVLink 3 (A100): 300 GB/s/direction line rate, ~200-240 GB/s nccl-tests busbw "
       "(nccl-tests#149); alpha as h100-nvlink"},
      // 400 Gb/s InfiniBand NDR, one NIC per GPU (rail-optimized): 50 GB/s line rate; the ring
      // across nodes runs at ~90% of it, 45-48 GB/s busbw. Alpha: NCCL's own tuning model
      // predicts ~26 us for a 4 KB all_reduce on an H100 InfiniBand cluster (NVIDIA/nccl#1453).
      {"ib-400g", 25.0, 45.0,
       "InfiniBand NDR 400 Gb/s per GPU: 50 GB/s line rate, ~45 GB/s ring busbw; alpha ~26 us "
       "from NCCL's tuner (nccl#1453)"},
      // PCIe 4.0 x16: 16 GT/s * 16 lanes * 128/130 = 31.5 GB/s each way; ~80% of it after
      // packet overhead, ~25 GB/s. Alpha is an assumption between NVLink and InfiniBand.
      {"pcie4", 15.0, 25.0,
       "PCIe 4.0 x16: 31.5 GB/s/direction line rate, ~25 GB/s after overhead; alpha assumed"},
  };
  return presets;
}

LinkPreset link_preset(std::string_view name) {
  return named(link_presets(), name, "link");
}

const std::vector<HostLinkPreset>& host_link_presets() {
  static const std::vector<HostLinkPreset> presets = {
      // PCIe 4.0 x16 (A100): 16 GT/s * 16 lanes * 128/130 = 31.5 GB/s each way; pinned copies
      // measure ~25 GB/s (the BaM authors' measured peak for an A100, ZaidQureshi/bam#54).
      {"pcie4-x16", 10.0, 25.0,
       "PCIe 4.0 x16 (A100): 31.5 GB/s/direction line rate, ~25 GB/s measured for pinned copies "
       "(bam#54); latency assumed"},
      // PCIe 5.0 x16 (H100): 63 GB/s each way; copy-engine memcpy on HGX H100 measures ~53 GB/s
      // device to host (NVIDIA/nvbandwidth#24); 50 GB/s leaves room for pageable buffers and
      // concurrent traffic, about 80% of the line rate as for Gen4. Latency: a small
      // cudaMemcpyAsync costs a few microseconds of launch plus the DMA round trip; 10 us is an
      // assumption for both.
      {"pcie5-x16", 10.0, 50.0,
       "PCIe 5.0 x16 (H100): 63 GB/s/direction line rate, ~53 GB/s measured by nvbandwidth "
       "(nvbandwidth#24), 50 used; latency assumed"},
  };
  return presets;
}

HostLinkPreset host_link_preset(std::string_view name) {
  return named(host_link_presets(), name, "host link");
}

double host_copy_ms(const HostLinkPreset& link, std::int64_t bytes) {
  return link.latency_us / 1e3 + static_cast<double>(bytes) / (link.gbps * 1e9) * 1e3;
}

const std::vector<DiskLinkPreset>& disk_link_presets() {
  static const std::vector<DiskLinkPreset> presets = {
      // One PCIe 4.0 x4 NVMe SSD: the fastest consumer drives of that generation are rated 7.45
      // GB/s sequential read and 6.9 GB/s write (Samsung 990 PRO datasheet); 7 GB/s is used for
      // both directions. Latency: one large read or write costs a submission and its
      // completion, tens of microseconds; 50 us is an assumption.
      {"nvme-gen4", 50.0, 7.0,
       "one PCIe 4.0 NVMe SSD: 7.45 GB/s read and 6.9 GB/s write rated (Samsung 990 PRO "
       "datasheet), 7 used; latency assumed"},
  };
  return presets;
}

DiskLinkPreset disk_link_preset(std::string_view name) {
  const auto& presets = disk_link_presets();
  if (const DiskLinkPreset* preset = find_named(presets, name)) return *preset;
  double gbps = 0.0;
  const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), gbps);
  ZL_CHECK(
      error == std::errc() && end == name.data() + name.size() && std::isfinite(gbps) && gbps > 0.0,
      "disk link {} is unknown: use one of {}, or a bandwidth in GB/s above 0 (zerolab "
      "bench nvme --path DIR measures a folder's)",
      name, fmt::join(names_of(presets), ", "));
  return {fmt::format("{} GB/s", name), 0.0, gbps, "given on the command line"};
}

const std::vector<DevicePreset>& device_presets() {
  static const std::vector<DevicePreset> presets = {
      {"cpu", 0.0, 0.0, 1.0, "the measured CPU time of each rank's thread, unscaled"},
      // A100 SXM4 datasheet: 19.5 TFLOP/s fp32, 312 TFLOP/s dense bf16/fp16 tensor cores.
      // Utilization: Megatron-LM sustains 163 of 312 TFLOP/s per A100 training GPT-3-class models
      // (Narayanan et al., SC21: 52%); 0.5 is used for both devices.
      {"a100", 19.5, 312.0, 0.5,
       "A100 SXM4 datasheet: 19.5 TFLOP/s fp32, 312 bf16 dense; 50% utilization (Megatron-LM, "
       "SC21)"},
      // H100 SXM5 datasheet: 67 TFLOP/s fp32, 989 TFLOP/s dense bf16/fp16 (1979 with sparsity).
      {"h100", 67.0, 989.0, 0.5,
       "H100 SXM5 datasheet: 67 TFLOP/s fp32, 989 bf16 dense; 50% utilization (as a100)"},
  };
  return presets;
}

DevicePreset device_preset(std::string_view name) {
  return named(device_presets(), name, "device");
}

bool is_measured_cpu(const DevicePreset& device) {
  return device.fp32_tflops <= 0.0;
}

double achieved_gflops(const DevicePreset& device, DType precision) {
  ZL_CHECK(!is_measured_cpu(device), "device {} has no throughput model: it is measured",
           device.name);
  const double tflops = precision == DType::F32 ? device.fp32_tflops : device.bf16_tflops;
  return tflops * 1e3 * device.utilization;
}

std::int64_t wire_bytes(CollectiveKind kind, std::int64_t buffer_elems, std::int64_t elem_bytes,
                        int world) {
  ZL_CHECK(world >= 1, "wire bytes: world size {} is invalid", world);
  if (world == 1) return 0;
  // ring_volume(): a ring pass sends all chunks but one; the busiest rank skips the smallest,
  // floor(n/W) elements. A broadcast chain: every rank but the last sends the whole buffer.
  const std::int64_t all_bytes = buffer_elems * elem_bytes;
  const std::int64_t pass_bytes = all_bytes - buffer_elems / world * elem_bytes;
  switch (kind) {
    case CollectiveKind::AllReduce:
      return 2 * pass_bytes;
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllGather:
    case CollectiveKind::AllToAll:  // every block but the own one, straight to its rank
      return pass_bytes;
    case CollectiveKind::Broadcast:
      return all_bytes;
    case CollectiveKind::Barrier:
      return 0;
  }
  fail("unknown collective kind {}", static_cast<int>(kind));
}

double collective_ms(const LinkPreset& link, std::int64_t wire_bytes, int world) {
  if (world <= 1) return 0.0;
  return link.alpha_us / 1e3 + static_cast<double>(wire_bytes) / (link.busbw_gbps * 1e9) * 1e3;
}

namespace {

// The plan of a collective among `node_count` nodes of `gpus` ranks each, which have `nics` NICs
// a node between them (a share of the node's when others use them too): plan_collective's two
// forms, or the inside link alone on one node.
CollectivePlan plan_on_nodes(const LinkPreset& inside, const LinkPreset& across, double nics,
                             int gpus, int node_count, CollectiveKind kind,
                             std::int64_t buffer_elems, std::int64_t elem_bytes) {
  const int world = gpus * node_count;
  const std::int64_t ring_bytes = wire_bytes(kind, buffer_elems, elem_bytes, world);
  if (node_count == 1)
    return {.ms = collective_ms(inside, ring_bytes, world), .hierarchical = false};
  const auto link = [&across](double busbw_gbps) {
    return LinkPreset{.name = across.name,
                      .alpha_us = across.alpha_us,
                      .busbw_gbps = busbw_gbps,
                      .source = across.source};
  };
  if (kind == CollectiveKind::AllToAll) {
    // No ring: each rank sends G-1 blocks inside its node and W-G blocks across, at once, the
    // latter on its share of the node's NICs.
    const std::int64_t block_bytes = buffer_elems / world * elem_bytes;
    const double inside_ms = collective_ms(inside, (gpus - 1) * block_bytes, gpus);
    const double across_ms = collective_ms(link(across.busbw_gbps * nics / gpus),
                                           (world - gpus) * block_bytes, node_count);
    return {.ms = std::max(inside_ms, across_ms), .hierarchical = false};
  }
  LinkPreset ring = link(across.busbw_gbps * nics);
  if (gpus > 1) {
    ring.busbw_gbps = std::min(ring.busbw_gbps, inside.busbw_gbps);
    ring.alpha_us = std::max(ring.alpha_us, inside.alpha_us);
  }
  const CollectivePlan flat{.ms = collective_ms(ring, ring_bytes, world), .hierarchical = false};
  const bool splits = kind == CollectiveKind::AllReduce || kind == CollectiveKind::ReduceScatter ||
                      kind == CollectiveKind::AllGather;
  if (gpus == 1 || !splits) return flat;
  // Inside: a reduce_scatter or all_gather of the whole buffer among the node's ranks (the same
  // wire bytes). Across: each rank's 1/G of the buffer among the nodes, on its share of the NICs.
  const double inside_ms = collective_ms(
      inside, wire_bytes(CollectiveKind::AllGather, buffer_elems, elem_bytes, gpus), gpus);
  const double across_ms =
      collective_ms(link(across.busbw_gbps * nics / gpus),
                    wire_bytes(kind, buffer_elems / gpus, elem_bytes, node_count), node_count);
  const double tiers_ms =
      kind == CollectiveKind::AllReduce ? inside_ms + across_ms + inside_ms : inside_ms + across_ms;
  return tiers_ms < flat.ms ? CollectivePlan{.ms = tiers_ms, .hierarchical = true} : flat;
}

// G of `nodes` in a world of `world`, checked.
int gpus_of(const NodeLinks& nodes, int world) {
  const int gpus = ranks_per_node(world, nodes.gpus_per_node);
  ZL_CHECK(gpus >= 1 && world % gpus == 0,
           "{} GPUs a node do not divide a world of {}: pass a --gpus-per-node that divides it",
           gpus, world);
  ZL_CHECK(nodes.nics_per_node >= 0, "--nics-per-node {} is invalid: use 1 or more NICs a node",
           nodes.nics_per_node);
  return gpus;
}

}  // namespace

int nics_a_node(const NodeLinks& nodes, int world) {
  return nodes.nics_per_node == 0 ? gpus_of(nodes, world) : nodes.nics_per_node;
}

CollectivePlan plan_collective(const LinkPreset& inside, const NodeLinks& nodes,
                               CollectiveKind kind, std::int64_t buffer_elems,
                               std::int64_t elem_bytes, int world) {
  const int gpus = gpus_of(nodes, world);
  return plan_on_nodes(inside, nodes.across, nics_a_node(nodes, world), gpus, world / gpus, kind,
                       buffer_elems, elem_bytes);
}

CollectivePlan plan_group_collective(const LinkPreset& inside, const NodeLinks& nodes, int world,
                                     int group_ranks, int group_nodes, CollectiveKind kind,
                                     std::int64_t buffer_elems, std::int64_t elem_bytes) {
  const int gpus = gpus_of(nodes, world);
  ZL_CHECK(group_nodes >= 1 && group_ranks >= group_nodes && group_ranks % group_nodes == 0,
           "a group of {} ranks on {} nodes is not the same number of ranks on each", group_ranks,
           group_nodes);
  const int per_node = group_ranks / group_nodes;
  const double nics = static_cast<double>(nics_a_node(nodes, world)) * per_node / gpus;
  return plan_on_nodes(inside, nodes.across, nics, per_node, group_nodes, kind, buffer_elems,
                       elem_bytes);
}

}  // namespace zl
