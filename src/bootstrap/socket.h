// TCP sockets for the out-of-band bootstrap (never the data path).
//
// Every blocking operation takes a Deadline and fails with Status::SystemError (with the
// exact cause in the last error) when it passes; nothing here waits forever. Sockets are
// nonblocking underneath and waited on with poll(), so a silent or slow peer costs its
// deadline and nothing more.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "src/core/clock.h"
#include "src/core/status.h"

namespace tempo::bootstrap {

// An IPv4 or IPv6 socket address, trivially copyable so it can travel in messages.
struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;

  int family() const { return storage.ss_family; }
  uint16_t port() const;
  void setPort(uint16_t port);
  std::string toString() const;  // "1.2.3.4:567" or "[::1]:567"
  bool sameHost(const SockAddr& other) const;  // equal IP, any port
  // Parses "host:port", "[v6]:port" or "v6:port"; resolves names with getaddrinfo, or with
  // `numericOnly` refuses them without asking a resolver.
  static Result<SockAddr> parse(const std::string& text, bool numericOnly = false);
};

// The address bootstrap listeners bind to: NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY rules,
// default "^lo,docker" then loopback, as NCCL chooses. Cached after the first call.
Result<SockAddr> selectInterfaceAddress();
// The interface selection rule itself (exposed for tests): does `ifname` pass `spec`?
bool interfaceMatches(const char* spec, const char* ifname);

// A move-only owner of one socket file descriptor.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  void close();

  // Binds and listens on `addr` (port 0 picks one); `reuse` sets SO_REUSEADDR so a fixed
  // NCCL_COMM_ID port can be reused after a previous job.
  static Result<Socket> listen(const SockAddr& addr, bool reuse);
  // Connects, retrying refused connections until the deadline (the peer may not be
  // listening yet) unless `refusedIsFinal` (a peer known to have been listening that now
  // refuses is gone). With `source` (of addr's family; its port is ignored), the connection
  // leaves from that address, so that the peer sees the one this process claims as its own.
  static Result<Socket> connect(const SockAddr& addr, Deadline deadline, const SockAddr* source = nullptr,
                                bool refusedIsFinal = false);
  // Accepts one connection, waiting until the deadline (Status::Timeout when it passes).
  // The accepted socket is nonblocking, with TCP_NODELAY and keepalive set.
  Result<Socket> accept(Deadline deadline, SockAddr* peer = nullptr) const;
  Result<SockAddr> localAddress() const;

  Status sendAll(std::span<const std::byte> data, Deadline deadline) const;
  Status recvAll(std::span<std::byte> data, Deadline deadline) const;
  // True once the peer has closed or reset the connection (nonblocking check).
  bool peerClosed() const;

 private:
  int fd_ = -1;
};

// Sends `out` on `tx` while receiving `in` on `rx`, progressing both so that a ring of
// ranks exchanging large blocks cannot deadlock on full socket buffers. With `abandon`,
// also gives up (ncclRemoteError) once it turns true, checked at least once a second.
Status exchange(const Socket& tx, std::span<const std::byte> out, const Socket& rx,
                std::span<std::byte> in, Deadline deadline, const std::atomic<bool>* abandon = nullptr);

}  // namespace tempo::bootstrap
