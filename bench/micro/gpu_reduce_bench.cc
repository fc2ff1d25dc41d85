// Device reduction kernels against a device-to-device copy of the same size.
//
//   gpu_reduce_bench [-b 1M] [-e 1G] [-f 4] [-n 20] [-w 3] [-d float|half|bfloat16|...|all]
//                    [-o sum|prod|max|min|avg]
//
// Per size (bytes of one operand) it times, on device 0 and the default stream: the
// runtime's device-to-device copy (the copy engines or the runtime's own kernel), Tempo's
// copy kernel, and the reduction kernel dst = a op b for each datatype asked for. Bandwidth
// counts all memory traffic a call implies (copy: read + write, 2x the size; reduction: two
// reads and a write, 3x), which is the figure to hold against the memory system; "ratio"
// is the reduction's bandwidth over the runtime copy's. Each figure is n back-to-back calls
// between two synchronisations, after w warm-up calls, so launch costs are amortised and
// small sizes read low. Exits 2 with the runtime's reason where there is no GPU.
#include <getopt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/common/options.h"
#include "bench/common/types.h"
#include "kernels/hip/device.h"

namespace {

using namespace tempo;
namespace gpu = tempo::kernels::gpu;

int die(const char* what) {
  std::fprintf(stderr, "gpu_reduce_bench: %s: %s\n", what, lastErrorMessage());
  return 1;
}

// Seconds per call of `call`, n calls between two synchronisations after w warm-ups.
template <class Call>
double timePerCall(int n, int w, Call&& call) {
  for (int i = 0; i < w; ++i) call();
  (void)gpu::synchronize(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) call();
  (void)gpu::synchronize(nullptr);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / n;
}

}  // namespace

int main(int argc, char** argv) {
  size_t minBytes = 1 << 20, maxBytes = size_t(1) << 30, factor = 4;
  int iters = 20, warmup = 3;
  std::vector<int> types{int(DataType::Float32)};
  auto op = RedOp::Sum;
  for (int c; (c = getopt(argc, argv, "b:e:f:n:w:d:o:h")) != -1;) {
    const double v = (c == 'b' || c == 'e') ? bench::parseSize(optarg) : 0;
    switch (c) {
      case 'b': minBytes = size_t(v); break;
      case 'e': maxBytes = size_t(v); break;
      case 'f': factor = std::strtoul(optarg, nullptr, 10); break;
      case 'n': iters = std::atoi(optarg); break;
      case 'w': warmup = std::atoi(optarg); break;
      case 'd': {
        const int t = bench::parseType(optarg);
        types.clear();
        if (t == bench::kAll) {
          for (int i = 0; i < kNumDataTypes; ++i) types.push_back(i);
        } else {
          types.push_back(t);
        }
        break;
      }
      case 'o': {
        const int o = bench::parseOp(optarg);
        if (o < 0 || o >= kNumRedOps) {
          std::fprintf(stderr, "gpu_reduce_bench: -o takes sum, prod, max, min or avg\n");
          return 1;
        }
        op = RedOp(o);
        break;
      }
      default:
        std::fprintf(stderr, "usage: %s [-b 1M] [-e 1G] [-f 4] [-n 20] [-w 3] [-d type|all] [-o op]\n", argv[0]);
        return c == 'h' ? 0 : 1;
    }
  }
  if (minBytes == 0 || maxBytes < minBytes || factor < 2 || iters < 1 || warmup < 0) {
    std::fprintf(stderr, "gpu_reduce_bench: need 0 < -b <= -e, -f >= 2, -n >= 1, -w >= 0\n");
    return 1;
  }

  auto count = gpu::deviceCount();
  if (!count.ok()) {
    std::fprintf(stderr, "gpu_reduce_bench: no GPU here: %s\n", lastErrorMessage());
    return 2;
  }
  if (!ok(gpu::setDevice(0))) return die("set device 0");
  auto info = gpu::deviceInfo(0);
  if (!info.ok()) return die("device properties");
  std::printf("# %s device 0: %s (%s), %d multiprocessors, fp8 %s; %d calls after %d warm-ups\n",
              gpu::backendName(), info->name.c_str(), info->arch.c_str(), info->multiprocessors,
              info->fp8 == gpu::Fp8Encoding::Fnuz ? "FNUZ" : "OCP", iters, warmup);

  auto a = gpu::DeviceBuffer::create(maxBytes);
  auto b = gpu::DeviceBuffer::create(maxBytes);
  auto d = gpu::DeviceBuffer::create(maxBytes);
  if (!a.ok() || !b.ok() || !d.ok()) return die("allocate 3 x -e bytes");
  // Every byte 0x3C: a finite, normal value in every floating type (half 1.06, E4M3 1.5,
  // E5M2 1.0, float 0.0115, ...), so no datatype takes a NaN or subnormal path.
  std::vector<uint8_t> fill(maxBytes, 0x3C);
  for (auto* buf : {&a.value(), &b.value(), &d.value()}) {
    if (!ok(gpu::copyAsync(buf->get(), fill.data(), maxBytes, nullptr))) return die("upload");
  }
  if (!ok(gpu::synchronize(nullptr))) return die("synchronize");

  std::printf("%12s  %10s  %14s  %14s", "bytes", "type", "runtime copy", "copy kernel");
  std::printf("  %14s  %7s\n", (std::string(redOpName(op)) + " kernel").c_str(), "ratio");
  std::printf("%12s  %10s  %14s  %14s  %14s  %7s\n", "", "", "GB/s", "GB/s", "GB/s", "");
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= factor) {
    Status status = Status::Success;
    const double tCopy = timePerCall(iters, warmup, [&] {
      if (ok(status)) status = gpu::copyAsync(d->get(), a->get(), bytes, nullptr);
    });
    const double tKernelCopy = timePerCall(iters, warmup, [&] {
      if (ok(status)) status = gpu::copy(d->get(), a->get(), bytes, nullptr);
    });
    if (!ok(status)) return die("copy");
    const double copyGBs = 2.0 * bytes / tCopy / 1e9;
    for (int t : types) {
      const auto type = DataType(t);
      const size_t n = bytes / dataTypeSize(type);
      const double tReduce = timePerCall(iters, warmup, [&] {
        if (ok(status)) status = gpu::reduce(d->get(), a->get(), b->get(), n, type, op,
                                             op == RedOp::Avg ? 2 : 1, info->fp8, nullptr);
      });
      if (!ok(status)) return die("reduce");
      const double reduceGBs = 3.0 * bytes / tReduce / 1e9;
      std::printf("%12zu  %10s  %14.1f  %14.1f  %14.1f  %7.3f\n", bytes, bench::typeName(t),
                  copyGBs, 2.0 * bytes / tKernelCopy / 1e9, reduceGBs, reduceGBs / copyGBs);
    }
  }
  return 0;
}
