// io_queue.hpp — asynchronous reads and writes of one file, as DeepSpeed's aio moves
// ZeRO-Infinity's swap files: a request is cut into blocks of `aio.block_size` bytes, and up to
// `aio.queue_depth * aio.thread_count` blocks are in flight at once, through io_uring where the
// kernel allows it (liburing), else through a pool of threads calling pread and pwrite (a
// container's seccomp policy may forbid io_uring; the fallback is said once on stderr). A block of
// whole pages at a page boundary of the caller's memory moves in place; any other has a
// page-aligned staging block of its own while in flight, so O_DIRECT takes any caller's memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace zl {

/// How the blocks reach the disk.
enum class IoBackend : std::uint8_t {
  Auto,     ///< io_uring where the build has liburing and the kernel allows it, else Threads
  IoUring,  ///< io_uring, or zl::Error where it is not available
  Threads,  ///< a pool of threads, one block each, calling pread and pwrite
};

/// "auto", "io_uring" or "threads".
std::string_view io_backend_name(IoBackend backend);
/// The backend named `name`; zl::Error naming `flag` otherwise.
IoBackend parse_io_backend(std::string_view name, std::string_view flag);

/// The page: O_DIRECT moves whole ones, at offsets and from memory aligned to it.
inline constexpr std::int64_t kPageBytes = 4096;

/// `bytes` rounded up to whole pages.
inline std::int64_t page_padded(std::int64_t bytes) {
  return (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
}

/// Frees what page_aligned_bytes() returned.
struct PageAlignedFree {
  /// std::free.
  void operator()(std::byte* p) const;
};
/// Bytes on whole pages, as O_DIRECT moves them.
using PageAlignedBytes = std::unique_ptr<std::byte, PageAlignedFree>;
/// `bytes` bytes (a multiple of 4096) aligned to 4096, their contents unset; from 2 MiB up, unless
/// `huge_pages` is false, on huge pages where the kernel gives them (huge_pages.hpp). zl::Error in
/// one line naming `what` (what to lower) when there is no memory for them.
PageAlignedBytes page_aligned_bytes(std::int64_t bytes, std::string_view what,
                                    bool huge_pages = true);

/// DeepSpeed's `aio` section, as zerolab honours it.
struct AioSettings {
  /// Bytes of each read or write (aio.block_size): a multiple of 4096.
  std::int64_t block_bytes = 1 << 20;
  /// Blocks in flight per thread (aio.queue_depth).
  int queue_depth = 8;
  /// Submitting threads (aio.thread_count): with io_uring the ring holds queue_depth times this
  /// many blocks; with threads there are that many threads.
  int thread_count = 1;
  /// How the blocks reach the disk.
  IoBackend backend = IoBackend::Auto;

  /// Blocks in flight at once.
  int blocks_in_flight() const { return queue_depth * thread_count; }
};

/// Throws zl::Error in one line naming the aio key whose value is out of range: a block size that
/// is not a positive multiple of 4096 or over 256 MiB, a depth or thread count outside 1..256.
void validate(const AioSettings& aio);

/// Why this process cannot make an io_uring ring (the kernel's or a seccomp policy's refusal, or a
/// build without liburing), or nothing when it can.
std::optional<std::string> io_uring_unavailable();

/// Throws zl::Error in one line when `backend` is IoUring and io_uring is unavailable here, naming
/// why and the backends that work: the check a run makes before training, and IoQueue's own.
void check_io_backend(IoBackend backend);

/// Which way a request moves bytes.
enum class IoDirection : std::uint8_t { Read, Write };

/// Bytes a queue moved and the wall time its requests of each direction were in flight (the
/// union of their intervals: two reads at once count their time once).
struct IoTotals {
  std::int64_t read_bytes = 0;     ///< bytes read
  std::int64_t written_bytes = 0;  ///< bytes written
  double read_ms = 0.0;            ///< wall time with at least one read in flight
  double write_ms = 0.0;           ///< wall time with at least one write in flight
};

/// A request's handle: what wait() takes.
using IoTicket = std::int64_t;

/// The queue of one open file. Offsets and sizes of a request are the caller's; the last block of
/// a request is padded to whole pages (zeros written, the padding read and dropped), so a
/// request's range with its last page padded must lie in the file.
class IoQueue {
 public:
  /// A queue on `fd` (which it does not own, and which must outlive it) moving blocks as `aio`
  /// says. Throws zl::Error when `aio` is out of range or asks for io_uring where there is none.
  IoQueue(int fd, const AioSettings& aio);
  /// Waits for every request still in flight.
  ~IoQueue();
  IoQueue(const IoQueue&) = delete;
  IoQueue& operator=(const IoQueue&) = delete;

  /// Starts reading `bytes` bytes at `offset` (a multiple of 4096) into `data`, or writing them
  /// from it; `data` must stay valid, and untouched by the caller, until wait() returns.
  IoTicket submit(IoDirection direction, std::int64_t offset, std::byte* data, std::size_t bytes);
  /// Waits until the request `ticket` has moved all its bytes. Returns an empty string, or what
  /// went wrong ("No space left on device", "it ends early") for the caller to name the file.
  std::string wait(IoTicket ticket);

  /// The backend in use (never Auto).
  IoBackend backend() const;
  /// What the queue has moved so far (requests that ended).
  IoTotals totals() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zl
