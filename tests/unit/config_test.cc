// ncclConfig_t parsing: NCCL's compatibility rules for older structs, magic, ranges and
// environment overrides.
#include <gtest/gtest.h>

#include <cstring>

#include "src/comm/config.h"
#include "src/core/param.h"

namespace tempo::comm {
namespace {

TEST(Config, NullMeansDefaults) {
  Result<Config> c = parseConfig(nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->blocking);
  EXPECT_EQ(c->raw.splitShare, 0);
  EXPECT_EQ(c->raw.minCTAs, 1);
  EXPECT_GE(c->raw.maxCTAs, c->raw.minCTAs);
}

TEST(Config, InitializerValuesAreHonoured) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.minCTAs = 2;
  cfg.maxCTAs = 8;
  cfg.commName = "trainer";
  Result<Config> c = parseConfig(&cfg);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->blocking);
  EXPECT_EQ(c->raw.minCTAs, 2);
  EXPECT_EQ(c->raw.maxCTAs, 8);
  EXPECT_EQ(c->commName, "trainer");
}

TEST(Config, BadMagicIsRejected) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 0;
  EXPECT_EQ(parseConfig(&cfg).status(), Status::InvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("NCCL_CONFIG_INITIALIZER"), std::string::npos);
}

TEST(Config, TruncatedSizeIsRejected) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.size = 8;
  EXPECT_EQ(parseConfig(&cfg).status(), Status::InvalidArgument);
}

TEST(Config, OlderStructReadsOnlyItsOwnBytes) {
  // A 2.17-era struct is 48 bytes; what follows it in memory is not the caller's.
  alignas(8) unsigned char raw[sizeof(ncclConfig_t)];
  memset(raw, 0x55, sizeof raw);
  ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
  memcpy(raw, &init, 48);
  auto* cfg = reinterpret_cast<ncclConfig_t*>(raw);
  cfg->size = 48;
  cfg->version = NCCL_VERSION(2, 17, 0);
  cfg->blocking = 1;
  Result<Config> c = parseConfig(cfg);
  ASSERT_TRUE(c.ok()) << lastErrorMessage();
  EXPECT_TRUE(c->commName.empty());
  EXPECT_EQ(c->raw.CTAPolicy, NCCL_CTA_POLICY_DEFAULT);
  EXPECT_EQ(c->raw.size, sizeof(ncclConfig_t));
}

TEST(Config, FieldsNewerThanTheStructVersionAreIgnored) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.version = NCCL_VERSION(2, 16, 0);
  cfg.minCTAs = 0;  // invalid, but minCTAs did not exist in 2.16, so it is reset
  cfg.commName = "ignored";
  Result<Config> c = parseConfig(&cfg);
  ASSERT_TRUE(c.ok()) << lastErrorMessage();
  EXPECT_EQ(c->raw.minCTAs, 1);
  EXPECT_TRUE(c->commName.empty());
}

TEST(Config, PreConfigVersionIsRejected) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.version = NCCL_VERSION(2, 13, 0);
  EXPECT_EQ(parseConfig(&cfg).status(), Status::InvalidArgument);
}

TEST(Config, OutOfRangeValuesAreRejected) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 2;
  EXPECT_EQ(parseConfig(&cfg).status(), Status::InvalidArgument);
  cfg = NCCL_CONFIG_INITIALIZER;
  cfg.minCTAs = 8;
  cfg.maxCTAs = 4;
  EXPECT_EQ(parseConfig(&cfg).status(), Status::InvalidArgument);
  cfg = NCCL_CONFIG_INITIALIZER;
  cfg.CTAPolicy = 9;
  EXPECT_EQ(parseConfig(&cfg).status(), Status::InvalidArgument);
}

TEST(Config, EnvironmentOverridesTheStruct) {
  param::overrideForTest(param::Id::CommBlocking, "0");
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 1;
  Result<Config> c = parseConfig(&cfg);
  param::overrideForTest(param::Id::CommBlocking, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->blocking);
}

}  // namespace
}  // namespace tempo::comm
