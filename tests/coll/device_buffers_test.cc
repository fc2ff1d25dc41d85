// Collectives on device memory, through the public API, on an emulated GPU whose memory
// faults when host code touches it (tests/common/emulated_device.h): every collective,
// in place and out of place, every root placement, bit-exact with the guards around every
// buffer intact; stream order (a kernel that writes the input just before the call, one
// that reads the output just after; the call returning while its stream is still held
// before it; a host-memory call after it on the same communicator waiting for it); host
// buffers left alone; host and device buffers mixed; point-to-point and all-to-allv; a
// device-resident PreMulSum scalar.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <cstring>
#include <string>
#include <thread>

#include "src/mem/device_api.h"
#include "tests/coll/coll_fixture.h"
#include "tests/common/emulated_device.h"
#include "tests/common/rank_case.h"
#include "tests/common/verify.h"

namespace tempo::testing {
namespace {

// Device copies of one rank's buffers, on that rank's own stream.
class EmulatedMirror : public DeviceMirror {
 public:
  explicit EmulatedMirror(EmulatedDevice& dev) : dev_(dev), stream_(dev.newStream()) {}
  void* upload(const void* host, size_t bytes) override {
    void* p = dev_.alloc(bytes);
    dev_.upload(p, host, bytes);
    return p;
  }
  void download(void* host, const void* dev, size_t bytes) override {
    EXPECT_EQ(Status::Success, dev_.synchronize(stream_));  // the calls on it are done
    dev_.download(host, dev, bytes);
  }
  void* stream() override { return stream_; }

 private:
  EmulatedDevice& dev_;
  void* stream_;
};

class DeviceBuffers : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    param::overrideForTest(param::Id::ChunkSize, "192");  // several pipelined pieces per call
    param::overrideForTest(param::Id::P2pChunkSize, "4096");  // and per point-to-point message
    world_ = std::make_unique<CommWorld>(GetParam(), "loopback");
    ASSERT_TRUE(world_->ok()) << world_->error();
  }
  void TearDown() override {
    world_.reset();
    param::overrideForTest(param::Id::ChunkSize, nullptr);
    param::overrideForTest(param::Id::P2pChunkSize, nullptr);
    param::overrideForTest(param::Id::GpuPipeline, nullptr);
  }
  void everyCollectiveIsBitExact();
  EmulatedDevice dev_;
  std::unique_ptr<CommWorld> world_;
};

// Every collective, in place and out, every root, bit-exact with the guards intact.
void DeviceBuffers::everyCollectiveIsBitExact() {
  const int n = GetParam();
  const CommWorld& w = *world_;
  uint64_t seed = 1;
  for (Coll coll : kAllColls) {
    for (DataType type : {DataType::Float32, DataType::Int8, DataType::Bfloat16}) {
      for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1000)}) {
        for (bool inPlace : {false, true}) {
          if (inPlace && !hasInPlace(coll)) continue;
          for (int root : {0, n - 1}) {
            if (root != 0 && !rooted(coll)) continue;
            const RankCase c{coll, type, reduces(coll) && (count & 1) ? RedOp::Max : RedOp::Sum, count, root, inPlace, seed++};
            std::vector<std::unique_ptr<RankBuffers>> bufs;
            std::vector<std::unique_ptr<EmulatedMirror>> mirrors;
            for (int r = 0; r < n; ++r) {
              bufs.push_back(std::make_unique<RankBuffers>(c, r, n));
              mirrors.push_back(std::make_unique<EmulatedMirror>(dev_));
            }
            const auto res = w.onThreads([&](int r) { return bufs[size_t(r)]->call(w[r], mirrors[size_t(r)].get()); });
            for (int r = 0; r < n; ++r) {
              ASSERT_EQ(res[size_t(r)], ncclSuccess) << c.describe() << " rank " << r << ": " << ncclGetLastError(w[r]);
              const std::string bad = bufs[size_t(r)]->check();
              ASSERT_TRUE(bad.empty()) << c.describe() << " rank " << r << ": " << bad;
            }
          }
        }
      }
    }
  }
}

// By default a call runs on the device buffers themselves, its plan lowered for them
// (chunks through pinned slots, reductions by the device); TEMPO_GPU_PIPELINE=0 runs it on
// whole host copies. Both give every collective bit for bit.
TEST_P(DeviceBuffers, EveryCollectiveOnDeviceMemoryIsBitExact) { everyCollectiveIsBitExact(); }

TEST_P(DeviceBuffers, EveryCollectiveOnWholeHostCopiesIsBitExact) {
  param::overrideForTest(param::Id::GpuPipeline, "0");
  everyCollectiveIsBitExact();
}

TEST_P(DeviceBuffers, TheCallRunsWhereTheStreamIsAndLaterWorkSeesItsResult) {
  const int n = GetParam();
  const CommWorld& w = *world_;
  constexpr size_t kCount = 4096;
  const size_t ranks = size_t(n);
  std::vector<void*> in(ranks), out(ranks), streams(ranks);
  std::vector<std::vector<float>> seen(ranks, std::vector<float>(kCount));
  for (int r = 0; r < n; ++r) {
    in[size_t(r)] = dev_.alloc(kCount * sizeof(float));
    out[size_t(r)] = dev_.alloc(kCount * sizeof(float));
    streams[size_t(r)] = dev_.newStream();
    // A slow kernel writes the input just before the call: the call must read what it wrote.
    dev_.launch(streams[size_t(r)], in[size_t(r)], [r](std::byte* p) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      for (size_t i = 0; i < kCount; ++i) reinterpret_cast<float*>(p)[i] = float(r + 1) * float(i % 97);
    });
  }
  const auto res = w.onThreads([&](int r) {
    ncclResult_t s = ncclAllReduce(in[size_t(r)], out[size_t(r)], kCount, ncclFloat32, ncclSum, w[r],
                                   static_cast<hipStream_t>(streams[size_t(r)]));
    // A kernel queued after the call reads its output.
    dev_.launch(streams[size_t(r)], out[size_t(r)], [&, r](std::byte* p) {
      std::memcpy(seen[size_t(r)].data(), p, kCount * sizeof(float));
    });
    return s;
  });
  const float ranksSum = float(n * (n + 1) / 2);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]);
    ASSERT_EQ(Status::Success, dev_.synchronize(streams[size_t(r)]));
    for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(seen[size_t(r)][i], ranksSum * float(i % 97)) << "rank " << r << " element " << i;
  }
}

// With a GPU runtime, ncclMemAlloc gives device memory (RCCL's is hipMalloc'd): collectives
// run on it in stream order, and ncclMemFree gives it back to the runtime, once.
TEST_P(DeviceBuffers, MemAllocGivesDeviceMemory) {
  const int n = GetParam();
  const CommWorld& w = *world_;
  constexpr size_t kCount = 1000;
  const size_t liveBefore = dev_.liveAllocations();
  std::vector<void*> buf(static_cast<size_t>(n)), streams(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(ncclMemAlloc(&buf[size_t(r)], kCount * sizeof(int64_t)), ncclSuccess) << ncclGetLastError(nullptr);
    ASSERT_TRUE(dev_.isDevicePointer(buf[size_t(r)]).value()) << "ncclMemAlloc gave host memory";
    std::vector<int64_t> v(kCount, int64_t(r) + 1);
    dev_.upload(buf[size_t(r)], v.data(), kCount * sizeof(int64_t));
    streams[size_t(r)] = dev_.newStream();
  }
  EXPECT_EQ(dev_.liveAllocations(), liveBefore + size_t(n));
  const auto res = w.onThreads([&](int r) {
    return ncclAllReduce(buf[size_t(r)], buf[size_t(r)], kCount, ncclInt64, ncclSum, w[r],
                         static_cast<hipStream_t>(streams[size_t(r)]));
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]);
    ASSERT_EQ(Status::Success, dev_.synchronize(streams[size_t(r)]));
    std::vector<int64_t> v(kCount);
    dev_.download(v.data(), buf[size_t(r)], kCount * sizeof(int64_t));
    EXPECT_EQ(v.front(), int64_t(n) * (n + 1) / 2);
    EXPECT_EQ(v.back(), int64_t(n) * (n + 1) / 2);
  }
  for (void* b : buf) EXPECT_EQ(ncclMemFree(b), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(dev_.liveAllocations(), liveBefore) << "ncclMemFree released the device memory";
  EXPECT_EQ(ncclMemFree(buf[0]), ncclInvalidArgument) << "a second free is refused";
}

// Every rank's device input (element i is (i % 1000) x (rank + 1)) and output of kCount
// floats, and a stream each: queue(k) makes k all-reduces on every rank without
// synchronising, then waits for the streams; check() reads every rank's result.
struct QueuedAllReduces {
  static constexpr size_t kCount = 256 * 1024;  // 1 MiB per buffer
  QueuedAllReduces(EmulatedDevice& dev, const CommWorld& w) : dev(dev), w(w), n(size_t(w.size())) {
    for (size_t r = 0; r < n; ++r) {
      in.push_back(dev.alloc(kCount * sizeof(float)));
      out.push_back(dev.alloc(kCount * sizeof(float)));
      streams.push_back(dev.newStream());
      std::vector<float> v(kCount);
      for (size_t i = 0; i < kCount; ++i) v[i] = float(i % 1000) * float(r + 1);
      dev.upload(in[r], v.data(), kCount * sizeof(float));
    }
  }
  void queue(int calls) {
    const auto res = w.onThreads([&](int r) {
      ncclResult_t e = ncclSuccess;
      for (int k = 0; k < calls && e == ncclSuccess; ++k)
        e = ncclAllReduce(in[size_t(r)], out[size_t(r)], kCount, ncclFloat32, ncclSum, w[r],
                          static_cast<hipStream_t>(streams[size_t(r)]));
      return e;
    });
    for (size_t r = 0; r < n; ++r) {
      ASSERT_EQ(res[r], ncclSuccess) << ncclGetLastError(w[int(r)]);
      ASSERT_EQ(Status::Success, dev.synchronize(streams[r]));
    }
  }
  void check() {
    const float ranksSum = float(n * (n + 1) / 2);
    for (size_t r = 0; r < n; ++r) {
      std::vector<float> v(kCount);
      dev.download(v.data(), out[r], kCount * sizeof(float));
      for (size_t i = 0; i < kCount; i += 997) ASSERT_EQ(v[i], float(i % 1000) * ranksSum) << "rank " << r;
    }
  }
  EmulatedDevice& dev;
  const CommWorld& w;
  size_t n;
  std::vector<void*> in, out, streams;
};

// The host copies live in one pinned arena per communicator, allocated once it is large
// enough and reused: queueing many calls on a stream does not make the library hold a copy
// per call, and the arena goes with the communicator.
TEST_P(DeviceBuffers, StagingMemoryIsPinnedReusedAndHeldOncePerCommunicator) {
  param::overrideForTest(param::Id::GpuPipeline, "0");  // whole host copies
  const size_t n = size_t(GetParam()), pinnedBefore = dev_.livePinned();
  QueuedAllReduces calls(dev_, *world_);
  calls.queue(1);
  const size_t allocationsWarm = dev_.pinnedAllocations();
  EXPECT_EQ(dev_.livePinned(), pinnedBefore + n) << "one arena per communicator";
  calls.queue(16);
  EXPECT_EQ(dev_.pinnedAllocations(), allocationsWarm) << "a warm arena is reused, whatever the queue depth";
  EXPECT_EQ(dev_.livePinned(), pinnedBefore + n);
  calls.check();
  world_.reset();
  EXPECT_EQ(dev_.livePinned(), pinnedBefore) << "the arenas went with their communicators";
}

// A call on device buffers runs on them in chunks (TEMPO_GPU_PIPELINE's default): every
// reduction is the device's, no copy moves more than one chunk, and the pinned slots are
// one arena per communicator, allocated once and reused however many calls are queued.
TEST_P(DeviceBuffers, PipelinedCallsReduceOnTheDeviceThroughReusedPinnedSlots) {
  constexpr size_t kChunk = 64 * 1024;
  param::overrideForTest(param::Id::ChunkSize, std::to_string(kChunk).c_str());
  const size_t n = size_t(GetParam()), pinnedBefore = dev_.livePinned();
  QueuedAllReduces calls(dev_, *world_);
  const size_t reductionsBefore = dev_.reductions();
  dev_.resetLargestCopy();
  calls.queue(1);
  const size_t allocationsWarm = dev_.pinnedAllocations();
  // One rank has nothing to stage: its call is one device-to-device copy.
  EXPECT_EQ(dev_.livePinned(), pinnedBefore + (n > 1 ? n : 0)) << "one arena per communicator";
  calls.queue(16);
  EXPECT_EQ(dev_.pinnedAllocations(), allocationsWarm) << "a warm arena is reused, whatever the queue depth";
  if (n > 1) {
    EXPECT_GT(dev_.reductions(), reductionsBefore) << "the reductions ran on the device";
    EXPECT_LE(dev_.largestCopy(), kChunk) << "a copy moved more than a chunk";
  }
  calls.check();
  world_.reset();
  EXPECT_EQ(dev_.livePinned(), pinnedBefore) << "the arenas went with their communicators";
}

// Each communicator works on its own device, from whichever thread runs its calls: the
// ranks of ncclCommInitAll are on devices 0..n-1 (ncclCommCuDevice says so), and their
// copies and kernels are queued with that device current (the emulated device refuses a
// kernel on another device's stream, as a GPU does).
TEST_P(DeviceBuffers, EachCommunicatorsWorkRunsOnItsDevice) {
  const int n = GetParam();
  const CommWorld& w = *world_;
  constexpr size_t kCount = 4096;
  std::set<int> devices;
  std::vector<void*> buf(static_cast<size_t>(n)), streams(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    int device = -1;
    ASSERT_EQ(ncclCommCuDevice(w[r], &device), ncclSuccess);
    EXPECT_EQ(device, r);
    devices.insert(r);
    buf[size_t(r)] = dev_.alloc(kCount * sizeof(float));
    std::vector<float> v(kCount, float(r + 1));
    dev_.upload(buf[size_t(r)], v.data(), kCount * sizeof(float));
    ASSERT_EQ(Status::Success, dev_.setDevice(r));  // as the application would
    streams[size_t(r)] = dev_.newStream();
  }
  ASSERT_EQ(Status::Success, dev_.setDevice(0));
  dev_.resetDevicesUsed();
  const auto res = w.onThreads([&](int r) {
    return ncclAllReduce(buf[size_t(r)], buf[size_t(r)], kCount, ncclFloat32, ncclSum, w[r],
                         static_cast<hipStream_t>(streams[size_t(r)]));
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]);
    ASSERT_EQ(Status::Success, dev_.synchronize(streams[size_t(r)]));
    std::vector<float> v(kCount);
    dev_.download(v.data(), buf[size_t(r)], kCount * sizeof(float));
    EXPECT_EQ(v.front(), float(n * (n + 1) / 2)) << "rank " << r;
  }
  EXPECT_EQ(dev_.devicesUsed(), devices);
}

// ncclCommInitRank takes the calling thread's current device, as RCCL does.
TEST(DeviceOfACommunicator, IsTheCallersCurrentDevice) {
  EmulatedDevice dev;
  param::overrideForTest(param::Id::Transport, "loopback");
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ASSERT_EQ(Status::Success, dev.setDevice(3));
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(Status::Success, dev.setDevice(0));
  int device = -1;
  EXPECT_EQ(ncclCommCuDevice(comm, &device), ncclSuccess);
  EXPECT_EQ(device, 3);
  void* stream = dev.newStream();  // on device 0: copies may use it, as on a GPU
  void *in = dev.alloc(64 * sizeof(int32_t)), *out = dev.alloc(64 * sizeof(int32_t));
  dev.resetDevicesUsed();
  EXPECT_EQ(ncclAllReduce(in, out, 64, ncclInt32, ncclSum, comm, static_cast<hipStream_t>(stream)), ncclSuccess);
  EXPECT_EQ(Status::Success, dev.synchronize(stream));
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  EXPECT_EQ(dev.devicesUsed(), std::set<int>{3}) << "the communicator's work ran on another device";
  param::overrideForTest(param::Id::Transport, nullptr);
}

// ncclCommInitAll puts rank i on device i; with more ranks than devices (Tempo lets ranks
// share a GPU) they share the devices round robin, and a devlist naming no device is refused.
TEST(DeviceOfACommunicator, InitAllSharesTheDevicesRoundRobinAndChecksTheList) {
  EmulatedDevice dev;
  param::overrideForTest(param::Id::Transport, "loopback");
  constexpr int kRanks = EmulatedDevice::kDevices + 2;
  std::vector<ncclComm_t> comms(kRanks);
  ASSERT_EQ(ncclCommInitAll(comms.data(), kRanks, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < kRanks; ++r) {
    int device = -1;
    EXPECT_EQ(ncclCommCuDevice(comms[size_t(r)], &device), ncclSuccess);
    EXPECT_EQ(device, r % EmulatedDevice::kDevices) << "rank " << r;
    EXPECT_EQ(ncclCommDestroy(comms[size_t(r)]), ncclSuccess);
  }
  const int devlist[] = {0, EmulatedDevice::kDevices};
  EXPECT_EQ(ncclCommInitAll(comms.data(), 2, devlist), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("devlist[1] is 8, not a device"), std::string::npos)
      << ncclGetLastError(nullptr);
  param::overrideForTest(param::Id::Transport, nullptr);
}

TEST_P(DeviceBuffers, HostBuffersAreUsedInPlaceWithoutACopy) {
  const int n = GetParam();
  const CommWorld& w = *world_;
  std::vector<std::vector<int32_t>> buf(size_t(n), std::vector<int32_t>(100, 1));
  const size_t copiesBefore = dev_.copies();
  const auto res = w.onThreads([&](int r) { return ncclAllReduce(buf[size_t(r)].data(), buf[size_t(r)].data(), 100, ncclInt32, ncclSum, w[r], nullptr); });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]);
    EXPECT_EQ(buf[size_t(r)][99], n);
  }
  EXPECT_EQ(copiesBefore, dev_.copies());
  EXPECT_GT(dev_.queries(), 0u);
}

TEST_P(DeviceBuffers, HostInputDeviceOutputAndTheReverse) {
  const int n = GetParam();
  const CommWorld& w = *world_;
  constexpr size_t kCount = 333;
  const size_t ranks = size_t(n);
  std::vector<std::vector<double>> host(ranks, std::vector<double>(ranks * kCount));
  std::vector<void*> dev(ranks);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < kCount; ++i) host[size_t(r)][i] = double(r * 1000 + int(i));
    dev[size_t(r)] = dev_.alloc(size_t(n) * kCount * sizeof(double));
  }
  // One group from this thread, so the ranks may share the default stream.
  // Host block in, device concatenation out.
  ASSERT_EQ(ncclSuccess, w.inGroup([&](int r) {
    return ncclAllGather(host[size_t(r)].data(), dev[size_t(r)], kCount, ncclFloat64, w[r], nullptr);
  })) << ncclGetLastError(nullptr);
  // Device concatenation in, host sum out (reduce-scatter: block r to rank r).
  std::vector<std::vector<double>> got(size_t(n), std::vector<double>(kCount, -1));
  ASSERT_EQ(ncclSuccess, w.inGroup([&](int r) {
    return ncclReduceScatter(dev[size_t(r)], got[size_t(r)].data(), kCount, ncclFloat64, ncclSum, w[r], nullptr);
  })) << ncclGetLastError(nullptr);
  // The call is stream-ordered (it has a device buffer): its host output is there once the
  // stream has run it.
  ASSERT_EQ(Status::Success, dev_.synchronize(nullptr));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(got[size_t(r)][i], double(n) * double(r * 1000 + int(i))) << "rank " << r;
  }
}

TEST_P(DeviceBuffers, PointToPointAndAllToAllvInOneGroup) {
  const int n = GetParam();
  const CommWorld& w = *world_;
  constexpr size_t kCount = 50;
  // Each rank sends kCount ints to its right neighbour and receives from its left, on the
  // device, and in the same group an all-to-allv in which rank j sends j+1 elements to each.
  const size_t ranks = size_t(n);
  std::vector<void*> send(ranks), recv(ranks), vin(ranks), vout(ranks);
  std::vector<std::vector<size_t>> sc(ranks), sd(ranks), rc(ranks), rd(ranks);
  for (int r = 0; r < n; ++r) {
    std::vector<int32_t> v(kCount);
    for (size_t i = 0; i < kCount; ++i) v[i] = int32_t(r * 100 + int(i));
    send[size_t(r)] = dev_.alloc(kCount * 4);
    recv[size_t(r)] = dev_.alloc(kCount * 4);
    dev_.upload(send[size_t(r)], v.data(), kCount * 4);
    std::vector<int32_t> a(size_t(n) * size_t(r + 1), r);
    vin[size_t(r)] = dev_.alloc(a.size() * 4);
    dev_.upload(vin[size_t(r)], a.data(), a.size() * 4);
    size_t off = 0;
    for (int j = 0; j < n; ++j) {
      sc[size_t(r)].push_back(size_t(r + 1));
      sd[size_t(r)].push_back(size_t(j) * size_t(r + 1));
      rc[size_t(r)].push_back(size_t(j + 1));
      rd[size_t(r)].push_back(off);
      off += size_t(j + 1);
    }
    vout[size_t(r)] = dev_.alloc(off * 4);
  }
  const ncclResult_t s = w.inGroup([&](int r) {
    ncclResult_t x = ncclSend(send[size_t(r)], kCount, ncclInt32, (r + 1) % n, w[r], nullptr);
    if (x == ncclSuccess) x = ncclRecv(recv[size_t(r)], kCount, ncclInt32, (r + n - 1) % n, w[r], nullptr);
    if (x == ncclSuccess)
      x = ncclAlltoAllv(vin[size_t(r)], sc[size_t(r)].data(), sd[size_t(r)].data(), vout[size_t(r)], rc[size_t(r)].data(),
                        rd[size_t(r)].data(), ncclInt32, w[r], nullptr);
    return x;
  });
  ASSERT_EQ(s, ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    std::vector<int32_t> got(kCount);
    dev_.download(got.data(), recv[size_t(r)], kCount * 4);
    const int left = (r + n - 1) % n;
    for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(got[i], left * 100 + int(i)) << "rank " << r;
    std::vector<int32_t> v(rd[size_t(r)].back() + rc[size_t(r)].back());
    dev_.download(v.data(), vout[size_t(r)], v.size() * 4);
    for (int j = 0; j < n; ++j)
      for (size_t k = 0; k < size_t(j + 1); ++k) ASSERT_EQ(v[rd[size_t(r)][size_t(j)] + k], j) << "rank " << r << " from " << j;
  }
}

// Every rank sends to every rank (itself too) in one group, each buffer on the device or
// in host memory, the lengths from nothing to four 4 KiB pieces (exactly one piece among
// them: a piece and an empty one), receives first on even ranks and sends first on odd
// ones. Runs with the messages streamed through pinned slots per peer (no copy larger than
// a piece) and, with TEMPO_GPU_PIPELINE=0, on whole host copies; bit-exact both ways.
void exchangeEveryPair(EmulatedDevice& dev, const CommWorld& w, size_t* largestCopy) {
  const int n = w.size();
  const size_t ranks = size_t(n);
  auto floats = [](int from, int to) -> size_t {
    if (from == to) return 1000;  // a copy to self moves it whole: keep it within a piece
    const size_t lengths[] = {0, 4096, 1024, 1, 2500};
    return lengths[size_t(from + 2 * to) % 5];
  };
  auto onDevice = [](int r, int peer) { return (r + 2 * peer) % 3 != 0; };
  struct Buffer {
    void* p = nullptr;
    std::vector<float> host;  // the memory itself where the buffer is host memory
  };
  std::vector<std::vector<Buffer>> send(ranks, std::vector<Buffer>(ranks)), recv = send;
  auto make = [&](Buffer& b, size_t count, bool device) {
    if (device) {
      b.p = dev.alloc(count * sizeof(float) + 1);
    } else {
      b.host.resize(count + 1);
      b.p = b.host.data();
    }
  };
  auto value = [](int from, int to, size_t i) { return float(from * 100000 + to * 1000) + float(i % 997); };
  std::vector<void*> streams;
  for (int r = 0; r < n; ++r) {
    streams.push_back(dev.newStream());
    for (int j = 0; j < n; ++j) {
      const size_t out = floats(r, j), in = floats(j, r);
      Buffer& b = send[size_t(r)][size_t(j)];
      make(b, out, onDevice(r, j));
      std::vector<float> v(out);
      for (size_t i = 0; i < out; ++i) v[i] = value(r, j, i);
      if (!b.host.empty()) std::copy(v.begin(), v.end(), b.host.begin());
      else if (out) dev.upload(b.p, v.data(), out * sizeof(float));
      make(recv[size_t(r)][size_t(j)], in, onDevice(j, r));
    }
  }
  dev.resetLargestCopy();
  const auto res = w.onThreads([&](int r) {
    auto stream = static_cast<hipStream_t>(streams[size_t(r)]);
    ncclGroupStart();
    for (int k = 0; k < n; ++k) {
      const int j = (r + k) % n;
      auto sendTo = [&] { ncclSend(send[size_t(r)][size_t(j)].p, floats(r, j), ncclFloat32, j, w[r], stream); };
      auto recvFrom = [&] { ncclRecv(recv[size_t(r)][size_t(j)].p, floats(j, r), ncclFloat32, j, w[r], stream); };
      if (r % 2 == 0) {
        recvFrom();
        sendTo();
      } else {
        sendTo();
        recvFrom();
      }
    }
    return ncclGroupEnd();
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]);
    ASSERT_EQ(Status::Success, dev.synchronize(streams[size_t(r)]));
  }
  *largestCopy = dev.largestCopy();  // (the calls ran once their streams reached them)
  for (int r = 0; r < n; ++r) {
    for (int j = 0; j < n; ++j) {
      const size_t count = floats(j, r);
      const Buffer& b = recv[size_t(r)][size_t(j)];
      std::vector<float> got(count + 1);
      if (!b.host.empty()) got = b.host;
      else if (count) dev.download(got.data(), b.p, count * sizeof(float));
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(got[i], value(j, r, i)) << "rank " << r << " from " << j << " element " << i << " of " << count;
    }
  }
}

TEST_P(DeviceBuffers, PointToPointStreamsThroughPinnedSlotsPerPeer) {
  size_t largest = 0;  // (the fixture's communicators cut messages into 4 KiB pieces)
  exchangeEveryPair(dev_, *world_, &largest);
  if (GetParam() > 1) {
    EXPECT_LE(largest, 4096u) << "a message was staged whole rather than piece by piece";
  }
  param::overrideForTest(param::Id::GpuPipeline, "0");
  exchangeEveryPair(dev_, *world_, &largest);
  if (GetParam() > 1) {
    EXPECT_GT(largest, 4096u) << "whole host copies";
  }
}

TEST_P(DeviceBuffers, PreMulSumTakesItsScalarFromDeviceMemory) {
  const int n = GetParam();
  const CommWorld& w = *world_;
  const size_t ranks = size_t(n);
  std::vector<ncclRedOp_t> op(ranks);
  std::vector<void*> scalar(ranks), buf(ranks);
  for (int r = 0; r < n; ++r) {
    const float s = float(r + 2);
    scalar[size_t(r)] = dev_.alloc(sizeof(float));
    dev_.upload(scalar[size_t(r)], &s, sizeof s);
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&op[size_t(r)], scalar[size_t(r)], ncclFloat32, ncclScalarDevice, w[r]), ncclSuccess);
    const std::vector<float> ones(64, 1.0f);
    buf[size_t(r)] = dev_.alloc(64 * sizeof(float));
    dev_.upload(buf[size_t(r)], ones.data(), 64 * sizeof(float));
  }
  // Each rank on its own stream: ranks of one communicator queued on one stream by separate
  // calls would wait on each other (see RanksSharingAStreamOutsideAGroupFailInsteadOfHanging).
  std::vector<void*> streams(ranks);
  for (auto& st : streams) st = dev_.newStream();
  const auto res = w.onThreads([&](int r) {
    return ncclAllReduce(buf[size_t(r)], buf[size_t(r)], 64, ncclFloat32, op[size_t(r)], w[r],
                         static_cast<hipStream_t>(streams[size_t(r)]));
  });
  float want = 0;
  for (int r = 0; r < n; ++r) want += float(r + 2);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]);
    ASSERT_EQ(Status::Success, dev_.synchronize(streams[size_t(r)]));
    std::vector<float> got(64);
    dev_.download(got.data(), buf[size_t(r)], 64 * sizeof(float));
    for (float v : got) ASSERT_EQ(v, want);
    EXPECT_EQ(ncclRedOpDestroy(op[size_t(r)], w[r]), ncclSuccess);
  }
}

// A gate a kernel waits at: the stream stops there until the test opens it.
class Gate {
 public:
  void open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST_P(DeviceBuffers, TheCallReturnsBeforeTheStreamReachesIt) {
  const int n = GetParam();
  const CommWorld& w = *world_;
  constexpr size_t kCount = 1000;
  const size_t ranks = size_t(n);
  std::vector<void*> buf(ranks), streams(ranks);
  Gate gate;
  for (int r = 0; r < n; ++r) {
    buf[size_t(r)] = dev_.alloc(kCount * sizeof(int64_t));
    streams[size_t(r)] = dev_.newStream();
    dev_.launch(streams[size_t(r)], buf[size_t(r)], [&gate, r](std::byte* p) {
      gate.wait();  // the stream is held here until every call has returned
      for (size_t i = 0; i < kCount; ++i) reinterpret_cast<int64_t*>(p)[i] = int64_t(r) << 20 | int64_t(i);
    });
  }
  // Every rank's call returns while its stream is still held before the call.
  const auto res = w.onThreads([&](int r) {
    return ncclAllReduce(buf[size_t(r)], buf[size_t(r)], kCount, ncclInt64, ncclSum, w[r],
                         static_cast<hipStream_t>(streams[size_t(r)]));
  });
  for (int r = 0; r < n; ++r) ASSERT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]);
  gate.open();
  int64_t rankSum = 0;
  for (int r = 0; r < n; ++r) rankSum += int64_t(r) << 20;
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(Status::Success, dev_.synchronize(streams[size_t(r)]));
    std::vector<int64_t> got(kCount);
    dev_.download(got.data(), buf[size_t(r)], kCount * sizeof(int64_t));
    for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(got[i], rankSum + int64_t(n) * int64_t(i)) << "rank " << r;
    ncclResult_t async = ncclInternalError;
    ASSERT_EQ(ncclCommGetAsyncError(w[r], &async), ncclSuccess);
    EXPECT_EQ(async, ncclSuccess);
  }
  EXPECT_EQ(0u, dev_.liveEvents());
}

// ncclCommAbort while every rank's call is still waiting for its stream: abort returns
// without waiting for the streams, and once they move on, the work queued after the calls
// runs (nothing is left waiting for a batch that will never run).
TEST_P(DeviceBuffers, AbortWhileTheStreamsHoldTheCallsReleasesTheStreams) {
  const int n = GetParam();
  const CommWorld& w = *world_;
  constexpr size_t kCount = 4096;
  std::vector<void*> buf(static_cast<size_t>(n)), streams(static_cast<size_t>(n));
  std::atomic<int> after{0};
  Gate gate;
  for (int r = 0; r < n; ++r) {
    buf[size_t(r)] = dev_.alloc(kCount * sizeof(float));
    streams[size_t(r)] = dev_.newStream();
    dev_.launch(streams[size_t(r)], buf[size_t(r)], [&gate](std::byte*) { gate.wait(); });
  }
  const auto res = w.onThreads([&](int r) {
    ncclResult_t e = ncclAllReduce(buf[size_t(r)], buf[size_t(r)], kCount, ncclFloat32, ncclSum, w[r],
                                   static_cast<hipStream_t>(streams[size_t(r)]));
    // Work queued after the call.
    dev_.launch(streams[size_t(r)], buf[size_t(r)], [&after](std::byte*) { after.fetch_add(1); });
    return e;
  });
  for (int r = 0; r < n; ++r) ASSERT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]);
  for (int r = 0; r < n; ++r) EXPECT_EQ(ncclCommAbort(w[r]), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(after.load(), 0) << "the streams were still held";
  gate.open();
  for (int r = 0; r < n; ++r) ASSERT_EQ(Status::Success, dev_.synchronize(streams[size_t(r)]));
  EXPECT_EQ(after.load(), n);
  EXPECT_EQ(0u, dev_.liveEvents());
}

TEST_P(DeviceBuffers, AHostCallAfterAStreamOrderedOneWaitsForIt) {
  const int n = GetParam();
  const CommWorld& w = *world_;
  const size_t ranks = size_t(n);
  std::vector<void*> dbuf(ranks), streams(ranks);
  std::vector<std::vector<float>> hbuf(ranks, std::vector<float>(64, 2.0f));
  Gate gate;
  for (int r = 0; r < n; ++r) {
    dbuf[size_t(r)] = dev_.alloc(64 * sizeof(float));
    streams[size_t(r)] = dev_.newStream();
    dev_.launch(streams[size_t(r)], dbuf[size_t(r)], [&gate](std::byte* p) {
      gate.wait();
      for (size_t i = 0; i < 64; ++i) reinterpret_cast<float*>(p)[i] = 1.0f;
    });
  }
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    gate.open();
  });
  // Device all-reduce (held by its stream), then a max on host memory on the same
  // communicator: the second must not overtake the first on any rank.
  const auto res = w.onThreads([&](int r) {
    ncclResult_t s = ncclAllReduce(dbuf[size_t(r)], dbuf[size_t(r)], 64, ncclFloat32, ncclSum, w[r],
                                   static_cast<hipStream_t>(streams[size_t(r)]));
    if (s == ncclSuccess) s = ncclAllReduce(hbuf[size_t(r)].data(), hbuf[size_t(r)].data(), 64, ncclFloat32, ncclMax, w[r], nullptr);
    return s;
  });
  opener.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]);
    EXPECT_EQ(hbuf[size_t(r)][63], 2.0f);
    ASSERT_EQ(Status::Success, dev_.synchronize(streams[size_t(r)]));
    std::vector<float> got(64);
    dev_.download(got.data(), dbuf[size_t(r)], 64 * sizeof(float));
    EXPECT_EQ(got[0], float(n));
    EXPECT_EQ(got[63], float(n));
  }
}

TEST_P(DeviceBuffers, RanksSharingAStreamOutsideAGroupFailInsteadOfHanging) {
  const int n = GetParam();
  if (n < 2) GTEST_SKIP() << "needs two ranks";
  const CommWorld& w = *world_;
  std::vector<void*> buf(static_cast<size_t>(n), nullptr);
  for (auto& b : buf) b = dev_.alloc(256);
  void* shared = dev_.newStream();
  Gate gate;
  dev_.launch(shared, buf[0], [&gate](std::byte*) { gate.wait(); });
  // Rank 0's call, then rank 1's on the same stream, from this one thread: rank 0's call
  // holds the stream until it is done, and it needs rank 1, whose copies wait behind it.
  EXPECT_EQ(ncclSuccess, ncclAllReduce(buf[0], buf[0], 64, ncclFloat32, ncclSum, w[0], static_cast<hipStream_t>(shared)));
  EXPECT_EQ(ncclInvalidUsage, ncclAllReduce(buf[1], buf[1], 64, ncclFloat32, ncclSum, w[1], static_cast<hipStream_t>(shared)));
  EXPECT_NE(std::string(ncclGetLastError(w[1])).find("must be called in one group"), std::string::npos)
      << ncclGetLastError(w[1]);
  gate.open();
  // Rank 0's call ends too, with the communicator's error, rather than waiting for rank 1.
  ASSERT_EQ(Status::Success, dev_.synchronize(shared));
  ncclResult_t async = ncclSuccess;
  ASSERT_EQ(ncclSuccess, ncclCommGetAsyncError(w[0], &async));
  EXPECT_NE(async, ncclSuccess);
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceBuffers, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace tempo::testing
