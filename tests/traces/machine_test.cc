#include "traces/machine.h"

#include <string>

#include "gtest/gtest.h"
#include "traces/base/file.h"

namespace tiergym {
namespace {

constexpr char kTwoTiers[] = R"({
  "name": "toy",
  "cores": 8,
  "tiers": [
    {"name": "ddr", "capacity_bytes": 1073741824, "bandwidth_gbps": 50, "latency_ns": 100,
     "migration_gbps": 4, "numa_node": 0},
    {"name": "hbm", "capacity_bytes": "0x10000000", "bandwidth_gbps": 200, "latency_ns": 120,
     "migration_gbps": 4}
  ]
})";

TEST(MachineTest, LoadsKnlPresetWithDdrDefaultAndMcdram) {
  absl::StatusOr<Machine> m = LoadMachine("knl");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->name, "knl");
  ASSERT_EQ(m->tiers.size(), 2u);
  EXPECT_EQ(m->tiers[0].name, "ddr");
  EXPECT_EQ(m->tiers[0].capacity_bytes, 96ull << 30);
  EXPECT_EQ(m->tiers[0].numa_node, 0);
  const TierSpec* hbm = m->Find("hbm");
  ASSERT_NE(hbm, nullptr);
  EXPECT_EQ(hbm->capacity_bytes, 16ull << 30);
  EXPECT_EQ(hbm->numa_node, 1);
  EXPECT_GT(hbm->bandwidth_gbps, 4 * m->tiers[0].bandwidth_gbps);
  EXPECT_GT(hbm->latency_ns, m->tiers[0].latency_ns);
  EXPECT_EQ(m->cache_line_bytes, 64);
  EXPECT_EQ(m->Find("remote"), nullptr);
  EXPECT_EQ(m->IndexOf("hbm"), 1);
  EXPECT_EQ(m->IndexOf("nvm"), -1);
}

TEST(MachineTest, LoadsDisaggPresetWithSlowLargeRemoteTier) {
  absl::StatusOr<Machine> m = LoadMachine("disagg");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->tiers.size(), 3u);
  const TierSpec* remote = m->Find("remote");
  ASSERT_NE(remote, nullptr);
  EXPECT_LT(remote->bandwidth_gbps, m->tiers[0].bandwidth_gbps);
  EXPECT_GT(remote->latency_ns, 4 * m->tiers[0].latency_ns);
  EXPECT_GT(remote->capacity_bytes, m->tiers[0].capacity_bytes);
  // The full bundled name works as well.
  absl::StatusOr<Machine> again = LoadMachine("machine_disagg");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *m);
}

TEST(MachineTest, ListsBundledPresets) {
  std::vector<std::string> names = BundledMachineNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "knl"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "disagg"), names.end());
}

TEST(MachineTest, ParsesDefaultsAndHexCapacity) {
  absl::StatusOr<Machine> m = ParseMachine(kTwoTiers, "toy.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->cores, 8);
  EXPECT_EQ(m->tiers[1].capacity_bytes, 0x10000000u);
  EXPECT_EQ(m->tiers[1].numa_node, -1);
  EXPECT_EQ(m->pebs_event, "MEM_UOPS_RETIRED:L2_MISS_LOADS");
}

TEST(MachineTest, LoadsFromFilePath) {
  const std::string path = ::testing::TempDir() + "/machine_test_toy.json";
  ASSERT_TRUE(WriteFileAtomically(path, kTwoTiers).ok());
  absl::StatusOr<Machine> m = LoadMachine(path);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->name, "toy");
}

TEST(MachineTest, UnknownNameIsNotFoundAndNamesThePresets) {
  absl::StatusOr<Machine> m = LoadMachine("no-such-machine");
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(absl::IsNotFound(m.status())) << m.status();
  EXPECT_NE(m.status().ToString().find("knl"), std::string::npos) << m.status();
}

TEST(MachineTest, RejectsMisspeltKeyWithFileAndLine) {
  const std::string text = R"({
  "name": "bad",
  "tiers": [
    {"name": "ddr", "capacity_bytes": 1024, "bandwith_gbps": 50, "latency_ns": 100,
     "migration_gbps": 4}
  ]
})";
  absl::StatusOr<Machine> m = ParseMachine(text, "bad.json");
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(m.status()));
  const std::string msg(m.status().message());
  EXPECT_NE(msg.find("bad.json:4:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bandwith_gbps"), std::string::npos) << msg;
}

TEST(MachineTest, RejectsNonPositiveLatencyWithFileAndLine) {
  const std::string text = R"({
  "name": "bad",
  "tiers": [
    {"name": "ddr", "capacity_bytes": 1024, "bandwidth_gbps": 50, "latency_ns": 100,
     "migration_gbps": 4},
    {"name": "hbm", "capacity_bytes": 1024, "bandwidth_gbps": 50,
     "latency_ns": 0, "migration_gbps": 4}
  ]
})";
  absl::StatusOr<Machine> m = ParseMachine(text, "bad.json");
  ASSERT_FALSE(m.ok());
  const std::string msg(m.status().message());
  EXPECT_NE(msg.find("bad.json:7:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tiers[1].latency_ns"), std::string::npos) << msg;
}

TEST(MachineTest, RejectsDuplicateTiersAndEmptyTierList) {
  const std::string dup = R"({"name": "d", "tiers": [
    {"name": "ddr", "capacity_bytes": 1, "bandwidth_gbps": 1, "latency_ns": 1, "migration_gbps": 1},
    {"name": "ddr", "capacity_bytes": 1, "bandwidth_gbps": 1, "latency_ns": 1, "migration_gbps": 1}
  ]})";
  absl::StatusOr<Machine> m = ParseMachine(dup, "dup.json");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().ToString().find("duplicate tier"), std::string::npos) << m.status();
  EXPECT_FALSE(ParseMachine(R"({"name": "e", "tiers": []})", "e.json").ok());
  EXPECT_FALSE(ParseMachine(R"({"name": "e"})", "e.json").ok());
}

TEST(MachineTest, JsonRoundTrips) {
  absl::StatusOr<Machine> m = LoadMachine("disagg");
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<Machine> back = ParseMachine(MachineToJson(*m), "roundtrip.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *m);
}

}  // namespace
}  // namespace tiergym
