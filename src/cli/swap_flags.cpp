// swap_flags.cpp — the `zerolab train` flags of the NVMe tier's swap files: how they move their
// bytes (DeepSpeed's aio section), whether the update streams them (offload_optimizer's
// pipeline_read, pipeline_write and buffer_count), and the parameters' swap buffers and what stays
// in host memory (offload_param's buffer_count, buffer_size and max_in_cpu).
#include <string>

#include "cli/train_flag_groups.hpp"
#include "core/io_queue.hpp"

namespace zl {

void add_swap_flags(CLI::App& cmd, TrainingFeatures& features) {
  cmd.add_option("--aio-block-size", features.aio.block_bytes,
                 "NVMe tier: bytes of each read or write of the swap files, a multiple of 4096 "
                 "(aio.block_size)")
      ->capture_default_str()
      ->type_name("BYTES");
  cmd.add_option("--aio-queue-depth", features.aio.queue_depth,
                 "NVMe tier: blocks in flight per thread (aio.queue_depth)")
      ->capture_default_str();
  cmd.add_option("--aio-thread-count", features.aio.thread_count,
                 "NVMe tier: submitting threads; queue depth x threads blocks are in flight "
                 "(aio.thread_count)")
      ->capture_default_str();
  cmd.add_option_function<std::string>(
         "--aio-backend",
         [&features](const std::string& name) {
           features.aio.backend = parse_io_backend(name, "--aio-backend");
         },
         "NVMe tier: io_uring | threads (a pool calling pread and pwrite) | auto (io_uring where "
         "the kernel allows it)")
      ->default_str("auto");
  cmd.add_flag("--pipeline-read", features.pipeline_read,
               "With --nvme-path: read the next unit's master and moments while one updates "
               "(offload_optimizer.pipeline_read)");
  cmd.add_flag("--pipeline-write", features.pipeline_write,
               "With --nvme-path: write a unit's master and moments back while the next updates "
               "(offload_optimizer.pipeline_write)");
  cmd.add_option("--swap-buffer-count", features.swap_buffer_count,
                 "With --pipeline-read or --pipeline-write: units whose master and moments may be "
                 "in host memory at once (offload_optimizer.buffer_count)")
      ->capture_default_str();
  cmd.add_option("--param-buffer-count", features.param_buffer_count,
                 "With --param-nvme-path: swap buffers in host memory the parameter shards pass "
                 "through; the next ones are read ahead and written back in them, 1: every read "
                 "and write waits (offload_param.buffer_count)")
      ->capture_default_str();
  cmd.add_option("--param-buffer-size", features.param_buffer_elems,
                 "With --param-nvme-path: elements a swap buffer holds at most; each unit's shard "
                 "on disk must fit (offload_param.buffer_size)")
      ->capture_default_str()
      ->type_name("ELEMS");
  cmd.add_option("--param-max-in-cpu", features.param_max_in_cpu_elems,
                 "With --param-nvme-path: elements of parameter shards kept in host memory, the "
                 "units in order while they fit, the rest on disk (offload_param.max_in_cpu; a "
                 "DeepSpeed config's default is 1e9)")
      ->capture_default_str()
      ->type_name("ELEMS");
}

}  // namespace zl
