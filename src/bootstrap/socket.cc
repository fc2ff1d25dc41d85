#include "src/bootstrap/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "src/core/log.h"
#include "src/core/param.h"

namespace tempo::bootstrap {
namespace {

Status setNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return fail(Status::SystemError, "bootstrap: fcntl(O_NONBLOCK) failed: %s", strerror(errno));
  return Status::Success;
}

void tuneStream(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
}

// Waits for `events` on fd until the deadline. Returns Success when ready.
Status waitFd(int fd, short events, Deadline deadline, const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    int ms = deadline.remainingMs();
    int rc = ::poll(&p, 1, ms > 1000 ? 1000 : ms);
    if (rc > 0) return Status::Success;
    if (rc < 0 && errno != EINTR)
      return fail(Status::SystemError, "bootstrap: poll during %s failed: %s", what, strerror(errno));
    if (deadline.expired())
      return fail(Status::SystemError, "bootstrap: timed out during %s", what);
  }
}

}  // namespace

uint16_t SockAddr::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

void SockAddr::setPort(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
}

std::string SockAddr::toString() const {
  char host[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, host, sizeof host);
    std::string out = "[";  // appended, not "[" + string: GCC 12 warns falsely (-Wrestrict) on the latter
    out.append(host).append("]:").append(std::to_string(port()));
    return out;
  }
  return "<no address>";
}

bool SockAddr::sameHost(const SockAddr& o) const {
  if (family() != o.family()) return false;
  if (family() == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(&o.storage)->sin_addr.s_addr;
  if (family() == AF_INET6)
    return memcmp(&reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr,
                  &reinterpret_cast<const sockaddr_in6*>(&o.storage)->sin6_addr, 16) == 0;
  return false;
}

Result<SockAddr> SockAddr::parse(const std::string& text, bool numericOnly) {
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return fail(Status::InvalidArgument, "bootstrap: cannot parse address '%s'", text.c_str());
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0)
      return fail(Status::InvalidArgument, "bootstrap: address '%s' is not host:port", text.c_str());
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  char* end = nullptr;
  long p = strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 0 || p > 65535)
    return fail(Status::InvalidArgument, "bootstrap: bad port in address '%s'", text.c_str());
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (numericOnly) hints.ai_flags = AI_NUMERICHOST;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res)
    return fail(Status::InvalidArgument, "bootstrap: cannot resolve '%s': %s", host.c_str(),
                gai_strerror(rc));
  SockAddr a;
  memcpy(&a.storage, res->ai_addr, res->ai_addrlen);
  a.len = res->ai_addrlen;
  freeaddrinfo(res);
  a.setPort(uint16_t(p));
  return a;
}

bool interfaceMatches(const char* spec, const char* ifname) {
  bool exclude = spec[0] == '^';
  if (exclude) ++spec;
  bool exact = spec[0] == '=';
  if (exact) ++spec;
  bool matched = false;
  std::string list(spec);
  size_t pos = 0;
  while (pos <= list.size() && !matched) {
    size_t comma = list.find(',', pos);
    std::string tok = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!tok.empty())
      matched = exact ? tok == ifname : strncmp(ifname, tok.c_str(), tok.size()) == 0;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return exclude ? !matched : matched;
}

Result<SockAddr> selectInterfaceAddress() {
  static std::mutex mu;
  static bool done = false;
  static SockAddr chosen;
  std::lock_guard<std::mutex> lock(mu);
  if (done) return chosen;

  int wantFamily = AF_UNSPEC;
  const char* fam = param::SocketFamily();
  if (!strcasecmp(fam, "AF_INET")) wantFamily = AF_INET;
  else if (!strcasecmp(fam, "AF_INET6")) wantFamily = AF_INET6;
  else if (*fam) return fail(Status::InvalidArgument, "NCCL_SOCKET_FAMILY=%s is not AF_INET or AF_INET6", fam);

  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0)
    return fail(Status::SystemError, "bootstrap: getifaddrs failed: %s", strerror(errno));
  // With NCCL_SOCKET_IFNAME only its rule applies; otherwise try "^lo,docker" first and
  // fall back to loopback, as NCCL does. IPv4 is preferred over IPv6 within a pass.
  std::vector<std::string> passes;
  if (*param::SocketIfname()) passes.push_back(param::SocketIfname());
  else passes = {"^lo,docker", "lo"};
  bool found = false;
  for (const std::string& rule : passes) {
    for (int family : {AF_INET, AF_INET6}) {
      if (wantFamily != AF_UNSPEC && family != wantFamily) continue;
      for (ifaddrs* ifa = list; ifa && !found; ifa = ifa->ifa_next) {
        if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != family) continue;
        if (!(ifa->ifa_flags & IFF_UP)) continue;
        if (!interfaceMatches(rule.c_str(), ifa->ifa_name)) continue;
        if (family == AF_INET6) {
          auto* s6 = reinterpret_cast<sockaddr_in6*>(ifa->ifa_addr);
          if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr)) continue;  // needs a scope id to route
        }
        chosen.len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
        memcpy(&chosen.storage, ifa->ifa_addr, chosen.len);
        chosen.setPort(0);
        TEMPO_INFO(log::Init | log::Bootstrap, "Bootstrap: using %s:%s", ifa->ifa_name,
                   chosen.toString().c_str());
        found = true;
      }
      if (found) break;
    }
    if (found) break;
  }
  freeifaddrs(list);
  if (!found)
    return fail(Status::SystemError, "bootstrap: no network interface matches NCCL_SOCKET_IFNAME='%s'%s%s",
                param::SocketIfname(), *fam ? " and NCCL_SOCKET_FAMILY=" : "", fam);
  done = true;
  return chosen;
}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<Socket> Socket::listen(const SockAddr& addr, bool reuse) {
  Socket s(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return fail(Status::SystemError, "bootstrap: socket() failed: %s", strerror(errno));
  int one = 1;
  if (reuse) setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s.fd(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.len) != 0)
    return fail(Status::SystemError, "bootstrap: cannot listen on %s: %s", addr.toString().c_str(),
                strerror(errno));
  if (::listen(s.fd(), 16384) != 0)
    return fail(Status::SystemError, "bootstrap: listen() on %s failed: %s", addr.toString().c_str(),
                strerror(errno));
  TEMPO_TRY(setNonBlocking(s.fd()));
  return s;
}

Result<Socket> Socket::connect(const SockAddr& addr, Deadline deadline, const SockAddr* source, bool refusedIsFinal) {
  int64_t backoffUs = 1000;
  for (;;) {
    Socket s(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.valid()) return fail(Status::SystemError, "bootstrap: socket() failed: %s", strerror(errno));
    TEMPO_TRY(setNonBlocking(s.fd()));
    tuneStream(s.fd());
    if (source && source->family() == addr.family()) {
      SockAddr from = *source;
      from.setPort(0);
      if (::bind(s.fd(), reinterpret_cast<const sockaddr*>(&from.storage), from.len) != 0)
        return fail(Status::SystemError, "bootstrap: cannot connect from %s: %s", from.toString().c_str(),
                    strerror(errno));
    }
    int rc = ::connect(s.fd(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.len);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{s.fd(), POLLOUT, 0};
      int prc = ::poll(&p, 1, deadline.remainingMs());
      if (prc > 0) {
        socklen_t len = sizeof err;
        getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
      } else {
        err = prc == 0 ? ETIMEDOUT : errno;
      }
    }
    if (err == 0) return s;
    if (err == ECONNREFUSED && refusedIsFinal)
      return fail(Status::RemoteError, "bootstrap: %s refused the connection: the peer's listener is gone (its process "
                  "exited?)", addr.toString().c_str());
    bool retry = err == ECONNREFUSED || err == ETIMEDOUT || err == ECONNRESET || err == EAGAIN;
    if (!retry || deadline.expired())
      return fail(Status::SystemError, "bootstrap: cannot connect to %s: %s", addr.toString().c_str(), strerror(err));
    std::this_thread::sleep_for(std::chrono::microseconds(backoffUs));
    backoffUs = std::min<int64_t>(backoffUs * 2, 100000);
  }
}

Result<Socket> Socket::accept(Deadline deadline, SockAddr* peer) const {
  for (;;) {
    SockAddr from;
    from.len = sizeof from.storage;
    int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&from.storage), &from.len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      tuneStream(fd);
      if (peer) *peer = from;
      return Socket(fd);
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return fail(Status::SystemError, "bootstrap: accept() failed: %s", strerror(errno));
    if (deadline.expired()) return Status::Timeout;  // expected in polling loops: no log
    pollfd p{fd_, POLLIN, 0};
    int ms = deadline.remainingMs();
    ::poll(&p, 1, ms > 1000 ? 1000 : ms);
  }
}

Result<SockAddr> Socket::localAddress() const {
  SockAddr a;
  a.len = sizeof a.storage;
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&a.storage), &a.len) != 0)
    return fail(Status::SystemError, "bootstrap: getsockname failed: %s", strerror(errno));
  return a;
}

Status Socket::sendAll(std::span<const std::byte> data, Deadline deadline) const {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::send(fd_, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      TEMPO_TRY(waitFd(fd_, POLLOUT, deadline, "send"));
      continue;
    }
    return fail(Status::RemoteError, "bootstrap: send failed: %s", strerror(errno));
  }
  return Status::Success;
}

Status Socket::recvAll(std::span<std::byte> data, Deadline deadline) const {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::recv(fd_, data.data() + done, data.size() - done, 0);
    if (n > 0) {
      done += size_t(n);
      continue;
    }
    if (n == 0) return fail(Status::RemoteError, "bootstrap: connection closed by peer");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      TEMPO_TRY(waitFd(fd_, POLLIN, deadline, "receive"));
      continue;
    }
    return fail(Status::RemoteError, "bootstrap: recv failed: %s", strerror(errno));
  }
  return Status::Success;
}

bool Socket::peerClosed() const {
  if (fd_ < 0) return true;
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLRDHUP)) return true;
  char c;
  ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0;
}

Status exchange(const Socket& tx, std::span<const std::byte> out, const Socket& rx,
                std::span<std::byte> in, Deadline deadline, const std::atomic<bool>* abandon) {
  size_t sent = 0, got = 0;
  while (sent < out.size() || got < in.size()) {
    if (abandon && abandon->load(std::memory_order_acquire))
      return fail(Status::RemoteError, "bootstrap: a ring neighbour stopped responding (no heartbeat)");
    pollfd p[2];
    int np = 0, txi = -1, rxi = -1;
    if (sent < out.size()) { txi = np; p[np++] = {tx.fd(), POLLOUT, 0}; }
    if (got < in.size()) { rxi = np; p[np++] = {rx.fd(), POLLIN, 0}; }
    int ms = deadline.remainingMs();
    int rc = ::poll(p, nfds_t(np), ms > 1000 ? 1000 : ms);
    if (rc < 0 && errno != EINTR)
      return fail(Status::SystemError, "bootstrap: poll failed: %s", strerror(errno));
    if (rc <= 0) {
      if (deadline.expired()) return fail(Status::SystemError, "bootstrap: timed out exchanging with ring peers");
      continue;
    }
    if (txi >= 0 && p[txi].revents) {
      ssize_t n = ::send(tx.fd(), out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n > 0) sent += size_t(n);
      else if (n < 0 && errno != EAGAIN && errno != EINTR)
        return fail(Status::RemoteError, "bootstrap: send to ring peer failed: %s", strerror(errno));
    }
    if (rxi >= 0 && p[rxi].revents) {
      ssize_t n = ::recv(rx.fd(), in.data() + got, in.size() - got, 0);
      if (n > 0) got += size_t(n);
      else if (n == 0) return fail(Status::RemoteError, "bootstrap: ring peer closed the connection");
      else if (errno != EAGAIN && errno != EINTR)
        return fail(Status::RemoteError, "bootstrap: recv from ring peer failed: %s", strerror(errno));
    }
  }
  return Status::Success;
}

}  // namespace tempo::bootstrap
