#include "traces/base/args.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "traces/base/exit_status.h"

namespace tiergym {
namespace {

using ::testing::HasSubstr;

ArgParser MakeParser() {
  ArgParser p("tiergym demo", "A demo command.");
  p.AddPositional("IN", "input");
  p.AddPositional("OUT", "output", /*required=*/false);
  p.AddFlag("json", "json output");
  p.AddOption("gap", "BYTES", "range gap", "1048576");
  p.AddRepeatedOption("tier", "NAME", "a tier");
  return p;
}

TEST(ArgParserTest, ParsesPositionalsFlagsAndOptionsInAnyOrder) {
  ArgParser p = MakeParser();
  ASSERT_TRUE(
      p.Parse({"--json", "a.csv", "--gap=4096", "b.tgt", "--tier", "hbm", "--tier", "ddr"}).ok());
  EXPECT_EQ(p.Positional("IN"), "a.csv");
  EXPECT_EQ(p.Positional("OUT"), "b.tgt");
  EXPECT_TRUE(p.Flag("json"));
  EXPECT_EQ(*p.GetUint64("gap"), 4096u);
  EXPECT_EQ(p.GetAll("tier"), (std::vector<std::string>{"hbm", "ddr"}));
}

TEST(ArgParserTest, DefaultsApplyWhenOptionAbsent) {
  ArgParser p = MakeParser();
  ASSERT_TRUE(p.Parse({"a.csv"}).ok());
  EXPECT_FALSE(p.Given("gap"));
  EXPECT_EQ(*p.GetUint64("gap"), 1048576u);
  EXPECT_FALSE(p.Flag("json"));
  EXPECT_EQ(p.Positional("OUT"), "");
}

TEST(ArgParserTest, ErrorsNameTheArgumentAndPointToHelp) {
  ArgParser a = MakeParser();
  absl::Status s = a.Parse({"a.csv", "--colour"});
  EXPECT_THAT(std::string(s.message()), HasSubstr("not expected: --colour"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("tiergym demo --help"));
  ArgParser b = MakeParser();
  EXPECT_THAT(std::string(b.Parse({}).message()), HasSubstr("IN is required"));
  ArgParser c = MakeParser();
  EXPECT_THAT(std::string(c.Parse({"a", "b", "c"}).message()), HasSubstr("not expected: c"));
  ArgParser d = MakeParser();
  EXPECT_THAT(std::string(d.Parse({"a", "--gap"}).message()),
              HasSubstr("--gap: 1 required BYTES missing"));
  ArgParser e = MakeParser();
  ASSERT_TRUE(e.Parse({"a", "--gap", "12k"}).ok());
  EXPECT_THAT(std::string(e.GetUint64("gap").status().message()),
              HasSubstr("--gap wants a non-negative integer, got '12k'"));
}

TEST(ArgParserTest, HelpListsEveryOptionWithItsDefault) {
  ArgParser p = MakeParser();
  ASSERT_TRUE(p.Parse({"--help"}).ok());
  EXPECT_TRUE(p.help_requested());
  const std::string usage = p.Usage();
  EXPECT_THAT(usage, HasSubstr("usage: tiergym demo [options] IN [OUT]"));
  EXPECT_THAT(usage, HasSubstr("--gap BYTES"));
  EXPECT_THAT(usage, HasSubstr("(default: 1048576)"));
  EXPECT_THAT(usage, HasSubstr("--json"));
  EXPECT_THAT(usage, HasSubstr("(repeatable)"));
}

TEST(ArgParserTest, RestCollectsTheCommandAfterDoubleDash) {
  ArgParser p("tiergym-prof record", "Record.");
  p.AddOption("period", "N", "sample period", "16");
  p.AddRestPositional("CMD", "the command to profile");
  ASSERT_TRUE(p.Parse({"--period", "32", "--", "./app", "--size", "10"}).ok());
  EXPECT_EQ(*p.GetUint64("period"), 32u);
  EXPECT_EQ(p.Rest(), (std::vector<std::string>{"./app", "--size", "10"}));
  ArgParser q("tiergym-prof record", "Record.");
  q.AddFlag("verbose", "");
  q.AddRestPositional("CMD", "the command to profile");
  ASSERT_TRUE(q.Parse({"./app", "--verbose"}).ok());
  EXPECT_FALSE(q.Flag("verbose"));  // belongs to the profiled command
  EXPECT_EQ(q.Rest(), (std::vector<std::string>{"./app", "--verbose"}));
}

TEST(ArgParserTest, OptionsBeforeTheCommandMustBeKnownAndFlagsTakeNoValue) {
  ArgParser p("tiergym-prof record", "Record.");
  p.AddFlag("verbose", "");
  p.AddOption("offset", "N", "");
  p.AddRestPositional("CMD", "the command to profile");
  EXPECT_THAT(std::string(p.Parse({"--colour", "./app"}).message()),
              HasSubstr("not expected: --colour"));
  ArgParser q = MakeParser();
  EXPECT_FALSE(q.Parse({"a", "--json=1"}).ok());
  ArgParser r("tiergym-prof record", "Record.");
  r.AddOption("offset", "N", "");
  r.AddRestPositional("CMD", "the command to profile");
  ASSERT_TRUE(r.Parse({"--offset", "-5", "./app", "-x"}).ok());
  EXPECT_EQ(*r.GetInt64("offset"), -5);
  EXPECT_EQ(r.Rest(), (std::vector<std::string>{"./app", "-x"}));
}

TEST(ArgParserTest, TheLastValueOfAnOptionGivenTwiceWins) {
  ArgParser p = MakeParser();
  ASSERT_TRUE(p.Parse({"a", "--gap", "1", "--gap=2"}).ok());
  EXPECT_EQ(*p.GetUint64("gap"), 2u);
}

TEST(ArgParserTest, NumbersAreParsedStrictly) {
  ArgParser p("t", "");
  p.AddOption("x", "X", "", "0x10");
  p.AddOption("d", "D", "", "2.5");
  p.AddOption("i", "I", "", "-3");
  ASSERT_TRUE(p.Parse(std::vector<std::string>{}).ok());
  EXPECT_EQ(*p.GetUint64("x"), 16u);
  EXPECT_DOUBLE_EQ(*p.GetDouble("d"), 2.5);
  EXPECT_EQ(*p.GetInt64("i"), -3);
  EXPECT_FALSE(p.GetUint64("i").ok());
}

TEST(ArgParserTest, RequireNamesTheMissingOptionAndItsValue) {
  ArgParser p = MakeParser();
  ASSERT_TRUE(p.Parse({"a.csv"}).ok());
  absl::Status s = p.Require("gap");
  EXPECT_THAT(std::string(s.message()), HasSubstr("tiergym demo: --gap BYTES is required"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("--help"));
  ArgParser q = MakeParser();
  ASSERT_TRUE(q.Parse({"a.csv", "--gap", "1"}).ok());
  EXPECT_TRUE(q.Require("gap").ok());
}

TEST(ArgParserTest, ParseOrExitStopsOnHelpAndUsageErrorsOnly) {
  ArgParser help = MakeParser();
  EXPECT_EQ(help.ParseOrExit({"--help"}), 0);
  ArgParser bad = MakeParser();
  EXPECT_EQ(bad.ParseOrExit({"--nope"}), 2);
  ArgParser good = MakeParser();
  EXPECT_EQ(good.ParseOrExit({"a.csv"}), std::nullopt);
  EXPECT_EQ(good.Positional("IN"), "a.csv");
}

// RunCommand (traces/base/exit_status.h): the subcommand dispatch of tiergym and tiergym-prof.
int Dispatch(std::vector<std::string> argv_text, std::vector<std::string>* ran) {
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  const std::vector<Command> commands = {{"one", [&](const std::vector<std::string>& rest) {
                                            *ran = rest;
                                            return 7;
                                          }}};
  return RunCommand("prog", "1.2.3", "usage: prog COMMAND\n", commands,
                    static_cast<int>(argv.size()), argv.data());
}

TEST(RunCommandTest, RunsTheNamedCommandWithTheArgumentsAfterIt) {
  std::vector<std::string> ran;
  EXPECT_EQ(Dispatch({"prog", "one", "--x", "a"}, &ran), 7);
  EXPECT_THAT(ran, testing::ElementsAre("--x", "a"));
}

TEST(RunCommandTest, HelpAndVersionSucceedAndNoOrUnknownCommandIsAUsageError) {
  std::vector<std::string> ran = {"untouched"};
  testing::internal::CaptureStdout();
  EXPECT_EQ(Dispatch({"prog", "--help"}, &ran), kExitOk);
  EXPECT_EQ(Dispatch({"prog", "--version"}, &ran), kExitOk);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "usage: prog COMMAND\nprog 1.2.3\n");
  testing::internal::CaptureStderr();
  EXPECT_EQ(Dispatch({"prog"}, &ran), kExitUsage);
  EXPECT_EQ(Dispatch({"prog", "two"}, &ran), kExitUsage);
  EXPECT_THAT(testing::internal::GetCapturedStderr(),
              testing::HasSubstr("prog: unknown command 'two'"));
  EXPECT_THAT(ran, testing::ElementsAre("untouched"));
}

}  // namespace
}  // namespace tiergym
