// The device kernels (kernels/hip/device.h) against the host reference reducers: every
// datatype and operation, aligned, misaligned and in-place buffers, counts that leave every
// kind of tail after the 16-byte packs, and sizes large enough to span many blocks and
// grid-stride rounds. Results must be bit for bit those of kernels::ref (for fp8 in the
// device's encoding: FNUZ on gfx940-gfx942, where the expectation is the same element
// functions run on the host, which gpu_element_test proves against their definition).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/hip/device.h"
#include "kernels/reduce.h"
#include "tests/common/operands.h"
#include "tests/common/verify.h"

namespace tempo::kernels::gpu {
namespace {

using testing::operands;

using testing::kAllTypes;
using testing::kAllOps;
// Empty, single, around one 16-byte pack of the narrowest and widest types, primes, and
// sizes spanning many blocks and grid-stride rounds.
constexpr size_t kCounts[] = {1, 2, 15, 16, 17, 61, 4093, (size_t(1) << 20) + 3};

bool isFp8(DataType t) { return t == DataType::Float8e4m3 || t == DataType::Float8e5m2; }

class GpuKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    auto n = deviceCount();
    if (!n.ok()) GTEST_SKIP() << "no GPU here: " << lastErrorMessage();
    ASSERT_EQ(Status::Success, setDevice(0));
    auto info = deviceInfo(0);
    ASSERT_TRUE(info.ok()) << lastErrorMessage();
    info_ = info.value();
  }

  // What the device must produce for reduce(): the host reference, or for FNUZ fp8 the
  // element functions on the host.
  std::vector<uint8_t> expected(DataType type, RedOp op, uint64_t divisor,
                                const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                                size_t count) const {
    const size_t size = dataTypeSize(type);
    std::vector<uint8_t> want(count * size);
    if (!(isFp8(type) && info_.fp8 == Fp8Encoding::Fnuz)) {
      ref::reduce(want.data(), a.data(), b.data(), count, type, op, divisor);
      return want;
    }
    element::withCodec(type, info_.fp8, [&]<class E>() {
      element::withOp(op, [&]<RedOp Op>() {
        for (size_t i = 0; i < count; ++i) want[i] = element::Combine<E, Op>{divisor}(a[i], b[i]);
      });
    });
    return want;
  }

  // Copies host bytes to a fresh device buffer `offset` bytes past a 256-byte boundary.
  static DeviceBuffer upload(const std::vector<uint8_t>& host, size_t offset) {
    auto buf = DeviceBuffer::create(host.size() + offset);
    EXPECT_TRUE(buf.ok()) << lastErrorMessage();
    EXPECT_EQ(Status::Success, copyAsync(static_cast<uint8_t*>(buf->get()) + offset, host.data(), host.size(), nullptr));
    return std::move(buf).value();
  }

  static std::vector<uint8_t> download(const void* dev, size_t bytes) {
    std::vector<uint8_t> host(bytes);
    EXPECT_EQ(Status::Success, copyAsync(host.data(), dev, bytes, nullptr));
    EXPECT_EQ(Status::Success, synchronize(nullptr));
    return host;
  }

  DeviceInfo info_;
};

enum class Layout { Aligned, Misaligned, InPlace };

TEST_F(GpuKernels, ReduceIsBitExactWithTheHostReference) {
  for (DataType type : kAllTypes) {
    const size_t size = dataTypeSize(type);
    for (size_t count : kCounts) {
      const auto a = operands(type, count, 11 * count + size_t(type));
      const auto b = operands(type, count, 13 * count + size_t(type) + 1);
      for (RedOp op : kAllOps) {
        const uint64_t divisor = op == RedOp::Avg ? 3 : 1;
        const auto want = expected(type, op, divisor, a, b, count);
        for (Layout layout : {Layout::Aligned, Layout::Misaligned, Layout::InPlace}) {
          // Misaligned: one element past the boundary, so no 16-byte packs are possible.
          const size_t off = layout == Layout::Misaligned ? size : 0;
          DeviceBuffer da = upload(a, off), db = upload(b, 0);
          DeviceBuffer dd = upload(std::vector<uint8_t>(count * size, 0xA5), off);
          auto* pa = static_cast<uint8_t*>(da.get()) + off;
          auto* pd = layout == Layout::InPlace ? pa : static_cast<uint8_t*>(dd.get()) + off;
          ASSERT_EQ(Status::Success, reduce(pd, pa, db.get(), count, type, op, divisor, info_.fp8, nullptr))
              << lastErrorMessage();
          const auto got = download(pd, count * size);
          for (size_t i = 0; i < count; ++i) {
            ASSERT_EQ(0, std::memcmp(&want[i * size], &got[i * size], size))
                << dataTypeName(type) << " " << redOpName(op) << " count " << count << " layout "
                << int(layout) << " element " << i;
          }
        }
      }
    }
  }
}

TEST_F(GpuKernels, DivideScaleAndCopyAreTheHostOnes) {
  for (DataType type : kAllTypes) {
    if (isFp8(type) && info_.fp8 == Fp8Encoding::Fnuz) continue;  // covered by reduce above
    const size_t size = dataTypeSize(type);
    for (size_t count : kCounts) {
      const auto src = operands(type, count, 17 * count + size_t(type));
      DeviceBuffer ds = upload(src, 0), dd = upload(std::vector<uint8_t>(count * size), 0);

      std::vector<uint8_t> want(count * size);
      ref::divide(want.data(), src.data(), count, type, 6);
      ASSERT_EQ(Status::Success, divide(dd.get(), ds.get(), count, type, 6, info_.fp8, nullptr));
      ASSERT_EQ(want, download(dd.get(), count * size)) << dataTypeName(type) << " divide " << count;

      const uint8_t* scalar = &src[(count / 2) * size];
      kernels::scale(want.data(), src.data(), count, type, scalar);
      ASSERT_EQ(Status::Success, scale(dd.get(), ds.get(), count, type, scalar, info_.fp8, nullptr));
      ASSERT_EQ(want, download(dd.get(), count * size)) << dataTypeName(type) << " scale " << count;

      ASSERT_EQ(Status::Success, copy(dd.get(), ds.get(), count * size, nullptr));
      ASSERT_EQ(src, download(dd.get(), count * size)) << "copy " << count * size;
    }
  }
}

TEST_F(GpuKernels, DeviceInfoNamesTheArchitectureAndItsFp8Encoding) {
  std::printf("%s device 0: %s, %s, %d multiprocessors, %zu MiB, fp8 %s\n", backendName(),
              info_.name.c_str(), info_.arch.c_str(), info_.multiprocessors, info_.memoryBytes >> 20,
              info_.fp8 == Fp8Encoding::Fnuz ? "FNUZ" : "OCP");
  EXPECT_GT(info_.multiprocessors, 0);
  EXPECT_FALSE(info_.arch.empty());
  EXPECT_EQ(info_.fp8, defaultFp8Encoding(info_));
}

// ---- without a device: these run on every machine that built the backend ----

TEST(GpuKernelsAnywhere, UnknownTypesAndOpsAreRefusedBeforeAnyLaunch) {
  int x = 0;
  EXPECT_EQ(Status::InvalidArgument,
            reduce(&x, &x, &x, 1, DataType(12), RedOp::Sum, 1, Fp8Encoding::Ocp, nullptr));
  EXPECT_NE(std::string(lastErrorMessage()).find("datatype 12"), std::string::npos) << lastErrorMessage();
  EXPECT_EQ(Status::InvalidArgument,
            reduce(&x, &x, &x, 1, DataType::Int32, RedOp(5), 1, Fp8Encoding::Ocp, nullptr));
  EXPECT_NE(std::string(lastErrorMessage()).find("op 5"), std::string::npos) << lastErrorMessage();
  EXPECT_EQ(Status::InvalidArgument, divide(&x, &x, 1, DataType(-1), 2, Fp8Encoding::Ocp, nullptr));
  EXPECT_EQ(Status::InvalidArgument, scale(&x, &x, 1, DataType(40), &x, Fp8Encoding::Ocp, nullptr));
}

TEST(GpuKernelsAnywhere, EmptyLaunchesSucceedWithNullPointers) {
  for (DataType type : kAllTypes) {
    EXPECT_EQ(Status::Success, reduce(nullptr, nullptr, nullptr, 0, type, RedOp::Max, 1, Fp8Encoding::Ocp, nullptr));
    EXPECT_EQ(Status::Success, divide(nullptr, nullptr, 0, type, 2, Fp8Encoding::Fnuz, nullptr));
  }
  EXPECT_EQ(Status::Success, copy(nullptr, nullptr, 0, nullptr));
}

TEST(GpuKernelsAnywhere, DeviceCountNamesTheBackendWhenThereIsNoDevice) {
  auto n = deviceCount();
  if (n.ok()) {
    EXPECT_GE(n.value(), 1);
  } else {
    EXPECT_EQ(Status::UnhandledDeviceError, n.status());
    EXPECT_EQ(0u, std::string(lastErrorMessage()).find(backendName())) << lastErrorMessage();
  }
}

TEST(GpuKernelsAnywhere, Fp8EncodingFollowsTheArchitecture) {
  DeviceInfo info;
  for (const char* arch : {"gfx940", "gfx941", "gfx942:sramecc+:xnack-"}) {
    info.arch = arch;
    EXPECT_EQ(Fp8Encoding::Fnuz, defaultFp8Encoding(info)) << arch;
  }
  for (const char* arch : {"gfx908", "gfx90a:xnack-", "gfx950", "sm_90", "sm_80"}) {
    info.arch = arch;
    EXPECT_EQ(Fp8Encoding::Ocp, defaultFp8Encoding(info)) << arch;
  }
}

}  // namespace
}  // namespace tempo::kernels::gpu
