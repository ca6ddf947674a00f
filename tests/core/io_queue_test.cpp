// io_queue_test.cpp — the swap files' asynchronous I/O: requests of any size, many in flight,
// move their bytes exactly through io_uring and through the thread pool, with and without
// O_DIRECT; a file that ends early or a descriptor that cannot write is the request's error; the
// busy time counts overlapping requests once; out-of-range aio settings are one line each.
#include "core/io_queue.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/swap_file.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;

std::string error_of(const auto& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

// The backends this machine has: the thread pool always, io_uring where it is allowed.
std::vector<IoBackend> backends() {
  std::vector<IoBackend> out = {IoBackend::Threads};
  const int fd = ::open("/dev/null", O_RDONLY);
  try {
    IoQueue probe(
        fd,
        {.block_bytes = 4096, .queue_depth = 1, .thread_count = 1, .backend = IoBackend::IoUring});
    out.push_back(IoBackend::IoUring);
  } catch (const Error&) {
  }
  ::close(fd);
  return out;
}

class IoQueueTest : public ::testing::Test {
 protected:
  IoQueueTest() {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    direct_ = try_direct_io(fd_);
    EXPECT_EQ(::ftruncate(fd_, kFileBytes), 0);
  }
  ~IoQueueTest() override {
    ::close(fd_);
    fs::remove(path_);
  }

  static constexpr std::int64_t kFileBytes = 8 << 20;
  const fs::path path_ =
      fs::temp_directory_path() / ("zl_io_queue_test_" + std::to_string(::getpid()));
  int fd_ = -1;
  bool direct_ = false;
};

// `bytes` bytes `shift` bytes past a page boundary (0: whole pages move in place, without the
// staging copy), each set to `fill`.
struct ShiftedBytes {
  ShiftedBytes(std::size_t bytes, std::size_t shift, std::byte fill)
      : base(page_aligned_bytes(page_padded(static_cast<std::int64_t>(bytes + shift)), "test")),
        view(base.get() + shift, bytes) {
    std::ranges::fill(view, fill);
  }
  PageAlignedBytes base;
  std::span<std::byte> view;
};

// Requests of odd sizes (a block and a bit, under a page, many blocks), all in flight at once,
// from and into memory at a page boundary (whole blocks move in place) and past one (every block
// through staging), written and read back at page offsets: every byte as it was, the padding
// dropped.
TEST_F(IoQueueTest, ManyRequestsInFlightMoveEveryByteOnEachBackend) {
  const std::vector<std::size_t> sizes = {65536 + 17, 100, 5 * 65536, 4096, 300001, 3 * 65536};
  for (const IoBackend backend : backends()) {
    for (const std::size_t shift : {0, 8}) {
      IoQueue queue(
          fd_, {.block_bytes = 65536, .queue_depth = 2, .thread_count = 2, .backend = backend});
      EXPECT_EQ(queue.backend(), backend);
      std::vector<ShiftedBytes> data;
      std::vector<std::int64_t> offsets;
      std::int64_t offset = 0;
      for (std::size_t r = 0; r < sizes.size(); ++r) {
        data.emplace_back(sizes[r], shift, std::byte{0});
        for (std::size_t i = 0; i < sizes[r]; ++i) {
          data[r].view[i] =
              static_cast<std::byte>((i * 31 + r * 7 + shift + static_cast<int>(backend)) & 0xff);
        }
        offsets.push_back(offset);
        offset += page_padded(static_cast<std::int64_t>(sizes[r]));
      }
      std::vector<IoTicket> tickets;
      for (std::size_t r = 0; r < sizes.size(); ++r) {
        tickets.push_back(
            queue.submit(IoDirection::Write, offsets[r], data[r].view.data(), sizes[r]));
      }
      for (const IoTicket ticket : tickets) EXPECT_EQ(queue.wait(ticket), "");
      std::vector<ShiftedBytes> back;
      tickets.clear();
      for (std::size_t r = 0; r < sizes.size(); ++r) {
        back.emplace_back(sizes[r], shift, std::byte{0xee});
        tickets.push_back(
            queue.submit(IoDirection::Read, offsets[r], back[r].view.data(), sizes[r]));
      }
      for (const IoTicket ticket : tickets) EXPECT_EQ(queue.wait(ticket), "");
      for (std::size_t r = 0; r < sizes.size(); ++r) {
        EXPECT_TRUE(std::ranges::equal(back[r].view, data[r].view))
            << "request " << r << " on " << io_backend_name(backend) << ", " << shift
            << " bytes past a page" << (direct_ ? " (O_DIRECT)" : "");
      }
      std::int64_t total = 0;
      for (const std::size_t size : sizes) total += static_cast<std::int64_t>(size);
      const IoTotals totals = queue.totals();
      EXPECT_EQ(totals.written_bytes, total);
      EXPECT_EQ(totals.read_bytes, total);
    }
  }
}

// Eight requests at once: the reads' busy time is the wall time with any in flight, at most the
// time from the first submit to the last wait (their latencies summed would be more).
TEST_F(IoQueueTest, OverlappingRequestsCountTheirTimeOnce) {
  for (const IoBackend backend : backends()) {
    IoQueue queue(
        fd_, {.block_bytes = 1 << 20, .queue_depth = 8, .thread_count = 1, .backend = backend});
    std::vector<std::vector<std::byte>> buffers(8, std::vector<std::byte>(1 << 20));
    const auto started = std::chrono::steady_clock::now();
    std::vector<IoTicket> tickets;
    for (std::size_t r = 0; r < buffers.size(); ++r) {
      tickets.push_back(queue.submit(IoDirection::Read, static_cast<std::int64_t>(r) << 20,
                                     buffers[r].data(), buffers[r].size()));
    }
    for (const IoTicket ticket : tickets) EXPECT_EQ(queue.wait(ticket), "");
    const double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    const IoTotals totals = queue.totals();
    EXPECT_GT(totals.read_ms, 0.0);
    EXPECT_LE(totals.read_ms, wall_ms) << io_backend_name(backend);
    EXPECT_EQ(totals.write_ms, 0.0);
  }
}

// Reading past the file's end is "it ends early"; writing through a read-only descriptor is the
// system's reason. The queue goes on serving requests after either.
TEST_F(IoQueueTest, AFailedRequestSaysWhyAndTheQueueGoesOn) {
  std::vector<std::byte> block(8192);
  const int read_only = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  for (const IoBackend backend : backends()) {
    IoQueue queue(fd_,
                  {.block_bytes = 4096, .queue_depth = 2, .thread_count = 1, .backend = backend});
    EXPECT_EQ(queue.wait(queue.submit(IoDirection::Read, kFileBytes, block.data(), 4096)),
              "it ends early (cut short)")
        << io_backend_name(backend);
    EXPECT_EQ(queue.wait(queue.submit(IoDirection::Read, 0, block.data(), block.size())), "");
    IoQueue cannot_write(
        read_only, {.block_bytes = 4096, .queue_depth = 1, .thread_count = 1, .backend = backend});
    EXPECT_EQ(cannot_write.wait(cannot_write.submit(IoDirection::Write, 0, block.data(), 4096)),
              std::strerror(EBADF))
        << io_backend_name(backend);
  }
  ::close(read_only);
}

TEST(AioSettingsTest, OutOfRangeSettingsAreOneLineEach) {
  EXPECT_EQ(error_of([] { validate(AioSettings{.block_bytes = 1000}); }),
            "aio.block_size 1000 is not a multiple of 4096 between 4096 and 268435456 (256 MiB): "
            "O_DIRECT moves whole pages");
  EXPECT_EQ(error_of([] { validate(AioSettings{.queue_depth = 0}); }),
            "aio.queue_depth 0 is outside 1..256");
  EXPECT_EQ(error_of([] { validate(AioSettings{.thread_count = 300}); }),
            "aio.thread_count 300 is outside 1..256");
  EXPECT_EQ(parse_io_backend("io_uring", "--aio-backend"), IoBackend::IoUring);
  EXPECT_EQ(error_of([] { parse_io_backend("aio", "--aio-backend"); }),
            "--aio-backend 'aio' is not known: use auto, io_uring or threads");
}

}  // namespace
}  // namespace zl
