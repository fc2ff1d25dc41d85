// src/core: parameters, logging masks, status names.
#include <gtest/gtest.h>

#include <cstring>

#include "src/core/log.h"
#include "src/core/param.h"
#include "src/core/status.h"

namespace tempo {
namespace {

TEST(Params, DefaultsAndOverrides) {
  EXPECT_EQ(param::InitTimeout(), 300);
  param::overrideForTest(param::Id::InitTimeout, "12");
  EXPECT_EQ(param::InitTimeout(), 12);
  EXPECT_TRUE(param::isSet(param::Id::InitTimeout));
  param::overrideForTest(param::Id::InitTimeout, "0x10");
  EXPECT_EQ(param::InitTimeout(), 16);
  param::overrideForTest(param::Id::InitTimeout, "twelve");
  EXPECT_EQ(param::InitTimeout(), 300) << "an unparsable integer falls back to the default";
  param::overrideForTest(param::Id::InitTimeout, nullptr);
  EXPECT_EQ(param::InitTimeout(), 300);
}

TEST(Params, SnapshotListsEveryParameterOnce) {
  auto all = param::snapshot();
  EXPECT_EQ(all.size(), size_t(param::Id::Count));
  for (size_t i = 0; i < all.size(); ++i)
    for (size_t j = i + 1; j < all.size(); ++j) EXPECT_STRNE(all[i].name, all[j].name);
  for (const auto& e : all) EXPECT_GT(strlen(e.description), 10u) << e.name;
}

TEST(Log, SubsystemMasks) {
  EXPECT_EQ(log::parseSubsysMask("INIT"), uint64_t(log::Init));
  EXPECT_EQ(log::parseSubsysMask("INIT,COLL"), uint64_t(log::Init | log::Coll));
  EXPECT_EQ(log::parseSubsysMask("ALL"), uint64_t(log::All));
  EXPECT_EQ(log::parseSubsysMask("^COLL"), ~uint64_t(log::Coll));
  EXPECT_EQ(log::parseSubsysMask("bootstrap,tuning"), uint64_t(log::Bootstrap | log::Tuning));
}

TEST(Status, FailRecordsTheMessageAndReturnsTheCode) {
  EXPECT_EQ(fail(Status::InvalidUsage, "thing %d went wrong", 7), Status::InvalidUsage);
  EXPECT_STREQ(lastErrorMessage(), "thing 7 went wrong");
  EXPECT_STREQ(statusName(Status::RemoteError), "ncclRemoteError");
}

}  // namespace
}  // namespace tempo
