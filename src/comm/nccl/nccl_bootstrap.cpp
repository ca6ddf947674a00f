// nccl_bootstrap.cpp — the environment variables, the id file and the TCP id server. Every failure
// is one line naming the variable, path or address, and what to do.
#include "comm/nccl/nccl_bootstrap.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <span>
#include <string_view>
#include <thread>

#include "comm/nccl/nccl_library.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"

namespace zl {

namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(50);
constexpr std::int64_t kDefaultTimeoutSeconds = 120;

const char* env_or_null(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// The integer value of environment variable `name` (which must be set).
std::int64_t env_int(const char* name, const char* what_to_do) {
  const char* value = env_or_null(name);
  ZL_CHECK(value != nullptr, "environment variable {} is not set: {}", name, what_to_do);
  const std::string_view text(value);
  std::int64_t parsed = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), parsed);
  ZL_CHECK(error == std::errc() && end == text.data() + text.size(),
           "environment variable {}={} is not an integer: {}", name, text, what_to_do);
  return parsed;
}

ncclUniqueId new_unique_id() {
  ncclUniqueId id{};
  const ncclResult_t status = nccl().GetUniqueId(&id);
  ZL_CHECK(status == ncclSuccess, "NCCL call ncclGetUniqueId failed: {}",
           nccl().GetErrorString(status));
  return id;
}

// A socket that closes itself.
class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

// Sends or receives exactly `bytes`; false when the peer went away.
bool send_all(int fd, const char* data, std::size_t bytes) {
  while (bytes > 0) {
    const ssize_t sent = ::send(fd, data, bytes, MSG_NOSIGNAL);
    if (sent <= 0) {
      if (sent < 0 && errno == EINTR) continue;
      return false;
    }
    data += sent;
    bytes -= static_cast<std::size_t>(sent);
  }
  return true;
}

bool recv_all(int fd, char* data, std::size_t bytes) {
  while (bytes > 0) {
    const ssize_t got = ::recv(fd, data, bytes, 0);
    if (got <= 0) {
      if (got < 0 && errno == EINTR) continue;
      return false;
    }
    data += got;
    bytes -= static_cast<std::size_t>(got);
  }
  return true;
}

}  // namespace

NcclRankInfo nccl_rank_from_env() {
  constexpr const char* kHint =
      "launch with torchrun, or set RANK, WORLD_SIZE and LOCAL_RANK for every process";
  const std::int64_t world = env_int("WORLD_SIZE", kHint);
  ZL_CHECK(world >= 1 && world <= 1 << 20, "environment variable WORLD_SIZE={} is out of range: {}",
           world, kHint);
  const std::int64_t rank = env_int("RANK", kHint);
  ZL_CHECK(rank >= 0 && rank < world,
           "environment variable RANK={} is out of range for WORLD_SIZE={}: use 0..{}", rank, world,
           world - 1);
  const std::int64_t local_rank = env_int("LOCAL_RANK", kHint);
  ZL_CHECK(local_rank >= 0 && local_rank < 1 << 20,
           "environment variable LOCAL_RANK={} is out of range: use this process's GPU index on "
           "its node, 0 and up",
           local_rank);
  return {static_cast<int>(rank), static_cast<int>(world), static_cast<int>(local_rank)};
}

std::chrono::seconds nccl_bootstrap_timeout() {
  if (env_or_null("ZL_NCCL_TIMEOUT_S") == nullptr)
    return std::chrono::seconds(kDefaultTimeoutSeconds);
  const std::int64_t seconds =
      env_int("ZL_NCCL_TIMEOUT_S", "set it to a whole number of seconds, or unset it for 120");
  ZL_CHECK(seconds >= 1,
           "environment variable ZL_NCCL_TIMEOUT_S={} is not positive: set it to a "
           "whole number of seconds, or unset it for 120",
           seconds);
  return std::chrono::seconds(seconds);
}

ncclUniqueId nccl_unique_id_from_file(const NcclRankInfo& info, const std::filesystem::path& path,
                                      std::chrono::seconds timeout) {
  if (info.rank == 0) {
    const ncclUniqueId id = new_unique_id();
    const std::array<std::span<const std::byte>, 1> pieces{std::as_bytes(std::span(id.internal))};
    write_file_atomically(path, pieces);
    return id;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    std::error_code error;
    if (std::filesystem::file_size(path, error) == sizeof(ncclUniqueId)) {
      std::ifstream in(path, std::ios::binary);
      ncclUniqueId id{};
      if (in.read(id.internal, sizeof(id.internal))) return id;
    }
    ZL_CHECK(std::chrono::steady_clock::now() < deadline,
             "rank {}: rank 0's NCCL id did not appear at ZL_NCCL_ID_FILE={} within {} s: check "
             "that rank 0 started and that every rank sees the same path (a shared file system), "
             "or raise ZL_NCCL_TIMEOUT_S",
             info.rank, path.string(), timeout.count());
    std::this_thread::sleep_for(kPollInterval);
  }
}

ncclUniqueId nccl_unique_id_over_tcp(const NcclRankInfo& info, const std::string& host, int port,
                                     std::chrono::seconds timeout) {
  const std::string port_text = std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (info.rank == 0) hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const int lookup =
      ::getaddrinfo(info.rank == 0 ? nullptr : host.c_str(), port_text.c_str(), &hints, &found);
  ZL_CHECK(lookup == 0, "rank {}: cannot resolve MASTER_ADDR={} (port {}): {}", info.rank, host,
           port, ::gai_strerror(lookup));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, ::freeaddrinfo);

  if (info.rank == 0) {
    const ncclUniqueId id = new_unique_id();
    Socket server(::socket(addresses->ai_family, addresses->ai_socktype, addresses->ai_protocol));
    ZL_CHECK(server.fd() >= 0, "rank 0: cannot open a socket for the NCCL id: {}",
             std::strerror(errno));
    const int reuse = 1;
    ::setsockopt(server.fd(), SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof(reuse));
    // accept() gives up after the timeout too, so a rank that never comes is an error, not a hang.
    const timeval wait_limit{.tv_sec = static_cast<time_t>(timeout.count()), .tv_usec = 0};
    ::setsockopt(server.fd(), SOL_SOCKET, SO_RCVTIMEO, &wait_limit, sizeof(wait_limit));
    ZL_CHECK(::bind(server.fd(), addresses->ai_addr, addresses->ai_addrlen) == 0 &&
                 ::listen(server.fd(), info.world) == 0,
             "rank 0: cannot listen on port {} (MASTER_PORT + 1) for the NCCL id: {}: choose "
             "another MASTER_PORT",
             port, std::strerror(errno));
    for (int served = 1; served < info.world; ++served) {
      Socket peer(::accept(server.fd(), nullptr, nullptr));
      ZL_CHECK(peer.fd() >= 0,
               "rank 0: {} of {} ranks connected on port {} (MASTER_PORT + 1) for the NCCL id, "
               "then: {}: check that every rank started with the same MASTER_ADDR and "
               "MASTER_PORT, or raise ZL_NCCL_TIMEOUT_S",
               served - 1, info.world - 1, port, std::strerror(errno));
      ZL_CHECK(send_all(peer.fd(), id.internal, sizeof(id.internal)),
               "rank 0: sending the NCCL id on port {} failed: a rank went away", port);
    }
    return id;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    for (const addrinfo* address = addresses.get(); address != nullptr;
         address = address->ai_next) {
      Socket client(::socket(address->ai_family, address->ai_socktype, address->ai_protocol));
      if (client.fd() < 0 || ::connect(client.fd(), address->ai_addr, address->ai_addrlen) != 0) {
        continue;
      }
      ncclUniqueId id{};
      if (recv_all(client.fd(), id.internal, sizeof(id.internal))) return id;
    }
    ZL_CHECK(std::chrono::steady_clock::now() < deadline,
             "rank {}: no NCCL id from rank 0 at MASTER_ADDR={} port {} (MASTER_PORT + 1) within "
             "{} s: check that rank 0 started and the address is reachable, or raise "
             "ZL_NCCL_TIMEOUT_S",
             info.rank, host, port, timeout.count());
    std::this_thread::sleep_for(kPollInterval);
  }
}

NcclBootstrap nccl_bootstrap_single() {
  NcclBootstrap bootstrap;
  bootstrap.rank = {.rank = 0, .world = 1, .local_rank = 0};
  bootstrap.id = new_unique_id();
  return bootstrap;
}

NcclBootstrap nccl_bootstrap_from_env() {
  NcclBootstrap bootstrap;
  bootstrap.rank = nccl_rank_from_env();
  const std::chrono::seconds timeout = nccl_bootstrap_timeout();
  if (const char* file = env_or_null("ZL_NCCL_ID_FILE")) {
    bootstrap.id = nccl_unique_id_from_file(bootstrap.rank, file, timeout);
    if (bootstrap.rank.rank == 0) bootstrap.id_file_to_remove = file;
    return bootstrap;
  }
  const char* host = env_or_null("MASTER_ADDR");
  ZL_CHECK(host != nullptr && env_or_null("MASTER_PORT") != nullptr,
           "neither ZL_NCCL_ID_FILE nor MASTER_ADDR and MASTER_PORT is set: set ZL_NCCL_ID_FILE "
           "to a fresh path every rank sees, or MASTER_ADDR and MASTER_PORT as torchrun does");
  const std::int64_t port = env_int("MASTER_PORT", "set it to a TCP port, 1..65534");
  ZL_CHECK(port >= 1 && port <= 65534,
           "environment variable MASTER_PORT={} is out of range: use 1..65534", port);
  bootstrap.id = nccl_unique_id_over_tcp(bootstrap.rank, host, static_cast<int>(port) + 1, timeout);
  return bootstrap;
}

}  // namespace zl
