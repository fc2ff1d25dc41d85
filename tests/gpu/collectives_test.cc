// Every collective on real device buffers, through the public API and the GPU runtime
// plugin the library loads (TEMPO_GPU pointed at this build's plugin), ranks as threads of
// one process issuing their calls in one group on the default stream: bit-exact with the
// guards around every buffer intact, as tests/coll/device_buffers_test checks on the
// emulated device; and stream order against kernels queued just before and after a call.
// Skips where the runtime finds no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "kernels/hip/device.h"
#include "src/core/param.h"
#include "src/mem/device_api.h"
#include "tests/coll/coll_fixture.h"
#include "tests/common/rank_case.h"

namespace tempo::testing {
namespace {

namespace gpu = kernels::gpu;

// Device copies through this build's backend; freed with the mirror.
class GpuMirror : public DeviceMirror {
 public:
  void* upload(const void* host, size_t bytes) override {
    auto buf = gpu::DeviceBuffer::create(bytes);
    EXPECT_TRUE(buf.ok()) << lastErrorMessage();
    EXPECT_EQ(Status::Success, gpu::copyAsync(buf->get(), host, bytes, nullptr));
    EXPECT_EQ(Status::Success, gpu::synchronize(nullptr));
    buffers_.push_back(std::move(buf).value());
    return buffers_.back().get();
  }
  void download(void* host, const void* dev, size_t bytes) override {
    EXPECT_EQ(Status::Success, gpu::copyAsync(host, dev, bytes, nullptr));
    EXPECT_EQ(Status::Success, gpu::synchronize(nullptr));
  }
  void* stream() override { return nullptr; }

 private:
  std::vector<gpu::DeviceBuffer> buffers_;
};

class GpuCollectives : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (!gpu::deviceCount().ok()) GTEST_SKIP() << "no GPU here: " << lastErrorMessage();
    ASSERT_EQ(Status::Success, gpu::setDevice(0));
    mem::DeviceApi* api = mem::loadDeviceApi(TEMPO_GPU_PLUGIN);
    ASSERT_NE(nullptr, api) << "the plugin " << TEMPO_GPU_PLUGIN << " found no device";
    previous_ = mem::setDeviceApiForTesting(api);
    world_ = std::make_unique<CommWorld>(GetParam(), "loopback");
    ASSERT_TRUE(world_->ok()) << world_->error();
  }
  void TearDown() override {
    world_.reset();
    if (!IsSkipped()) mem::setDeviceApiForTesting(previous_);
  }
  std::unique_ptr<CommWorld> world_;
  mem::DeviceApi* previous_ = nullptr;
};

TEST_P(GpuCollectives, EveryCollectiveOnDeviceBuffersIsBitExact) {
  const int n = GetParam();
  const CommWorld& w = *world_;
  uint64_t seed = 7;
  for (Coll coll : kAllColls) {
    for (DataType type : kAllTypes) {
      for (size_t count : {size_t(0), size_t(1), size_t(5), size_t(4099), size_t(1) << 20}) {
        for (bool inPlace : {false, true}) {
          if (inPlace && !hasInPlace(coll)) continue;
          const RankCase c{coll, type, RedOp::Sum, count, n - 1, inPlace, seed++};
          std::vector<std::unique_ptr<RankBuffers>> bufs;
          GpuMirror mirror;
          for (int r = 0; r < n; ++r) bufs.push_back(std::make_unique<RankBuffers>(c, r, n));
          ASSERT_EQ(ncclSuccess, w.inGroup([&](int r) { return bufs[size_t(r)]->call(w[r], &mirror); }))
              << c.describe() << ": " << ncclGetLastError(nullptr);
          for (int r = 0; r < n; ++r) {
            const std::string bad = bufs[size_t(r)]->check();
            ASSERT_TRUE(bad.empty()) << c.describe() << " rank " << r << ": " << bad;
          }
        }
      }
    }
  }
}

// Stream order on a real GPU: on each rank's own stream, a chain of kernels writes the
// input just before the call (about K passes over 64 MiB, long next to the call itself),
// and a kernel queued just after the call copies its output. The call must read what the
// chain wrote and the reader must see the call's result, with no synchronisation between.
TEST_P(GpuCollectives, KernelsBeforeAndAfterTheCallAreOrderedWithIt) {
  const int n = GetParam();
  const CommWorld& w = *world_;
  constexpr size_t kCount = size_t(16) << 20;  // floats: 64 MiB per buffer
  constexpr int kPasses = 40;                  // the writer adds 1.0 this many times
  struct Rank {
    gpu::DeviceBuffer in, out, ones, seen;
    void* stream = nullptr;
  };
  std::vector<Rank> ranks(static_cast<size_t>(n));
  std::vector<float> host(kCount);
  for (int r = 0; r < n; ++r) {
    Rank& k = ranks[size_t(r)];
    for (gpu::DeviceBuffer* b : {&k.in, &k.out, &k.ones, &k.seen}) {
      auto made = gpu::DeviceBuffer::create(kCount * sizeof(float));
      ASSERT_TRUE(made.ok()) << lastErrorMessage();
      *b = std::move(made).value();
    }
    auto stream = gpu::createStream();
    ASSERT_TRUE(stream.ok()) << lastErrorMessage();
    k.stream = stream.value();
    for (size_t i = 0; i < kCount; ++i) host[i] = float((i % 97) * size_t(r + 1));
    ASSERT_EQ(Status::Success, gpu::copyAsync(k.in.get(), host.data(), kCount * sizeof(float), k.stream));
    std::fill(host.begin(), host.end(), 1.0f);
    ASSERT_EQ(Status::Success, gpu::copyAsync(k.ones.get(), host.data(), kCount * sizeof(float), k.stream));
    ASSERT_EQ(Status::Success, gpu::synchronize(k.stream));
  }
  const auto res = w.onThreads([&](int r) {
    Rank& k = ranks[size_t(r)];
    for (int p = 0; p < kPasses; ++p)
      if (!ok(gpu::reduce(k.in.get(), k.in.get(), k.ones.get(), kCount, DataType::Float32, RedOp::Sum, 1,
                          gpu::Fp8Encoding::Ocp, k.stream)))
        return ncclUnhandledCudaError;
    const ncclResult_t e = ncclAllReduce(k.in.get(), k.out.get(), kCount, ncclFloat32, ncclSum, w[r],
                                         static_cast<hipStream_t>(k.stream));
    if (e != ncclSuccess) return e;
    return ok(gpu::copy(k.seen.get(), k.out.get(), kCount * sizeof(float), k.stream)) ? ncclSuccess
                                                                                     : ncclUnhandledCudaError;
  });
  const float ranksSum = float(n * (n + 1) / 2);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]) << " / " << lastErrorMessage();
    Rank& k = ranks[size_t(r)];
    ASSERT_EQ(Status::Success, gpu::copyAsync(host.data(), k.seen.get(), kCount * sizeof(float), k.stream));
    ASSERT_EQ(Status::Success, gpu::synchronize(k.stream));
    for (size_t i = 0; i < kCount; i += 4093)
      ASSERT_EQ(host[i], float(i % 97) * ranksSum + float(kPasses * n)) << "rank " << r << " element " << i;
  }
  for (Rank& k : ranks) EXPECT_EQ(Status::Success, gpu::destroyStream(k.stream));
}

INSTANTIATE_TEST_SUITE_P(Ranks, GpuCollectives, ::testing::Values(1, 2, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace tempo::testing
