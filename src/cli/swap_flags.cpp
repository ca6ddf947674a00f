// swap_flags.cpp — the `zerolab train` flags of the NVMe tier's swap files: how they move their
// bytes (DeepSpeed's aio section) and whether the update streams them (offload_optimizer's
// pipeline_read, pipeline_write and buffer_count).
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
}

}  // namespace zl
