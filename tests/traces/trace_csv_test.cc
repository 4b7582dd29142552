#include "traces/trace_csv.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "traces/base/file.h"

namespace tiergym {
namespace {

using ::testing::HasSubstr;

std::string Data(const std::string& name) {
  return std::string(TIERGYM_TESTDATA_DIR) + "/csv/" + name;
}

TEST(TraceCsvTest, ReadsTheFormatDocumentExample) {
  auto t = ReadTraceCsv(Data("valid_format_example.csv"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->metadata().app, "minife");
  EXPECT_EQ(t->metadata().device, "ddr");
  EXPECT_EQ(t->metadata().pebs_reset, 16u);
  EXPECT_EQ(t->metadata().event, "MEM_UOPS_RETIRED:L2_MISS_LOADS");
  EXPECT_EQ(t->metadata().page_size, 4096u);
  ASSERT_EQ(t->num_samples(), 3u);
  EXPECT_EQ(t->address()[0], 0x7f3a12345040u);
  EXPECT_EQ(t->address()[1], 140000000000u);  // decimal addresses are accepted
  EXPECT_EQ(t->instructions()[1], 20400u);
  EXPECT_EQ(t->phase()[2], 1u);
  ASSERT_EQ(t->num_phases(), 2u);
  EXPECT_EQ(t->marks()[1].time_ns, 913321u);
  EXPECT_EQ(t->PhaseInstructions(0), 5200000u);
  EXPECT_EQ(t->PhaseInstructions(1), 1234u);
  EXPECT_EQ(t->runtime_ns(), 41000000000u);
  EXPECT_EQ(t->PhaseBegin(1), 2u);
  EXPECT_FALSE(t->optional_columns().op);
}

TEST(TraceCsvTest, KeepsOptionalColumnsIgnoresUnknownOnesAndAcceptsCrlf) {
  auto t = ReadTraceCsv(Data("valid_extras_crlf.csv"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->metadata().device, "hbm");
  ASSERT_EQ(t->num_samples(), 4u);
  ASSERT_TRUE(t->optional_columns().op);
  ASSERT_TRUE(t->optional_columns().weight);
  ASSERT_TRUE(t->optional_columns().cpu);
  EXPECT_EQ(t->op()[0], 'L');
  EXPECT_EQ(t->op()[1], 'S');
  EXPECT_EQ(t->op()[2], kUnknownOp);
  EXPECT_EQ(t->weight()[0], 250u);
  EXPECT_EQ(t->weight()[1], kUnknownU32);
  EXPECT_EQ(t->cpu()[2], 5u);
  EXPECT_EQ(t->address()[1], 4096u);
  // Unknown header keys are kept, in order.
  bool has_host = false;
  for (const auto& [k, v] : t->metadata().entries) has_host |= (k == "host" && v == "knl01");
  EXPECT_TRUE(has_host);
}

TEST(TraceCsvTest, FormatThenParseGivesTheSameTrace) {
  for (const char* name : {"valid_format_example.csv", "valid_extras_crlf.csv"}) {
    auto t = ReadTraceCsv(Data(name));
    ASSERT_TRUE(t.ok()) << t.status();
    const std::string text = FormatTraceCsv(*t);
    auto back = ParseTraceCsv(text, "roundtrip");
    ASSERT_TRUE(back.ok()) << back.status() << "\n" << text;
    EXPECT_TRUE(SameContents(*t, *back)) << name;
    // Canonical text is a fixed point.
    EXPECT_EQ(FormatTraceCsv(*back), text);
  }
}

TEST(TraceCsvTest, WritesTheColumnLineAndHexAddresses) {
  auto t = ReadTraceCsv(Data("valid_format_example.csv"));
  ASSERT_TRUE(t.ok());
  const std::string text = FormatTraceCsv(*t);
  EXPECT_THAT(text, HasSubstr("# tiergym trace v1\n# app=minife\n# device=ddr\n"));
  EXPECT_THAT(text, HasSubstr("\ntype,time_ns,tid,phase,instructions,address\nM,0,0,0,0,\n"));
  EXPECT_THAT(text, HasSubstr("S,1533,0,0,20400,0x2098a67800\n"));
  EXPECT_THAT(text, HasSubstr("\nE,41000000000,0,1,1234,\n"));
}

TEST(TraceCsvTest, WriteTraceCsvReplacesTheFileAtomically) {
  auto t = ReadTraceCsv(Data("valid_format_example.csv"));
  ASSERT_TRUE(t.ok());
  const std::string path = ::testing::TempDir() + "/written.csv";
  ASSERT_TRUE(WriteTraceCsv(*t, path).ok());
  auto back = ReadTraceCsv(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(SameContents(*t, *back));
}

TEST(TraceCsvTest, MissingFileIsNotFound) {
  auto t = ReadTraceCsv(Data("does_not_exist.csv"));
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("does_not_exist.csv"));
}

// Every refusal rule of the format, each with a real malformed file: the error names the
// file, the line and the rule.
struct Refusal {
  const char* file;
  int line;
  const char* rule;
};

class TraceCsvRefusalTest : public ::testing::TestWithParam<Refusal> {};

TEST_P(TraceCsvRefusalTest, RefusesWithFileLineAndRule) {
  const Refusal& r = GetParam();
  auto t = ReadTraceCsv(Data(r.file));
  ASSERT_FALSE(t.ok()) << r.file << " was accepted";
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string expected = Data(r.file) + ":" + std::to_string(r.line) + ": " + r.rule + ":";
  EXPECT_THAT(std::string(t.status().message()), HasSubstr(expected));
}

INSTANTIATE_TEST_SUITE_P(
    EveryRule, TraceCsvRefusalTest,
    ::testing::Values(
        Refusal{"bad_version.csv", 1, "version"}, Refusal{"bad_no_version_line.csv", 1, "version"},
        Refusal{"bad_missing_device.csv", 3, "missing-device"},
        Refusal{"bad_page_size.csv", 3, "bad-header"},
        Refusal{"bad_column_line.csv", 3, "column-line"},
        Refusal{"bad_field_count.csv", 5, "field-count"},
        Refusal{"bad_too_many_fields.csv", 5, "field-count"},
        Refusal{"bad_non_numeric_time.csv", 5, "non-numeric"},
        Refusal{"bad_non_numeric_address.csv", 5, "non-numeric"},
        Refusal{"bad_negative_instructions.csv", 5, "non-numeric"},
        Refusal{"bad_tid_too_large.csv", 5, "non-numeric"},
        Refusal{"bad_unknown_row_type.csv", 5, "unknown-row-type"},
        Refusal{"bad_unsorted_time.csv", 6, "unsorted-time"},
        Refusal{"bad_sample_before_first_mark.csv", 4, "sample-before-first-mark"},
        Refusal{"bad_first_mark.csv", 4, "first-mark"},
        Refusal{"bad_phase_skip.csv", 6, "phase-skip"},
        Refusal{"bad_phase_mismatch.csv", 6, "phase-mismatch"},
        Refusal{"bad_missing_address.csv", 5, "address"},
        Refusal{"bad_address_on_mark.csv", 4, "address"}, Refusal{"bad_bad_op.csv", 5, "bad-op"},
        Refusal{"bad_row_after_end.csv", 6, "row-after-end"},
        Refusal{"bad_two_ends.csv", 6, "row-after-end"},
        Refusal{"bad_missing_end.csv", 5, "missing-end"},
        Refusal{"bad_truncated_last_line.csv", 6, "truncated-last-line"},
        Refusal{"bad_truncated_mid_row.csv", 5, "truncated-last-line"},
        Refusal{"bad_empty_body.csv", 2, "empty"}, Refusal{"bad_empty.csv", 0, "empty"}),
    [](const ::testing::TestParamInfo<Refusal>& info) {
      std::string name = info.param.file;
      name = name.substr(4, name.size() - 8);  // strip "bad_" and ".csv"
      return name;
    });

TEST(TraceCsvTest, ParsingDoesNotDependOnTheTextOutlivingTheTrace) {
  std::string text =
      "# tiergym trace v1\n# device=ddr\n"
      "type,time_ns,tid,phase,instructions,address\n"
      "M,0,0,0,0,\nS,5,1,0,10,0x1000\nE,9,0,0,20,\n";
  auto t = ParseTraceCsv(text, "inline");
  ASSERT_TRUE(t.ok()) << t.status();
  text.assign(text.size(), 'x');
  EXPECT_EQ(t->metadata().device, "ddr");
  EXPECT_EQ(t->address()[0], 0x1000u);
}

TEST(TraceCsvTest, AcceptsSamplesAtTheSameTimeAsTheNextMark) {
  auto t = ParseTraceCsv(
      "# tiergym trace v1\n# device=ddr\ntype,time_ns,tid,phase,instructions,address\n"
      "M,0,0,0,0,\nS,10,0,0,10,0x1000\nM,10,0,1,12,\nS,10,0,1,0,0x2000\nE,10,0,1,3,\n",
      "same-time");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->num_samples(), 2u);
  EXPECT_EQ(t->PhaseBegin(1), 1u);
}

TEST(TraceCsvTest, RejectsDuplicateKnownHeaderKeys) {
  auto t = ParseTraceCsv(
      "# tiergym trace v1\n# device=ddr\n# device=hbm\n"
      "type,time_ns,tid,phase,instructions,address\nM,0,0,0,0,\nE,1,0,0,0,\n",
      "dup");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("dup:3: bad-header"));
}

}  // namespace
}  // namespace tiergym
