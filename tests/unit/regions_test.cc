// engine::UserRegions: which registered region, of which endpoint, a transfer names.
#include <gtest/gtest.h>

#include <vector>

#include "src/engine/regions.h"

namespace tempo::engine {
namespace {

// An endpoint that only registers memory: each region remembers its endpoint and range,
// and the endpoint counts live regions, or refuses to register when told to.
struct RegisteringEndpoint final : transport::Endpoint {
  struct Region final : transport::MemRegion {
    Region(RegisteringEndpoint* o, const void* b, size_t l) : owner(o), base(b), len(l) { ++owner->live; }
    ~Region() override { --owner->live; }
    RegisteringEndpoint* owner;
    const void* base;
    size_t len;
  };
  int live = 0;
  bool refuse = false;
  Result<std::unique_ptr<transport::MemRegion>> registerMemory(void* buf, size_t len) override {
    if (refuse) return Status::SystemError;
    return std::unique_ptr<transport::MemRegion>(std::make_unique<Region>(this, buf, len));
  }
  transport::Kind kind() const override { return transport::Kind::Loopback; }
  const char* name() const override { return "registering"; }
  std::span<const std::byte> address() const override { return {}; }
  Status connect(int, std::span<const std::byte>) override { return Status::Success; }
  Status isend(int, uint64_t, const void*, size_t, transport::Request*) override { return Status::InternalError; }
  Status irecv(int, uint64_t, void*, size_t, transport::Request*) override { return Status::InternalError; }
  int progress() override { return 0; }
  int maxOutstanding() const override { return 1; }
  void cancelAll() override {}
};

const RegisteringEndpoint::Region* asRegion(const transport::MemRegion* r) {
  return static_cast<const RegisteringEndpoint::Region*>(r);
}

TEST(UserRegions, FindsTheRegionOfTheRightEndpointThatContainsTheWholeTransfer) {
  RegisteringEndpoint a, b;
  std::vector<transport::Endpoint*> eps{&a, &b};
  UserRegions regions(eps);
  std::vector<char> buf(4096);
  int key1 = 0, key2 = 0;
  ASSERT_EQ(regions.add(&key1, buf.data(), 1024), Status::Success);
  ASSERT_EQ(regions.add(&key2, buf.data() + 2048, 2048), Status::Success);
  EXPECT_EQ(a.live, 2);
  EXPECT_EQ(b.live, 2);

  const transport::MemRegion* r = regions.find(&b, buf.data() + 100, 924);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(asRegion(r)->owner, &b);
  EXPECT_EQ(asRegion(r)->base, buf.data());
  EXPECT_EQ(asRegion(regions.find(&a, buf.data() + 4095, 1))->base, buf.data() + 2048);
  EXPECT_EQ(regions.find(&a, buf.data() + 100, 925), nullptr) << "runs one byte past the first region";
  EXPECT_EQ(regions.find(&a, buf.data() + 1024, 16), nullptr) << "between the regions";
  EXPECT_EQ(regions.find(&a, buf.data() + 2040, 16), nullptr) << "starts before the second region";
  RegisteringEndpoint stranger;
  EXPECT_EQ(regions.find(&stranger, buf.data(), 16), nullptr) << "an endpoint the table does not serve";
}

TEST(UserRegions, OverlappingRegistrationsAreAllFound) {
  RegisteringEndpoint a;
  std::vector<transport::Endpoint*> eps{&a};
  UserRegions regions(eps);
  std::vector<char> buf(1 << 20);
  int big = 0, small = 0;
  ASSERT_EQ(regions.add(&big, buf.data(), buf.size()), Status::Success);
  ASSERT_EQ(regions.add(&small, buf.data() + 4096, 4096), Status::Success);
  // The nearest start (the small one) does not contain this transfer; the big one does.
  const transport::MemRegion* r = regions.find(&a, buf.data() + 4096, 65536);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(asRegion(r)->len, buf.size());
}

TEST(UserRegions, RemoveReleasesAndForgets) {
  RegisteringEndpoint a;
  std::vector<transport::Endpoint*> eps{&a};
  UserRegions regions(eps);
  std::vector<char> buf(256);
  int key = 0, other = 0;
  ASSERT_EQ(regions.add(&key, buf.data(), buf.size()), Status::Success);
  EXPECT_FALSE(regions.remove(&other));
  EXPECT_TRUE(regions.remove(&key));
  EXPECT_EQ(a.live, 0);
  EXPECT_EQ(regions.size(), 0u);
  EXPECT_EQ(regions.find(&a, buf.data(), 1), nullptr);
  EXPECT_FALSE(regions.remove(&key)) << "already removed";
}

TEST(UserRegions, AnEndpointThatRefusesLeavesNothingRegistered) {
  RegisteringEndpoint a, b;
  b.refuse = true;
  std::vector<transport::Endpoint*> eps{&a, &b};
  UserRegions regions(eps);
  std::vector<char> buf(256);
  int key = 0;
  EXPECT_EQ(regions.add(&key, buf.data(), buf.size()), Status::SystemError);
  EXPECT_EQ(a.live, 0) << "the first endpoint's region was released";
  EXPECT_EQ(regions.size(), 0u);
  EXPECT_EQ(regions.find(&a, buf.data(), 1), nullptr);
}

TEST(UserRegions, DestroyingTheTableReleasesEverything) {
  RegisteringEndpoint a;
  std::vector<transport::Endpoint*> eps{&a};
  std::vector<char> buf(256);
  int key = 0;
  {
    UserRegions regions(eps);
    ASSERT_EQ(regions.add(&key, buf.data(), buf.size()), Status::Success);
    EXPECT_EQ(a.live, 1);
  }
  EXPECT_EQ(a.live, 0);
}

}  // namespace
}  // namespace tempo::engine
