// transport_perf: point-to-point latency and bandwidth of one Tempo transport endpoint,
// the layer under the collectives, in the shape ucx_perftest and fi_pingpong measure theirs.
//
//   transport_perf -t shm|ofi|ucx [-p provider] [-b 8] [-e 4M] [-f 2] [-n 10000] [-w 100]
//                  [-W 16] [-c 0,1]
//
// The program forks: the parent is rank 0, the child rank 1, each pinned to a CPU of -c
// (default 0 and 1, as ucx_perftest -c), and the two swap transport addresses over a
// socketpair. Per size:
//   latency   ping-pong; one-way time = round trip / 2, average over the iterations and
//             the median of the per-iteration samples (ucx_perftest tag_lat reports both;
//             fi_pingpong's usec/xfer is the average)
//   pingpong  size / average one-way time, in MB/s (10^6 bytes), fi_pingpong's MB/sec
//   stream    rank 0 keeps -W sends outstanding, rank 1 as many receives (all on one
//             buffer, as ucx_perftest's), then one ack:
//             bytes / time, in MB/s (ucx_perftest tag_bw's MB/s is 2^20 bytes per second;
//             bench/compare_p2p.sh converts)
// -p names the libfabric provider (tcp, shm; default tcp). UCX reads UCX_TLS and its other
// variables itself; its endpoint is created as a communicator creates one for a peer on
// this host (no peer error handling), or with -H as for a peer on another host.
// Iterations scale down with size, so that no size moves more than 1 GiB per direction.
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/common/options.h"
#include "src/core/clock.h"
#include "src/core/status.h"
#include "transports/shm/shm.h"
#include "transports/transport.h"
#ifdef TEMPO_HAVE_OFI
#include "transports/ofi/ofi.h"
#endif
#ifdef TEMPO_HAVE_UCX
#include "transports/ucx/ucx.h"
#endif

namespace {

using tempo::Status;
using tempo::transport::Endpoint;
using tempo::transport::Request;

struct Args {
  std::string transport = "shm";
  std::string provider = "tcp";
  size_t minBytes = 8, maxBytes = 4 << 20, factor = 2;
  int iters = 10000, warmup = 100, window = 16;
  int cpu[2] = {0, 1};
  bool remote = false;  // -H
};

[[noreturn]] void usage(int code) {
  fprintf(code ? stderr : stdout,
          "usage: transport_perf -t shm|ofi|ucx [-p provider] [-b minbytes] [-e maxbytes] [-f factor]\n"
          "                      [-n iters] [-w warmup] [-W window] [-c cpu0,cpu1] [-H]\n");
  exit(code);
}

Args parse(int argc, char** argv) {
  Args a;
  int c;
  auto size = [](const char* s) {
    double v = tempo::bench::parseSize(s);
    if (v < 0) usage(2);
    return size_t(v);
  };
  while ((c = getopt(argc, argv, "t:p:b:e:f:n:w:W:c:Hh")) != -1) {
    switch (c) {
      case 't': a.transport = optarg; break;
      case 'p': a.provider = optarg; break;
      case 'b': a.minBytes = size(optarg); break;
      case 'e': a.maxBytes = size(optarg); break;
      case 'f': a.factor = std::max<size_t>(2, size(optarg)); break;
      case 'n': a.iters = std::max(1, atoi(optarg)); break;
      case 'w': a.warmup = std::max(0, atoi(optarg)); break;
      case 'W': a.window = std::clamp(atoi(optarg), 1, 256); break;
      case 'c':
        if (sscanf(optarg, "%d,%d", &a.cpu[0], &a.cpu[1]) != 2) usage(2);
        break;
      case 'H': a.remote = true; break;
      case 'h': usage(0);
      default: usage(2);
    }
  }
  if (a.minBytes > a.maxBytes) usage(2);
  return a;
}

tempo::Result<std::unique_ptr<Endpoint>> open(const Args& a, int rank) {
  if (a.transport == "shm") return tempo::transport::shm::create(rank, 2, 1);
#ifdef TEMPO_HAVE_OFI
  if (a.transport == "ofi") return tempo::transport::ofi::create(a.provider, rank, 2);
#endif
#ifdef TEMPO_HAVE_UCX
  if (a.transport == "ucx") return tempo::transport::ucx::create(rank, 2, {.tls = "", .sameHost = {!a.remote, !a.remote}, .netDevices = {}});
#endif
  return tempo::fail(Status::InvalidArgument, "transport '%s' is not built in", a.transport.c_str());
}

bool sendAll(int fd, const void* p, size_t n) {
  for (size_t done = 0; done < n;) {
    ssize_t k = write(fd, static_cast<const char*>(p) + done, n - done);
    if (k <= 0) return false;
    done += size_t(k);
  }
  return true;
}
bool recvAll(int fd, void* p, size_t n) {
  for (size_t done = 0; done < n;) {
    ssize_t k = read(fd, static_cast<char*>(p) + done, n - done);
    if (k <= 0) return false;
    done += size_t(k);
  }
  return true;
}

// One rank's side of the measurement; rank 0 prints.
class Side {
 public:
  Side(const Args& a, int rank, int ctl) : a_(a), rank_(rank), peer_(1 - rank), ctl_(ctl) {}

  int run() {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(a_.cpu[rank_], &set);
    sched_setaffinity(0, sizeof set, &set);  // best effort, as ucx_perftest -c
    auto made = open(a_, rank_);
    if (!made.ok()) return error("open");
    ep_ = std::move(made.value());
    // Swap addresses over the socketpair: length, then bytes.
    auto mine = ep_->address();
    const uint32_t len = uint32_t(mine.size());
    uint32_t theirLen = 0;
    if (!sendAll(ctl_, &len, 4) || !sendAll(ctl_, mine.data(), len) || !recvAll(ctl_, &theirLen, 4) ||
        theirLen > tempo::transport::kMaxAddressBytes)
      return error("address exchange");
    std::vector<std::byte> theirs(theirLen);
    if (!recvAll(ctl_, theirs.data(), theirLen)) return error("address exchange");
    if (ep_->connect(peer_, theirs) != Status::Success) return error("connect");

    // Page-aligned, as the transports' own tools allocate theirs.
    const size_t half = (a_.maxBytes + 4096) / 4096 * 4096, bufBytes = 2 * half;  // send, receive
    std::unique_ptr<unsigned char, decltype(&free)> buf(static_cast<unsigned char*>(aligned_alloc(4096, bufBytes)), &free);
    if (!buf) return error("allocation");
    memset(buf.get(), 0x5a, bufBytes);
    if (rank_ == 0) {
      printf("# transport_perf: %s, rank 0 -> rank 1 via %s, CPUs %d and %d\n", ep_->name(),
             ep_->describePeer(1).c_str(), a_.cpu[0], a_.cpu[1]);
      printf("# latency: ping-pong, one-way = round trip / 2; pingpong = size / one-way; stream: %d sends in flight\n",
             a_.window);
      printf("# %10s %8s %12s %12s %14s %12s\n", "size(B)", "iters", "lat avg(us)", "lat p50(us)", "pingpong(MB/s)",
             "stream(MB/s)");
    }
    for (size_t size = a_.minBytes; size <= a_.maxBytes; size = size ? size * a_.factor : 1) {
      const int iters = int(std::max<size_t>(10, std::min<size_t>(size_t(a_.iters), (size_t(1) << 30) / std::max<size_t>(size, 1))));
      std::vector<double> samples;
      double total = 0;
      if (!pingPong(buf.get(), buf.get() + half, size, std::min(a_.warmup, iters), nullptr, nullptr))
        return error("ping-pong");
      if (!pingPong(buf.get(), buf.get() + half, size, iters, &samples, &total)) return error("ping-pong");
      double streamSecs = 0;
      if (!stream(buf.get(), size, std::min(a_.warmup, iters), nullptr)) return error("stream");
      if (!stream(buf.get(), size, iters, &streamSecs)) return error("stream");
      if (rank_ == 0) {
        std::nth_element(samples.begin(), samples.begin() + long(samples.size() / 2), samples.end());
        const double avgUs = total / iters / 2 * 1e6, p50Us = samples[samples.size() / 2] / 2 * 1e6;
        printf("  %10zu %8d %12.2f %12.2f %14.1f %12.1f\n", size, iters, avgUs, p50Us, double(size) / avgUs,
               double(size) * iters / streamSecs / 1e6);
        fflush(stdout);
      }
    }
    return 0;
  }

 private:
  int error(const char* what) {
    fprintf(stderr, "transport_perf: rank %d: %s failed: %s\n", rank_, what, tempo::lastErrorMessage());
    return 1;
  }
  // Drives the endpoint until `r` is done (30 s at most, then the peer is taken as hung).
  bool wait(Request& r) {
    const tempo::Deadline d = tempo::Deadline::afterSeconds(30);
    while (!r.done) {
      if (!ep_->progress() && d.expired()) return false;
    }
    return r.status == Status::Success;
  }
  bool post(bool send, void* p, size_t n, Request& r, uint64_t tag) {
    r.reset();
    Status s;
    while ((s = send ? ep_->isend(peer_, tag, p, n, &r) : ep_->irecv(peer_, tag, p, n, &r)) == Status::InProgress)
      ep_->progress();
    return s == Status::Success;
  }
  // Sends from `out`, receives into `in`.
  bool pingPong(unsigned char* out, unsigned char* in, size_t n, int iters, std::vector<double>* samples,
                double* total) {
    Request s, r;
    const int64_t start = tempo::nowNs();
    for (int i = 0; i < iters; ++i) {
      const int64_t t0 = tempo::nowNs();
      if (rank_ == 0) {
        if (!post(false, in, n, r, 1) || !post(true, out, n, s, 1) || !wait(s) || !wait(r)) return false;
      } else {
        if (!post(false, in, n, r, 1) || !wait(r) || !post(true, out, n, s, 1) || !wait(s)) return false;
      }
      if (samples) samples->push_back(double(tempo::nowNs() - t0) * 1e-9);
    }
    if (total) *total = double(tempo::nowNs() - start) * 1e-9;
    return true;
  }
  bool stream(unsigned char* p, size_t n, int iters, double* secs) {
    const int w = a_.window;
    std::vector<Request> reqs(static_cast<size_t>(w));
    Request ack;
    unsigned char ackByte = 0;
    const int64_t start = tempo::nowNs();
    const bool sender = rank_ == 0;
    if (sender && !post(false, &ackByte, 1, ack, 3)) return false;
    // Every message in flight uses the same buffer, as ucx_perftest's do: the figure is the
    // transport's, not the memory system's on buffers that fall out of cache.
    for (int i = 0; i < iters; ++i) {
      Request& q = reqs[size_t(i % w)];
      if (i >= w && !wait(q)) return false;
      if (!post(sender, p, n, q, 2)) return false;
    }
    for (int i = std::max(0, iters - w); i < iters; ++i)
      if (!wait(reqs[size_t(i % w)])) return false;
    if (sender) {
      if (!wait(ack)) return false;
    } else if (!post(true, &ackByte, 1, ack, 3) || !wait(ack)) {
      return false;
    }
    if (secs) *secs = double(tempo::nowNs() - start) * 1e-9;
    return true;
  }

  const Args& a_;
  int rank_, peer_, ctl_;
  std::unique_ptr<Endpoint> ep_;
};

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
    perror("transport_perf: socketpair");
    return 1;
  }
  fflush(stdout);
  const pid_t child = fork();
  if (child < 0) {
    perror("transport_perf: fork");
    return 1;
  }
  if (child == 0) {
    close(sv[0]);
    _exit(Side(a, 1, sv[1]).run());
  }
  close(sv[1]);
  const int rc = Side(a, 0, sv[0]).run();
  close(sv[0]);
  int status = 0;
  waitpid(child, &status, 0);
  const int childRc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  return rc ? rc : childRc;
}
