// Every collective on real device buffers, through the public API and the GPU runtime
// plugin the library loads (TEMPO_GPU pointed at this build's plugin), ranks as threads of
// one process issuing their calls in one group on the default stream: bit-exact with the
// guards around every buffer intact, as tests/coll/device_buffers_test checks on the
// emulated device. Skips where the runtime finds no GPU.
#include <gtest/gtest.h>

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
  const Coll colls[] = {Coll::AllReduce, Coll::Broadcast, Coll::Reduce, Coll::AllGather,
                        Coll::ReduceScatter, Coll::AllToAll, Coll::Gather, Coll::Scatter};
  uint64_t seed = 7;
  for (Coll coll : colls) {
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

INSTANTIATE_TEST_SUITE_P(Ranks, GpuCollectives, ::testing::Values(1, 2, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace tempo::testing
