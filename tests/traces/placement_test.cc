#include "traces/placement.h"

#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tiergym {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

std::string Data(const std::string& name) {
  return std::string(TIERGYM_TESTDATA_DIR) + "/placements/" + name;
}

// The error message of reading testdata placement `name`, which must be refused with
// InvalidArgument; the message must start with the file's path.
std::string ReadError(const std::string& name) {
  absl::StatusOr<Placement> p = ReadPlacement(Data(name));
  EXPECT_FALSE(p.ok()) << name << " was accepted";
  if (p.ok()) return "";
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << p.status();
  std::string message(p.status().message());
  const std::string prefix = Data(name) + ":";
  EXPECT_EQ(message.substr(0, prefix.size()), prefix);
  return message.substr(std::min(prefix.size(), message.size()));
}

TEST(PlacementTest, ReadsRangesAndSortsThemByStart) {
  absl::StatusOr<Placement> p = ReadPlacement(Data("ranges.json"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->default_tier, "ddr");
  EXPECT_FALSE(p->uses_fractions());
  EXPECT_THAT(p->ranges, ElementsAre(PlacementRange{4096, 8192, "hbm"},
                                     PlacementRange{0x7f3a12300000, 0x7f3a12400000, "hbm"},
                                     PlacementRange{0x7f3a20000000, 0x7f3a20200000, "remote"}));
  EXPECT_THAT(p->Tiers(), ElementsAre("ddr", "hbm", "remote"));
}

TEST(PlacementTest, ReadsFractionsInListedOrder) {
  absl::StatusOr<Placement> p = ReadPlacement(Data("fractions.json"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->default_tier, "ddr");
  EXPECT_TRUE(p->uses_fractions());
  EXPECT_TRUE(p->ranges.empty());
  EXPECT_THAT(p->fractions, ElementsAre(Pair("remote", 0.2), Pair("hbm", 0.3)));
  EXPECT_THAT(p->Tiers(), ElementsAre("ddr", "remote", "hbm"));
}

TEST(PlacementTest, AcceptsDefaultAlone) {
  absl::StatusOr<Placement> p = ReadPlacement(Data("default_only.json"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->default_tier, "hbm");
  EXPECT_TRUE(p->ranges.empty());
  EXPECT_FALSE(p->uses_fractions());
  EXPECT_EQ(TierOf(*p, 0x1234), "hbm");
}

TEST(PlacementTest, AcceptsFractionsSummingToOneDespiteRounding) {
  // 0.1 + 0.2 + 0.7 is 1.0000000000000002 in doubles.
  absl::StatusOr<Placement> p = ReadPlacement(Data("fractions_sum_exactly_one.json"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->fractions.size(), 3u);
}

TEST(PlacementTest, KeepsAddressesAbove2To53Exact) {
  absl::StatusOr<Placement> p = ReadPlacement(Data("big_addresses.json"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->ranges,
              ElementsAre(PlacementRange{9007199254740993ull, 9007199254740995ull, "remote"},
                          PlacementRange{18446744073709547520ull, 0xffffffffffffffffull, "hbm"}));
  EXPECT_EQ(TierOf(*p, 9007199254740992ull), "ddr");
  EXPECT_EQ(TierOf(*p, 9007199254740994ull), "remote");
  EXPECT_EQ(TierOf(*p, 9007199254740995ull), "ddr");
  EXPECT_EQ(TierOf(*p, 0xfffffffffffffffeull), "hbm");
  EXPECT_EQ(TierOf(*p, 0xffffffffffffffffull), "ddr");  // end is exclusive
}

TEST(PlacementTest, TierOfFindsTheRangeHoldingTheAddress) {
  absl::StatusOr<Placement> p = ReadPlacement(Data("ranges.json"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(TierOf(*p, 0), "ddr");
  EXPECT_EQ(TierOf(*p, 4095), "ddr");
  EXPECT_EQ(TierOf(*p, 4096), "hbm");
  EXPECT_EQ(TierOf(*p, 8191), "hbm");
  EXPECT_EQ(TierOf(*p, 8192), "ddr");
  EXPECT_EQ(TierOf(*p, 0x7f3a12345040), "hbm");
  EXPECT_EQ(TierOf(*p, 0x7f3a12400000), "ddr");
  EXPECT_EQ(TierOf(*p, 0x7f3a20000000), "remote");
  EXPECT_EQ(TierOf(*p, 0x7f3a201fffff), "remote");
  EXPECT_EQ(TierOf(*p, 0x7f3a20200000), "ddr");
  EXPECT_EQ(TierOf(*p, ~0ull), "ddr");
}

TEST(PlacementTest, TierOfUnderFractionsIsTheDefault) {
  absl::StatusOr<Placement> p = ReadPlacement(Data("fractions.json"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(TierOf(*p, 0x7f3a12345040), "ddr");
}

TEST(PlacementTest, RangesRoundTripThroughFormat) {
  absl::StatusOr<Placement> p = ReadPlacement(Data("big_addresses.json"));
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string text = FormatPlacementJson(*p);
  EXPECT_THAT(text, HasSubstr("\"end\": \"0xffffffffffffffff\""));
  EXPECT_EQ(text.back(), '\n');
  absl::StatusOr<Placement> again = ParsePlacement(text, "formatted");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << text;
  EXPECT_EQ(*again, *p);
}

TEST(PlacementTest, FractionsRoundTripThroughWriteAndRead) {
  Placement p;
  p.default_tier = "ddr";
  p.fractions = {{"remote", 0.1}, {"hbm", 1.0 / 3}};
  const std::string path = ::testing::TempDir() + "/placement_test_fractions.json";
  ASSERT_TRUE(WritePlacement(p, path).ok());
  absl::StatusOr<Placement> again = ReadPlacement(path);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, p);
  std::remove(path.c_str());
}

TEST(PlacementTest, DefaultOnlyRoundTrips) {
  Placement p;
  p.default_tier = "remote";
  EXPECT_EQ(FormatPlacementJson(p), "{\n  \"default\": \"remote\"\n}\n");
  absl::StatusOr<Placement> again = ParsePlacement(FormatPlacementJson(p), "x");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, p);
}

TEST(PlacementTest, MissingFileIsNotFound) {
  absl::StatusOr<Placement> p = ReadPlacement(Data("no_such_placement.json"));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
}

TEST(PlacementTest, RejectsMalformedJson) {
  absl::StatusOr<Placement> p = ParsePlacement("{\"default\": \"ddr\",}", "p.json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(std::string(p.status().message()),
            "p.json:1:19: expected a member name after ',', got '}' (trailing comma)");
}

TEST(PlacementTest, RejectsDocumentThatIsNotAnObject) {
  EXPECT_EQ(ReadError("not_object.json"), "1:1: expected an object, got an array");
}

TEST(PlacementTest, RejectsMissingDefault) {
  EXPECT_EQ(ReadError("missing_default.json"), "1:1: missing required key \"default\"");
}

TEST(PlacementTest, RejectsEmptyDefault) {
  EXPECT_EQ(ReadError("empty_default.json"), "2:14: default: tier name is empty");
}

TEST(PlacementTest, RejectsRangesAndFractionsTogether) {
  EXPECT_EQ(ReadError("ranges_and_fractions.json"),
            "4:16: fractions: \"ranges\" and \"fractions\" may not both appear; a placement "
            "is either address ranges or fractions of the footprint");
}

TEST(PlacementTest, RejectsRangeWhoseStartIsNotBelowItsEnd) {
  EXPECT_EQ(ReadError("start_not_below_end.json"),
            "5:5: ranges[1]: start 0x5000 is not below end 0x5000 (ranges are half-open "
            "[start, end) and may not be empty)");
}

TEST(PlacementTest, RejectsStartThatIsNotAnAddress) {
  EXPECT_EQ(ReadError("bad_start.json"),
            "4:15: ranges[0].start: expected a non-negative integer below 2^64 (decimal or "
            "0x-prefixed hex), got the string \"0x12zz\"");
}

TEST(PlacementTest, RejectsNegativeEnd) {
  EXPECT_EQ(ReadError("negative_end.json"),
            "4:25: ranges[0].end: expected a non-negative integer below 2^64, got -4096");
}

TEST(PlacementTest, RejectsOverlappingRangesNamingBoth) {
  EXPECT_EQ(ReadError("overlapping.json"),
            "6:5: ranges[2]: ranges overlap: ranges[0] [0x1000, 0x3000) and ranges[2] "
            "[0x2000, 0x4000)");
}

TEST(PlacementTest, RejectsEmptyTierName) {
  EXPECT_EQ(ReadError("empty_tier.json"), "4:50: ranges[0].tier: tier name is empty");
}

TEST(PlacementTest, RejectsFractionAboveOne) {
  EXPECT_EQ(ReadError("fraction_above_one.json"),
            "3:24: fractions.hbm: fraction 1.5 is outside [0, 1]");
}

TEST(PlacementTest, RejectsNegativeFraction) {
  EXPECT_EQ(ReadError("fraction_negative.json"),
            "3:39: fractions.remote: fraction -0.1 is outside [0, 1]");
}

TEST(PlacementTest, RejectsFractionsSummingAboveOne) {
  EXPECT_EQ(ReadError("fractions_sum_above_one.json"),
            "3:16: fractions: fractions sum to 1.1, above 1");
}

TEST(PlacementTest, RejectsFractionForTheDefaultTier) {
  EXPECT_EQ(ReadError("fraction_names_default.json"),
            "3:36: fractions.ddr: names the default tier \"ddr\", which receives the pages "
            "no fraction takes; leave it out");
}

TEST(PlacementTest, RejectsTheSameTierTwiceInFractions) {
  EXPECT_EQ(ReadError("fraction_tier_twice.json"), "3:44: duplicate key \"hbm\" in object");
}

TEST(PlacementTest, RejectsUnknownTopLevelKeySuggestingKnownOnes) {
  EXPECT_EQ(ReadError("unknown_key.json"),
            "3:13: unknown key \"rangez\"; did you mean \"ranges\"?; known keys: default, "
            "ranges, fractions");
}

TEST(PlacementTest, RejectsMisspeltRangeKey) {
  EXPECT_EQ(ReadError("unknown_range_key.json"),
            "4:50: ranges[0]: unknown key \"teir\"; did you mean \"tier\"?; known keys: "
            "start, end, tier");
}

TEST(PlacementTest, RejectsExtraRangeKey) {
  EXPECT_THAT(ReadError("extra_range_key.json"),
              HasSubstr("ranges[0]: unknown key \"size\"; known keys: start, end, tier"));
}

TEST(PlacementTest, RejectsRangesThatAreNotAnArray) {
  absl::StatusOr<Placement> p =
      ParsePlacement(R"({"default": "ddr", "ranges": {"start": 1}})", "p.json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(std::string(p.status().message()),
            "p.json:1:30: ranges: expected an array, got an object");
}

TEST(PlacementTest, RejectsFractionThatIsNotANumber) {
  absl::StatusOr<Placement> p =
      ParsePlacement(R"({"default": "ddr", "fractions": {"hbm": "0.3"}})", "p.json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(std::string(p.status().message()),
            "p.json:1:41: fractions.hbm: expected a number, got a string");
}

}  // namespace
}  // namespace tiergym
