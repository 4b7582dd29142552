// The bundled profiles a server serves when given none (env/provider/bundled_profiles.h):
// their cache directory follows the machine's description (MachineDigest), so profiles
// generated on an earlier description of a bundled machine (xeonmax's derived HBM tier)
// are not served for the new one; the machines from measured curves get theirs, one run per
// tier, generated once.
#include "env/provider/bundled_profiles.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "traces/machine.h"

namespace tiergym::env {
namespace {

namespace fs = std::filesystem;

TEST(BundledProfilesTest, MachineDigestFollowsTheDescription) {
  absl::StatusOr<Machine> xeonmax = LoadMachine("xeonmax");
  absl::StatusOr<Machine> again = LoadMachine("machine_xeonmax");
  absl::StatusOr<Machine> cxl = LoadMachine("ddr5cxl");
  ASSERT_TRUE(xeonmax.ok() && again.ok() && cxl.ok());
  const std::string digest = MachineDigest(*xeonmax);
  EXPECT_EQ(digest.size(), 12u);
  EXPECT_EQ(digest.find_first_not_of("0123456789abcdef"), std::string::npos) << digest;
  EXPECT_EQ(MachineDigest(*again), digest);
  EXPECT_NE(MachineDigest(*cxl), digest);
  // One latency of one curve point changed: another digest.
  Machine changed = *xeonmax;
  ASSERT_FALSE(changed.tiers[1].curves.empty());
  changed.tiers[1].curves[0].points[3].second += 0.001;
  EXPECT_NE(MachineDigest(changed), digest);
}

TEST(BundledProfilesTest, Ddr5CxlProfilesAreGeneratedOncePerDescription) {
  const fs::path cache =
      fs::temp_directory_path() / ("tiergym_bundled_profiles." + std::to_string(::getpid()));
  fs::remove_all(cache);
  std::vector<std::string> generated;
  auto progress = [&generated](const std::string& line) { generated.push_back(line); };
  absl::StatusOr<std::vector<ServedProfile>> profiles =
      EnsureBundledProfiles(cache.string(), progress, "ddr5cxl");
  ASSERT_TRUE(profiles.ok()) << profiles.status();
  ASSERT_EQ(profiles->size(), BundledProfileApps().size());
  EXPECT_EQ(generated.size(), BundledProfileApps().size());
  const std::string root =
      (cache / "profiles-v1" /
       ("ddr5cxl-" + MachineDigest(*LoadMachine("ddr5cxl")) + "-seed1-s200000"))
          .string();
  for (const ServedProfile& p : *profiles) {
    EXPECT_EQ(p.dir, root + "/" + p.name + "/profile");
    EXPECT_TRUE(fs::is_regular_file(fs::path(p.dir) / "ddr.tgt")) << p.dir;
    EXPECT_TRUE(fs::is_regular_file(fs::path(p.dir) / "cxl.tgt")) << p.dir;
  }
  // Found, not generated, the second time.
  generated.clear();
  ASSERT_TRUE(EnsureBundledProfiles(cache.string(), progress, "ddr5cxl").ok());
  EXPECT_TRUE(generated.empty());
  // A name that is no preset is refused, naming the presets.
  absl::StatusOr<std::vector<ServedProfile>> bad =
      EnsureBundledProfiles(cache.string(), progress, "../knl");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ddr5cxl"), std::string_view::npos) << bad.status();
  fs::remove_all(cache);
}

}  // namespace
}  // namespace tiergym::env
