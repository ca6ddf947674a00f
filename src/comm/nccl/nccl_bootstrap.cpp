// nccl_bootstrap.cpp — the environment variables, the id file and the TCP id server, each of which
// also carries the ranks' payloads to rank 0 and its settlement back. Every failure is one line
// naming the variable, path or address, and what to do.
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
#include <iterator>
#include <memory>
#include <optional>
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
// A payload or settlement longer than this is not one a zerolab rank sent.
constexpr std::uint64_t kMaxMessageBytes = std::uint64_t{1} << 24;

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

// A length (8 bytes, host order: every rank runs this zerolab) then the bytes.
bool send_message(int fd, const std::string& text) {
  const std::uint64_t size = text.size();
  return send_all(fd, reinterpret_cast<const char*>(&size), sizeof(size)) &&
         send_all(fd, text.data(), text.size());
}

std::optional<std::string> recv_message(int fd) {
  std::uint64_t size = 0;
  if (!recv_all(fd, reinterpret_cast<char*>(&size), sizeof(size)) || size > kMaxMessageBytes) {
    return std::nullopt;
  }
  std::string text(size, '\0');
  if (!recv_all(fd, text.data(), text.size())) return std::nullopt;
  return text;
}

std::string read_whole(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::filesystem::path payload_path(const std::filesystem::path& id_path, int rank) {
  return std::filesystem::path(id_path.string() + ".rank-" + std::to_string(rank));
}

// Rank 0 of the file bootstrap: every other rank's payload file, waited for until `deadline`,
// then removed.
std::vector<std::string> payloads_from_files(const NcclRankInfo& info,
                                             const std::filesystem::path& path,
                                             const BootstrapAgreement& agreement,
                                             std::chrono::steady_clock::time_point deadline,
                                             std::chrono::seconds timeout) {
  std::vector<std::string> payloads(static_cast<std::size_t>(info.world));
  payloads[0] = agreement.payload;
  for (int r = 1; r < info.world; ++r) {
    const std::filesystem::path from = payload_path(path, r);
    std::error_code error;
    while (!std::filesystem::is_regular_file(from, error)) {
      ZL_CHECK(std::chrono::steady_clock::now() < deadline,
               "rank 0: rank {}'s part of the bootstrap did not appear at {} within {} s: check "
               "that every rank started with the same ZL_NCCL_ID_FILE on a shared file system, or "
               "raise ZL_NCCL_TIMEOUT_S",
               r, from.string(), timeout.count());
      std::this_thread::sleep_for(kPollInterval);
    }
    payloads[static_cast<std::size_t>(r)] = read_whole(from);
    std::filesystem::remove(from, error);
  }
  return payloads;
}

}  // namespace

std::string settle_payloads(const BootstrapAgreement& agreement,
                            const std::vector<std::string>& payloads) {
  return agreement.settle ? agreement.settle(payloads) : std::string();
}

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

SettledId nccl_unique_id_from_file(const NcclRankInfo& info, const std::filesystem::path& path,
                                   std::chrono::seconds timeout,
                                   const BootstrapAgreement& agreement) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (info.rank == 0) {
    SettledId settled;
    settled.settled =
        settle_payloads(agreement, payloads_from_files(info, path, agreement, deadline, timeout));
    settled.id = new_unique_id();
    const std::array<std::span<const std::byte>, 2> pieces{
        std::as_bytes(std::span(settled.id.internal)),
        std::as_bytes(std::span(settled.settled.data(), settled.settled.size()))};
    write_file_atomically(path, pieces);
    return settled;
  }
  write_file_atomically(payload_path(path, info.rank), agreement.payload);
  while (true) {
    std::error_code error;
    if (std::filesystem::file_size(path, error) >= sizeof(ncclUniqueId)) {
      const std::string bytes = read_whole(path);  // written whole, by a rename
      if (bytes.size() >= sizeof(ncclUniqueId)) {
        SettledId settled;
        std::memcpy(settled.id.internal, bytes.data(), sizeof(settled.id.internal));
        settled.settled = bytes.substr(sizeof(settled.id.internal));
        return settled;
      }
    }
    ZL_CHECK(std::chrono::steady_clock::now() < deadline,
             "rank {}: rank 0's NCCL id did not appear at ZL_NCCL_ID_FILE={} within {} s: check "
             "that rank 0 started and that every rank sees the same path (a shared file system), "
             "or raise ZL_NCCL_TIMEOUT_S",
             info.rank, path.string(), timeout.count());
    std::this_thread::sleep_for(kPollInterval);
  }
}

SettledId nccl_unique_id_over_tcp(const NcclRankInfo& info, const std::string& host, int port,
                                  std::chrono::seconds timeout,
                                  const BootstrapAgreement& agreement) {
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
    // Every rank's payload first (each peer sends its rank, then its payload), then the id and
    // the settlement to each.
    std::vector<std::unique_ptr<Socket>> peers(static_cast<std::size_t>(info.world));
    std::vector<std::string> payloads(static_cast<std::size_t>(info.world));
    payloads[0] = agreement.payload;
    for (int joined = 1; joined < info.world; ++joined) {
      auto peer = std::make_unique<Socket>(::accept(server.fd(), nullptr, nullptr));
      ZL_CHECK(peer->fd() >= 0,
               "rank 0: {} of {} ranks connected on port {} (MASTER_PORT + 1) for the NCCL id, "
               "then: {}: check that every rank started with the same MASTER_ADDR and "
               "MASTER_PORT, or raise ZL_NCCL_TIMEOUT_S",
               joined - 1, info.world - 1, port, std::strerror(errno));
      std::int32_t rank = -1;
      const bool got_rank = recv_all(peer->fd(), reinterpret_cast<char*>(&rank), sizeof(rank));
      std::optional<std::string> payload = got_rank ? recv_message(peer->fd()) : std::nullopt;
      ZL_CHECK(payload && rank > 0 && rank < info.world &&
                   peers[static_cast<std::size_t>(rank)] == nullptr,
               "rank 0: a peer on port {} (MASTER_PORT + 1) sent no valid rank and payload (rank "
               "{} of world {}): check that only this job's ranks use MASTER_PORT",
               port, rank, info.world);
      payloads[static_cast<std::size_t>(rank)] = std::move(*payload);
      peers[static_cast<std::size_t>(rank)] = std::move(peer);
    }
    SettledId settled{new_unique_id(), settle_payloads(agreement, payloads)};
    for (int r = 1; r < info.world; ++r) {
      const int fd = peers[static_cast<std::size_t>(r)]->fd();
      ZL_CHECK(send_all(fd, settled.id.internal, sizeof(settled.id.internal)) &&
                   send_message(fd, settled.settled),
               "rank 0: sending the NCCL id to rank {} on port {} failed: the rank went away", r,
               port);
    }
    return settled;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    for (const addrinfo* address = addresses.get(); address != nullptr;
         address = address->ai_next) {
      Socket client(::socket(address->ai_family, address->ai_socktype, address->ai_protocol));
      if (client.fd() < 0 || ::connect(client.fd(), address->ai_addr, address->ai_addrlen) != 0) {
        continue;
      }
      const auto rank = static_cast<std::int32_t>(info.rank);
      if (!send_all(client.fd(), reinterpret_cast<const char*>(&rank), sizeof(rank)) ||
          !send_message(client.fd(), agreement.payload)) {
        continue;
      }
      SettledId settled;
      if (!recv_all(client.fd(), settled.id.internal, sizeof(settled.id.internal))) continue;
      if (auto text = recv_message(client.fd())) {
        settled.settled = std::move(*text);
        return settled;
      }
    }
    ZL_CHECK(std::chrono::steady_clock::now() < deadline,
             "rank {}: no NCCL id from rank 0 at MASTER_ADDR={} port {} (MASTER_PORT + 1) within "
             "{} s: check that rank 0 started and the address is reachable, or raise "
             "ZL_NCCL_TIMEOUT_S",
             info.rank, host, port, timeout.count());
    std::this_thread::sleep_for(kPollInterval);
  }
}

NcclBootstrap nccl_bootstrap_single(const BootstrapAgreement& agreement) {
  NcclBootstrap bootstrap;
  bootstrap.rank = {.rank = 0, .world = 1, .local_rank = 0};
  bootstrap.id = new_unique_id();
  bootstrap.settled = settle_payloads(agreement, {agreement.payload});
  return bootstrap;
}

NcclBootstrap nccl_bootstrap_from_env(const BootstrapAgreement& agreement) {
  NcclBootstrap bootstrap;
  bootstrap.rank = nccl_rank_from_env();
  const std::chrono::seconds timeout = nccl_bootstrap_timeout();
  if (const char* file = env_or_null("ZL_NCCL_ID_FILE")) {
    SettledId settled = nccl_unique_id_from_file(bootstrap.rank, file, timeout, agreement);
    bootstrap.id = settled.id;
    bootstrap.settled = std::move(settled.settled);
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
  SettledId settled =
      nccl_unique_id_over_tcp(bootstrap.rank, host, static_cast<int>(port) + 1, timeout, agreement);
  bootstrap.id = settled.id;
  bootstrap.settled = std::move(settled.settled);
  return bootstrap;
}

}  // namespace zl
