// io_queue.cpp — IoQueue: requests cut into blocks on one list, taken by the backend's runner (a
// pool of pread/pwrite threads, or one thread driving an io_uring), each block in place when it is
// whole pages at a page boundary, else through a staging block of its own; a request ends when its
// last block does, and its time in flight is added to its direction's busy time when it was the
// last of that direction in flight.
#include "core/io_queue.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/huge_pages.hpp"
#include "core/steady_ms.hpp"

#ifdef ZL_HAVE_URING
#include <liburing.h>
#endif

namespace zl {

std::string_view io_backend_name(IoBackend backend) {
  switch (backend) {
    case IoBackend::Auto:
      return "auto";
    case IoBackend::IoUring:
      return "io_uring";
    case IoBackend::Threads:
      return "threads";
  }
  return "?";
}

void PageAlignedFree::operator()(std::byte* p) const {
  std::free(p);
}

PageAlignedBytes page_aligned_bytes(std::int64_t bytes, std::string_view what, bool huge_pages) {
  const auto size = static_cast<std::size_t>(bytes);
  const bool huge = huge_pages && size >= kHugePageBytes;
  const std::size_t alignment = huge ? kHugePageBytes : static_cast<std::size_t>(kPageBytes);
  const std::size_t padded =
      huge ? huge_page_padded(size) : static_cast<std::size_t>(page_padded(bytes));
  auto* p = static_cast<std::byte*>(std::aligned_alloc(alignment, padded));
  ZL_CHECK(p != nullptr, "no memory for {} bytes on whole pages: lower {}", bytes, what);
  if (huge) advise_huge_pages(p, padded);
  return PageAlignedBytes(p);
}

IoBackend parse_io_backend(std::string_view name, std::string_view flag) {
  for (const IoBackend backend : {IoBackend::Auto, IoBackend::IoUring, IoBackend::Threads}) {
    if (name == io_backend_name(backend)) return backend;
  }
  fail("{} '{}' is not known: use auto, io_uring or threads", flag, name);
}

void validate(const AioSettings& aio) {
  ZL_CHECK(aio.block_bytes >= kPageBytes && aio.block_bytes % kPageBytes == 0 &&
               aio.block_bytes <= (256ll << 20),
           "aio.block_size {} is not a multiple of 4096 between 4096 and 268435456 (256 MiB): "
           "O_DIRECT moves whole pages",
           aio.block_bytes);
  ZL_CHECK(aio.queue_depth >= 1 && aio.queue_depth <= 256, "aio.queue_depth {} is outside 1..256",
           aio.queue_depth);
  ZL_CHECK(aio.thread_count >= 1 && aio.thread_count <= 256,
           "aio.thread_count {} is outside 1..256", aio.thread_count);
}

namespace {

// One block of a request: `size` bytes of the caller's `data` at `offset`, moved as `size`
// padded to whole pages.
struct Block {
  IoTicket ticket = 0;
  IoDirection direction = IoDirection::Read;
  std::int64_t offset = 0;
  std::byte* data = nullptr;
  std::size_t size = 0;
  std::size_t padded_size() const {
    return static_cast<std::size_t>(page_padded(static_cast<std::int64_t>(size)));
  }
  // True when the caller's bytes are whole pages at a page boundary: O_DIRECT moves them in
  // place, without the staging copy.
  bool in_place() const {
    return reinterpret_cast<std::uintptr_t>(data) % kPageBytes == 0 && size % kPageBytes == 0;
  }
  // Where the block's bytes move from or to: the caller's bytes, or `staging`.
  std::byte* io_bytes(std::byte* staging) const { return in_place() ? data : staging; }
};

// Before a write that is not in place: the block's bytes into its staging block, the padding
// zeros.
void stage_in(const Block& block, std::byte* staging) {
  if (block.direction != IoDirection::Write || block.in_place()) return;
  std::memcpy(staging, block.data, block.size);
  std::memset(staging + block.size, 0, block.padded_size() - block.size);
}

// After a read that is not in place: the block's bytes out of its staging block.
void stage_out(const Block& block, const std::byte* staging) {
  if (block.direction == IoDirection::Read && !block.in_place()) {
    std::memcpy(block.data, staging, block.size);
  }
}

// What a call that moved `moved` bytes (or -errno) means: "" to go on, else the reason to stop.
std::string reason_of(ssize_t moved) {
  if (moved < 0) return std::strerror(static_cast<int>(-moved));
  if (moved == 0) return "it ends early (cut short)";
  return {};
}

bool retry(ssize_t moved) {
  return moved == -EINTR || moved == -EAGAIN;
}

// The one line a run asked for io_uring gets where it cannot have it.
[[noreturn]] void refuse_io_uring(std::string_view why) {
  fail("aio backend io_uring is not available here ({}): pass --aio-backend threads or auto", why);
}

}  // namespace

class IoQueue::Impl {
 public:
  Impl(int fd, const AioSettings& aio) : fd_(fd), aio_(aio) {
    validate(aio);
    // One allocation for every slot's staging block, so that small blocks share huge pages.
    staging_ = page_aligned_bytes(aio.block_bytes * aio.blocks_in_flight(), "aio.block_size");
    backend_ = aio.backend;
    if (backend_ != IoBackend::Threads && !start_uring()) {
      if (backend_ == IoBackend::IoUring) refuse_io_uring(uring_error_);
      say_fallback_once();
    }
    if (backend_ != IoBackend::IoUring) backend_ = IoBackend::Threads;
    if (backend_ == IoBackend::IoUring) {
      runners_.emplace_back([this] { run_uring(); });
    } else {
      for (int i = 0; i < aio.blocks_in_flight(); ++i) {
        runners_.emplace_back([this, i] { run_thread(staging(static_cast<std::size_t>(i))); });
      }
    }
  }

  ~Impl() {
    {
      std::unique_lock lock(mutex_);
      done_.wait(lock, [&] { return pending_.empty() && blocks_running_ == 0; });
      stop_ = true;
    }
    work_.notify_all();
    for (std::thread& runner : runners_) runner.join();
#ifdef ZL_HAVE_URING
    if (backend_ == IoBackend::IoUring) io_uring_queue_exit(&ring_);
#endif
  }

  IoTicket submit(IoDirection direction, std::int64_t offset, std::byte* data, std::size_t bytes) {
    ZL_CHECK(offset >= 0 && offset % kPageBytes == 0,
             "an I/O request at offset {} is not on a page", offset);
    std::lock_guard lock(mutex_);
    const IoTicket ticket = next_ticket_++;
    const auto block_size = static_cast<std::size_t>(aio_.block_bytes);
    Request& request = requests_[ticket];
    request.bytes = static_cast<std::int64_t>(bytes);
    for (std::size_t first = 0; first < bytes; first += block_size) {
      pending_.push_back(Block{.ticket = ticket,
                               .direction = direction,
                               .offset = offset + static_cast<std::int64_t>(first),
                               .data = data + first,
                               .size = std::min(block_size, bytes - first)});
      ++request.blocks_left;
    }
    if (request.blocks_left > 0) {
      Busy& busy = busy_[index(direction)];
      if (busy.requests++ == 0) busy.since_ms = steady_ms();
      work_.notify_all();
    }
    return ticket;
  }

  std::string wait(IoTicket ticket) {
    std::unique_lock lock(mutex_);
    const auto found = requests_.find(ticket);
    ZL_CHECK(found != requests_.end(), "I/O request {} is not in flight", ticket);
    done_.wait(lock, [&] { return found->second.blocks_left == 0; });
    std::string error = std::move(found->second.error);
    requests_.erase(found);
    return error;
  }

  IoBackend backend() const {
    return backend_;
  }

  IoTotals totals() const {
    std::lock_guard lock(mutex_);
    return totals_;
  }

 private:
  struct Request {
    std::int64_t bytes = 0;
    int blocks_left = 0;
    std::string error;  // the first block's that failed
  };
  struct Busy {
    int requests = 0;  // in flight
    double since_ms = 0.0;  // steady_ms() when the first of them started
  };

  static int index(IoDirection direction) {
    return direction == IoDirection::Read ? 0 : 1;
  }

  // The next block to move, or none when the queue stops; waits while there is none.
  bool take(Block& block) {
    std::unique_lock lock(mutex_);
    work_.wait(lock, [&] { return stop_ || !pending_.empty(); });
    if (pending_.empty()) return false;
    block = pending_.front();
    pending_.pop_front();
    ++blocks_running_;
    return true;
  }

  // Block `block` has ended (`error` empty: all its bytes moved); its request may have too.
  void finish(const Block& block, const std::string& error) {
    {
      std::lock_guard lock(mutex_);
      --blocks_running_;
      Request& request = requests_.at(block.ticket);
      if (!error.empty() && request.error.empty()) request.error = error;
      if (--request.blocks_left == 0) {
        const bool read = block.direction == IoDirection::Read;
        (read ? totals_.read_bytes : totals_.written_bytes) += request.bytes;
        Busy& busy = busy_[index(block.direction)];
        if (--busy.requests == 0) {
          (read ? totals_.read_ms : totals_.write_ms) += steady_ms() - busy.since_ms;
        }
      }
    }
    done_.notify_all();
  }

  // A pool thread: each block whole by pread or pwrite calls (either may move fewer bytes than
  // asked, or be interrupted) through `staging`.
  void run_thread(std::byte* staging) {
    Block block;
    while (take(block)) {
      stage_in(block, staging);
      std::byte* bytes = block.io_bytes(staging);
      const std::size_t size = block.padded_size();
      std::string error;
      for (std::size_t done = 0; done < size && error.empty();) {
        const off_t at = static_cast<off_t>(block.offset) + static_cast<off_t>(done);
        const ssize_t call = block.direction == IoDirection::Write
                                 ? ::pwrite(fd_, bytes + done, size - done, at)
                                 : ::pread(fd_, bytes + done, size - done, at);
        const ssize_t moved = call < 0 ? -errno : call;
        if (retry(moved)) continue;
        error = reason_of(moved);
        if (error.empty()) done += static_cast<std::size_t>(moved);
      }
      if (error.empty()) stage_out(block, staging);
      finish(block, error);
    }
  }

  static void say_fallback_once();
  bool start_uring();
  void run_uring();

  int fd_;
  AioSettings aio_;
  IoBackend backend_ = IoBackend::Threads;
  std::string uring_error_;
  // Slot i's staging block.
  std::byte* staging(std::size_t i) const {
    return staging_.get() + i * static_cast<std::size_t>(aio_.block_bytes);
  }

  PageAlignedBytes staging_;  // blocks_in_flight() blocks of aio_.block_bytes
  std::vector<std::thread> runners_;

  mutable std::mutex mutex_;
  std::condition_variable work_;  // a block to move, or stop
  std::condition_variable done_;  // a block ended
  std::deque<Block> pending_;
  std::map<IoTicket, Request> requests_;
  IoTicket next_ticket_ = 1;
  int blocks_running_ = 0;
  bool stop_ = false;
  Busy busy_[2];
  IoTotals totals_;
#ifdef ZL_HAVE_URING
  io_uring ring_{};
#endif
};

void IoQueue::Impl::say_fallback_once() {
  static std::once_flag said;
  std::call_once(said, [] {
    std::fputs(
        "zerolab: io_uring is not available here; swap files move their blocks by a pool of "
        "pread/pwrite threads (aio.thread_count x aio.queue_depth)\n",
        stderr);
  });
}

#ifdef ZL_HAVE_URING

std::optional<std::string> io_uring_unavailable() {
  io_uring ring{};
  const int made = io_uring_queue_init(1, &ring, 0);
  if (made != 0) return std::strerror(-made);
  io_uring_queue_exit(&ring);
  return std::nullopt;
}

bool IoQueue::Impl::start_uring() {
  const int made = io_uring_queue_init(static_cast<unsigned>(aio_.blocks_in_flight()), &ring_, 0);
  if (made == 0) {
    backend_ = IoBackend::IoUring;
    return true;
  }
  uring_error_ = std::strerror(-made);
  return false;
}

// One thread drives the ring: it fills each free slot with the next block and submits them, then
// reaps completions, submitting the rest of a block that moved fewer bytes than asked.
void IoQueue::Impl::run_uring() {
  struct Slot {
    Block block;
    std::size_t done = 0;  // bytes moved so far
    bool busy = false;
  };
  std::vector<Slot> slots(static_cast<std::size_t>(aio_.blocks_in_flight()));
  int in_flight = 0;
  const auto prepare = [&](std::size_t s) {
    Slot& slot = slots[s];
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    std::byte* at = slot.block.io_bytes(staging(s)) + slot.done;
    const auto size = static_cast<unsigned>(slot.block.padded_size() - slot.done);
    const auto offset = static_cast<std::uint64_t>(slot.block.offset) + slot.done;
    if (slot.block.direction == IoDirection::Write) {
      io_uring_prep_write(sqe, fd_, at, size, offset);
    } else {
      io_uring_prep_read(sqe, fd_, at, size, offset);
    }
    io_uring_sqe_set_data64(sqe, s);
  };
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      if (in_flight == 0) work_.wait(lock, [&] { return stop_ || !pending_.empty(); });
      if (in_flight == 0 && pending_.empty()) return;  // stopped
      for (std::size_t s = 0; s < slots.size() && !pending_.empty(); ++s) {
        if (slots[s].busy) continue;
        slots[s] = Slot{.block = pending_.front(), .done = 0, .busy = true};
        pending_.pop_front();
        ++blocks_running_;
        ++in_flight;
        stage_in(slots[s].block, staging(s));
        prepare(s);
      }
    }
    io_uring_submit(&ring_);
    io_uring_cqe* cqe = nullptr;
    if (const int waited = io_uring_wait_cqe(&ring_, &cqe); waited < 0) {
      if (retry(waited)) continue;
      // The ring itself failed: each block in it ends with the reason, for its waiter to say.
      for (Slot& slot : slots) {
        if (!slot.busy) continue;
        slot.busy = false;
        --in_flight;
        finish(slot.block, std::string("io_uring: ") + std::strerror(-waited));
      }
      continue;
    }
    bool resubmit = false;
    do {
      const auto s = static_cast<std::size_t>(io_uring_cqe_get_data64(cqe));
      const ssize_t moved = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      Slot& slot = slots[s];
      std::string error = retry(moved) ? std::string() : reason_of(moved);
      if (error.empty() && !retry(moved)) slot.done += static_cast<std::size_t>(moved);
      if (error.empty() && slot.done < slot.block.padded_size()) {
        prepare(s);
        resubmit = true;
        continue;
      }
      if (error.empty()) stage_out(slot.block, staging(s));
      slot.busy = false;
      --in_flight;
      finish(slot.block, error);
    } while (io_uring_peek_cqe(&ring_, &cqe) == 0);
    if (resubmit) io_uring_submit(&ring_);
  }
}

#else

std::optional<std::string> io_uring_unavailable() {
  return "this build has no liburing: apt-get install liburing-dev and build again";
}

bool IoQueue::Impl::start_uring() {
  uring_error_ = *io_uring_unavailable();
  return false;
}

void IoQueue::Impl::run_uring() {}

#endif

void check_io_backend(IoBackend backend) {
  if (backend != IoBackend::IoUring) return;
  if (const std::optional<std::string> why = io_uring_unavailable()) refuse_io_uring(*why);
}

IoQueue::IoQueue(int fd, const AioSettings& aio) : impl_(std::make_unique<Impl>(fd, aio)) {}

IoQueue::~IoQueue() = default;

IoTicket IoQueue::submit(IoDirection direction, std::int64_t offset, std::byte* data,
                         std::size_t bytes) {
  return impl_->submit(direction, offset, data, bytes);
}

std::string IoQueue::wait(IoTicket ticket) {
  return impl_->wait(ticket);
}

IoBackend IoQueue::backend() const {
  return impl_->backend();
}

IoTotals IoQueue::totals() const {
  return impl_->totals();
}

}  // namespace zl
