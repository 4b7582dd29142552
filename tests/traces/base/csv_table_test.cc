// The strict CSV reader (traces/base/csv_table.h): columns found by name in any order,
// extra columns ignored, blank lines and CRLF accepted, and each rule it checks broken once,
// with the error naming the file, the line and the rule.
#include "traces/base/csv_table.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tiergym {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CsvTableTest, FindsColumnsByNameInAnyOrderAndIgnoresExtraOnes) {
  const std::string text = "extra,b,a\r\nx,2,1\n\n y,4,3\n";
  const absl::StatusOr<CsvTable> t = ParseCsvTable(text, "t.csv", {"a", "b"});
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->rows.size(), 2u);
  EXPECT_EQ(t->rows[0].line, 2);
  EXPECT_THAT(t->rows[0].fields, ElementsAre("1", "2"));
  EXPECT_EQ(t->rows[1].line, 4);  // the blank line 3 is skipped, not renumbered
  EXPECT_THAT(t->rows[1].fields, ElementsAre("3", "4"));
}

TEST(CsvTableTest, EachRuleIsNamedWithTheFileAndLine) {
  struct Case {
    std::string text, expected;
  };
  const Case cases[] = {
      {"a,b\n1,2", "t.csv:2: truncated-last-line"},
      {"", "t.csv:1: empty"},
      {"\n\n", "empty"},
      {"a,a,b\n1,2,3\n", "t.csv:1: duplicate-column"},
      {"a,c\n1,2\n", "t.csv:1: missing-column"},
      {"a,b\n1,2\n3\n", "t.csv:3: field-count"},
      {"a,b\n1,2,3\n", "t.csv:2: field-count"},
  };
  for (const Case& c : cases) {
    const absl::StatusOr<CsvTable> t = ParseCsvTable(c.text, "t.csv", {"a", "b"});
    ASSERT_FALSE(t.ok()) << "accepted: " << c.text;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(t.status().message()), HasSubstr(c.expected)) << c.text;
  }
}

TEST(CsvTableTest, RuleErrorReadsPathLineRuleDetail) {
  const absl::Status s = RuleError("dir/f.csv", 7, "field-count", "3 fields, expected 2");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "dir/f.csv:7: field-count: 3 fields, expected 2");
}

TEST(CsvTableTest, FiniteNumbersOnlyAndNothingAround) {
  EXPECT_EQ(ParseFiniteNumber("0.5"), 0.5);
  EXPECT_EQ(ParseFiniteNumber("-1"), -1.0);
  EXPECT_EQ(ParseFiniteNumber("1e-3"), 1e-3);
  for (const char* bad : {"", "nan", "inf", "-inf", "1,5", " 2", "2 ", "0x10", "+1", "1e999"}) {
    EXPECT_FALSE(ParseFiniteNumber(bad).has_value()) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace tiergym
