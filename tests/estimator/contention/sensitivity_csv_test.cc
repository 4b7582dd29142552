#include "estimator/contention/sensitivity_csv.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tiergym::contention {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Data(const std::string& name) {
  return std::string(TIERGYM_CONTENTION_TESTDATA_DIR) + "/" + name;
}

// The error of reading a testdata file that must be refused with InvalidArgument; the
// message must start with the file's path, which is cut off.
template <typename Reader>
std::string ReadError(Reader reader, const std::string& name) {
  auto result = reader(Data(name));
  EXPECT_FALSE(result.ok()) << name << " was accepted";
  if (result.ok()) return "";
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << result.status();
  const std::string message(result.status().message());
  const std::string prefix = Data(name) + ":";
  EXPECT_THAT(message, StartsWith(prefix));
  return message.substr(std::min(prefix.size(), message.size()));
}

std::string CurvesError(const std::string& name) { return ReadError(ReadCurvesCsv, name); }
std::string AppsError(const std::string& name) { return ReadError(ReadAppsCsv, name); }
std::string PairsError(const std::string& name) { return ReadError(ReadPairsCsv, name); }

TEST(CurvesCsvTest, ReadsFamiliesSortedByAppWithCurvesByReadShare) {
  auto families = ReadCurvesCsv(Data("curves/valid.csv"));
  ASSERT_TRUE(families.ok()) << families.status();
  ASSERT_EQ(families->size(), 2u);
  const SensitivityFamily& lulesh = (*families)[0];
  EXPECT_EQ(lulesh.app, "lulesh");
  ASSERT_EQ(lulesh.curves.size(), 2u);
  EXPECT_EQ(lulesh.curves[0].read_pct, 50);
  ASSERT_EQ(lulesh.curves[0].points.size(), 2u);
  EXPECT_DOUBLE_EQ(lulesh.curves[0].points[1].interference_gbps, 2.3333);
  EXPECT_DOUBLE_EQ(lulesh.curves[0].points[1].normalized_perf, 0.98870);
  EXPECT_EQ(lulesh.curves[0].points[1].line, 3);
  // Repeated measurements of one point stay separate rows.
  EXPECT_EQ(lulesh.curves[1].points.size(), 2u);
  EXPECT_EQ((*families)[1].app, "minife");
  EXPECT_NE(lulesh.FindCurve(75), nullptr);
  EXPECT_EQ(lulesh.FindCurve(100), nullptr);
  EXPECT_EQ(FindFamily(*families, "minife"), &(*families)[1]);
  EXPECT_EQ(FindFamily(*families, "nekbone"), nullptr);
}

TEST(CurvesCsvTest, FindsColumnsByNameIgnoresExtrasBlankLinesCrlfAndSortsPoints) {
  auto families = ReadCurvesCsv(Data("curves/valid_reordered_crlf.csv"));
  ASSERT_TRUE(families.ok()) << families.status();
  ASSERT_EQ(families->size(), 2u);
  const SensitivityFamily* minife = FindFamily(*families, "minife");
  ASSERT_NE(minife, nullptr);
  ASSERT_EQ(minife->curves.size(), 1u);
  const SensitivityCurve& c = minife->curves[0];
  EXPECT_EQ(c.read_pct, 75);
  ASSERT_EQ(c.points.size(), 2u);
  EXPECT_EQ(c.points[0].interference_gbps, 2.0);  // sorted by interference
  EXPECT_EQ(c.points[0].normalized_perf, 0.97);
  EXPECT_EQ(c.points[0].line, 4);
  EXPECT_EQ(c.points[1].line, 3);
}

TEST(CurvesCsvTest, AColumnLineWithoutRowsIsAnEmptyFamilyList) {
  auto families = ReadCurvesCsv(Data("curves/header_only.csv"));
  ASSERT_TRUE(families.ok()) << families.status();
  EXPECT_TRUE(families->empty());
}

TEST(CurvesCsvTest, RefusesEachBrokenRuleNamingLineAndRule) {
  EXPECT_THAT(CurvesError("curves/bad_truncated_last_line.csv"),
              StartsWith("3: truncated-last-line:"));
  EXPECT_THAT(CurvesError("curves/bad_empty.csv"), StartsWith("1: empty:"));
  EXPECT_THAT(CurvesError("curves/bad_blank_only.csv"), StartsWith("2: empty:"));
  EXPECT_THAT(CurvesError("curves/bad_duplicate_column.csv"),
              StartsWith("1: duplicate-column: column \"app\" appears twice"));
  EXPECT_THAT(CurvesError("curves/bad_missing_column.csv"),
              StartsWith("1: missing-column: the column line"));
  EXPECT_THAT(CurvesError("curves/bad_missing_column.csv"), HasSubstr("\"interference_gbps\""));
  EXPECT_THAT(CurvesError("curves/bad_field_count.csv"),
              StartsWith("3: field-count: expected 4 fields"));
  EXPECT_THAT(CurvesError("curves/bad_non_numeric.csv"),
              StartsWith("3: non-numeric: interference_gbps \"fast\""));
  EXPECT_THAT(CurvesError("curves/bad_nan.csv"), StartsWith("2: non-numeric: normalized_perf"));
  EXPECT_THAT(CurvesError("curves/bad_empty_app.csv"), StartsWith("3: empty-app:"));
  EXPECT_THAT(CurvesError("curves/bad_read_pct_range.csv"),
              StartsWith("3: read-pct-range: read_pct 120"));
  EXPECT_THAT(CurvesError("curves/bad_interference_range.csv"),
              StartsWith("2: interference-range:"));
  EXPECT_THAT(CurvesError("curves/bad_perf_range.csv"),
              StartsWith("3: perf-range: normalized_perf 98.8"));
  EXPECT_THAT(CurvesError("curves/bad_perf_zero.csv"), StartsWith("2: perf-range:"));
}

TEST(CurvesCsvTest, MissingFileIsNotFound) {
  auto families = ReadCurvesCsv(Data("curves/no_such_file.csv"));
  EXPECT_EQ(families.status().code(), absl::StatusCode::kNotFound);
}

TEST(AppsCsvTest, ReadsAppsInFileOrderWithTheirReadShare) {
  auto apps = ReadAppsCsv(Data("apps/valid.csv"));
  ASSERT_TRUE(apps.ok()) << apps.status();
  ASSERT_EQ(apps->size(), 3u);
  EXPECT_EQ((*apps)[0].app, "lulesh");
  EXPECT_DOUBLE_EQ((*apps)[0].total_gbps(), 10.11);
  EXPECT_DOUBLE_EQ((*apps)[1].read_pct(), 90.0);
  EXPECT_DOUBLE_EQ((*apps)[2].read_pct(), 100.0);
  EXPECT_EQ((*apps)[2].line, 4);
  EXPECT_EQ(FindApp(*apps, "minife"), &(*apps)[1]);
  EXPECT_EQ(FindApp(*apps, "hotset"), nullptr);
}

TEST(AppsCsvTest, RefusesEachBrokenRuleNamingLineAndRule) {
  EXPECT_THAT(AppsError("apps/bad_empty_app.csv"), StartsWith("3: empty-app:"));
  EXPECT_THAT(AppsError("apps/bad_non_numeric.csv"),
              StartsWith("2: non-numeric: write_gbps \"2.9GB\""));
  EXPECT_THAT(AppsError("apps/bad_negative_bandwidth.csv"), StartsWith("2: negative-bandwidth:"));
  EXPECT_THAT(AppsError("apps/bad_zero_bandwidth.csv"), StartsWith("3: zero-bandwidth:"));
  EXPECT_THAT(AppsError("apps/bad_duplicate_app.csv"),
              StartsWith("4: duplicate-app: app \"lulesh\" already appears on line 2"));
  EXPECT_THAT(AppsError("apps/bad_missing_column.csv"), StartsWith("1: missing-column:"));
  EXPECT_THAT(AppsError("apps/bad_truncated_last_line.csv"), StartsWith("2: truncated-last-line:"));
}

TEST(PairsCsvTest, ReadsPairsInFileOrderRepeatsIncluded) {
  auto pairs = ReadPairsCsv(Data("pairs/valid.csv"));
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  ASSERT_EQ(pairs->size(), 3u);
  EXPECT_EQ((*pairs)[0].target, "lulesh");
  EXPECT_EQ((*pairs)[0].interferer, "minife");
  EXPECT_DOUBLE_EQ((*pairs)[0].normalized_perf, 0.9123);
  EXPECT_EQ((*pairs)[1].line, 3);
  EXPECT_DOUBLE_EQ((*pairs)[2].normalized_perf, 1.01);  // faster under noise is allowed
}

TEST(PairsCsvTest, RefusesEachBrokenRuleNamingLineAndRule) {
  EXPECT_THAT(PairsError("pairs/bad_empty_name.csv"),
              StartsWith("2: empty-name: the interferer is empty"));
  EXPECT_THAT(PairsError("pairs/bad_perf_range.csv"), StartsWith("2: perf-range:"));
  EXPECT_THAT(PairsError("pairs/bad_field_count.csv"), StartsWith("3: field-count:"));
  EXPECT_THAT(PairsError("pairs/bad_non_numeric.csv"),
              StartsWith("2: non-numeric: normalized_perf \"+0.9\""));
  EXPECT_THAT(PairsError("pairs/bad_missing_column.csv"), StartsWith("1: missing-column:"));
}

TEST(SensitivityCsvWriterTest, WritesWhatTheReadersReadBack) {
  auto families = ReadCurvesCsv(Data("curves/valid.csv"));
  ASSERT_TRUE(families.ok());
  auto text = CurvesCsvText(*families);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, StartsWith("app,read_pct,interference_gbps,normalized_perf\n"
                                "lulesh,50,1.4000,0.99321\n"));
  auto back = ParseCurvesCsv(*text, "written");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), families->size());
  EXPECT_EQ((*back)[0].curves[1].points[1].normalized_perf, 0.99402);

  auto apps_text = AppsCsvText({AppBandwidth{"lulesh", 7.21, 2.9}});
  ASSERT_TRUE(apps_text.ok());
  EXPECT_EQ(*apps_text, "app,read_gbps,write_gbps\nlulesh,7.2100,2.9000\n");
  auto pairs_text = PairsCsvText({MeasuredPair{"lulesh", "minife", 0.9123}});
  ASSERT_TRUE(pairs_text.ok());
  EXPECT_EQ(*pairs_text, "target,interferer,normalized_perf\nlulesh,minife,0.91230\n");
}

TEST(SensitivityCsvWriterTest, RefusesWhatTheReadersWouldRefuse) {
  EXPECT_FALSE(AppsCsvText({AppBandwidth{"a,b", 1, 1}}).ok());
  EXPECT_FALSE(AppsCsvText({AppBandwidth{"", 1, 1}}).ok());
  EXPECT_FALSE(AppsCsvText({AppBandwidth{"a", 0, 0}}).ok());
  EXPECT_FALSE(PairsCsvText({MeasuredPair{"a", "b\n", 0.9}}).ok());
  EXPECT_FALSE(PairsCsvText({MeasuredPair{"a", "b", 3.0}}).ok());
  SensitivityFamily f{"a", {SensitivityCurve{50, {CurvePoint{0.00001, 0.9}}}}};
  // 0.00001 GB/s prints as 0.0000, which the reader refuses.
  EXPECT_FALSE(CurvesCsvText({f}).ok());
}

}  // namespace
}  // namespace tiergym::contention
