#include "traces/base/json.h"

#include <cmath>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tiergym::json {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Parses `text` expecting success.
Value MustParse(std::string_view text) {
  absl::StatusOr<Value> v = Parse(text, "test.json");
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *std::move(v) : Value();
}

// The error message of parsing `text`, which must fail with InvalidArgument.
std::string ParseError(std::string_view text) {
  absl::StatusOr<Value> v = Parse(text, "test.json");
  EXPECT_FALSE(v.ok()) << "parsed: " << text;
  if (v.ok()) return "";
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(v.status().message());
}

TEST(JsonParseTest, ReadsEveryScalarType) {
  EXPECT_TRUE(MustParse("null").is_null());
  Value t = MustParse("true");
  ASSERT_TRUE(t.is_bool());
  EXPECT_TRUE(t.bool_value());
  Value f = MustParse(" false ");
  ASSERT_TRUE(f.is_bool());
  EXPECT_FALSE(f.bool_value());
  Value s = MustParse(R"("hello")");
  ASSERT_TRUE(s.is_string());
  EXPECT_EQ(s.string(), "hello");
  Value n = MustParse("-12.5e1");
  ASSERT_TRUE(n.is_number());
  EXPECT_DOUBLE_EQ(n.number(), -125.0);
  EXPECT_EQ(n.number_text(), "-12.5e1");
}

TEST(JsonParseTest, ReadsNestedContainersInDocumentOrder) {
  Value v = MustParse(R"({"b": [1, {"x": null}, []], "a": {}, "c": "z"})");
  ASSERT_TRUE(v.is_object());
  ASSERT_EQ(v.object().size(), 3u);
  EXPECT_EQ(v.object()[0].first, "b");
  EXPECT_EQ(v.object()[1].first, "a");
  EXPECT_EQ(v.object()[2].first, "c");
  const Value* b = v.Find("b");
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(b->is_array());
  ASSERT_EQ(b->array().size(), 3u);
  EXPECT_EQ(b->array()[0].number(), 1);
  ASSERT_TRUE(b->array()[1].is_object());
  EXPECT_TRUE(b->array()[1].Find("x")->is_null());
  EXPECT_TRUE(b->array()[2].array().empty());
  EXPECT_TRUE(v.Find("a")->object().empty());
  EXPECT_EQ(v.Find("missing"), nullptr);
}

TEST(JsonParseTest, RemembersLineAndColumnOfValues) {
  Value v = MustParse("{\n  \"a\": 1,\n  \"b\":   [true]\n}");
  EXPECT_EQ(v.line(), 1);
  EXPECT_EQ(v.column(), 1);
  EXPECT_EQ(v.Find("a")->line(), 2);
  EXPECT_EQ(v.Find("a")->column(), 8);
  EXPECT_EQ(v.Find("b")->line(), 3);
  EXPECT_EQ(v.Find("b")->column(), 10);
  EXPECT_EQ(v.Find("b")->array()[0].column(), 11);
}

TEST(JsonParseTest, DecodesEscapesAndSurrogatePairsToUtf8) {
  Value v = MustParse(R"("q\" b\\ s\/ \b\f\n\r\t \u0041\u00e9\u20ac\ud83d\ude00")");
  EXPECT_EQ(v.string(), "q\" b\\ s/ \b\f\n\r\t A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
}

TEST(JsonParseTest, KeepsRawUtf8InStrings) {
  Value v = MustParse("\"caf\xC3\xA9 \xF0\x9F\x98\x80\"");
  EXPECT_EQ(v.string(), "caf\xC3\xA9 \xF0\x9F\x98\x80");
}

TEST(JsonParseTest, KeepsIntegersAbove2To53Exact) {
  Value v = MustParse("18446744073709551615");
  EXPECT_EQ(v.AsUint64(), std::optional<uint64_t>(18446744073709551615ull));
  Value w = MustParse("9007199254740993");  // 2^53 + 1, not a double
  EXPECT_EQ(w.AsUint64(), std::optional<uint64_t>(9007199254740993ull));
  EXPECT_EQ(w.number_text(), "9007199254740993");
}

TEST(JsonParseTest, AsUint64RefusesFractionsSignsExponentsAndOverflow) {
  EXPECT_EQ(MustParse("1.5").AsUint64(), std::nullopt);
  EXPECT_EQ(MustParse("1.0").AsUint64(), std::nullopt);
  EXPECT_EQ(MustParse("-1").AsUint64(), std::nullopt);
  EXPECT_EQ(MustParse("-0").AsUint64(), std::nullopt);
  EXPECT_EQ(MustParse("1e3").AsUint64(), std::nullopt);
  EXPECT_EQ(MustParse("18446744073709551616").AsUint64(), std::nullopt);
  EXPECT_EQ(MustParse("0").AsUint64(), std::optional<uint64_t>(0));
}

TEST(JsonParseTest, UnderflowingNumbersBecomeZero) { EXPECT_EQ(MustParse("1e-400").number(), 0.0); }

TEST(JsonParseTest, IgnoresLeadingByteOrderMark) {
  EXPECT_TRUE(MustParse("\xEF\xBB\xBF[1]").is_array());
}

TEST(JsonParseTest, RejectsEmptyDocument) {
  EXPECT_EQ(ParseError(""), "test.json:1:1: expected a value, got end of input");
  EXPECT_EQ(ParseError("  \n "), "test.json:2:2: expected a value, got end of input");
}

TEST(JsonParseTest, RejectsTrailingGarbage) {
  EXPECT_EQ(ParseError("{} x"),
            "test.json:1:4: expected end of input after the top-level value, got 'x'");
  EXPECT_THAT(ParseError("1 2"), StartsWith("test.json:1:3: expected end of input"));
}

TEST(JsonParseTest, RejectsTrailingCommas) {
  EXPECT_EQ(ParseError("{\"a\": 1,\n }"),
            "test.json:2:2: expected a member name after ',', got '}' (trailing comma)");
  EXPECT_EQ(ParseError("[1, 2, ]"),
            "test.json:1:8: expected a value after ',', got ']' (trailing comma)");
}

TEST(JsonParseTest, RejectsDuplicateKeysAtTheSecondKey) {
  EXPECT_EQ(ParseError("{\"a\": 1,\n \"a\": 2}"), "test.json:2:2: duplicate key \"a\" in object");
}

TEST(JsonParseTest, RejectsDuplicateKeysInLargeObjects) {
  std::string text = "{";
  for (int i = 0; i < 40; ++i) text += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ",";
  text += "\"k7\": 0}";
  EXPECT_THAT(ParseError(text), HasSubstr("duplicate key \"k7\""));
}

TEST(JsonParseTest, RejectsLeadingZeros) {
  EXPECT_EQ(ParseError("[01]"),
            "test.json:1:2: expected a number without leading zeros, got one starting with "
            "0 followed by a digit");
  EXPECT_THAT(ParseError("-007"), StartsWith("test.json:1:1: expected a number without"));
}

TEST(JsonParseTest, RejectsMalformedNumbers) {
  EXPECT_EQ(ParseError("1."),
            "test.json:1:3: expected a digit after the decimal point, got "
            "end of input");
  EXPECT_EQ(ParseError(".5"), "test.json:1:1: expected a value, got '.'");
  EXPECT_EQ(ParseError("1e"),
            "test.json:1:3: expected a digit in the exponent, got end of "
            "input");
  EXPECT_EQ(ParseError("-"), "test.json:1:2: expected a digit after '-', got end of input");
  EXPECT_EQ(ParseError("+1"), "test.json:1:1: expected a value, got '+'");
  EXPECT_THAT(ParseError("1e999"), HasSubstr("expected a number a double can hold"));
}

TEST(JsonParseTest, RejectsNanAndInfinity) {
  EXPECT_THAT(ParseError("[NaN]"), StartsWith("test.json:1:2: expected a value, got NaN"));
  EXPECT_THAT(ParseError("Infinity"), StartsWith("test.json:1:1: expected a value"));
  EXPECT_THAT(ParseError("-Infinity"), StartsWith("test.json:1:2: expected a digit, got "
                                                  "Infinity"));
}

TEST(JsonParseTest, RejectsComments) {
  EXPECT_THAT(ParseError("// hi\n1"), StartsWith("test.json:1:1: expected a value, got a "
                                                 "comment"));
  EXPECT_THAT(ParseError("[1, /* x */ 2]"), StartsWith("test.json:1:5: expected a value, got "
                                                       "a comment"));
}

TEST(JsonParseTest, RejectsControlCharactersInStrings) {
  EXPECT_THAT(ParseError("\"a\tb\""),
              StartsWith("test.json:1:3: expected '\"' or a character, got an unescaped "
                         "control character (byte 0x09)"));
  EXPECT_THAT(ParseError("\"a\nb\""), StartsWith("test.json:1:3: "));
}

TEST(JsonParseTest, RejectsBadEscapes) {
  EXPECT_THAT(ParseError(R"("\x")"), StartsWith("test.json:1:3: expected one of"));
  EXPECT_EQ(ParseError(R"("\u12g4")"),
            "test.json:1:6: expected four hex digits after \\u, got 'g'");
  EXPECT_THAT(ParseError(R"("\udc00")"),
              StartsWith("test.json:1:2: expected a high surrogate before a low surrogate"));
  EXPECT_THAT(ParseError(R"("\ud83dx")"),
              StartsWith("test.json:1:8: expected a \\u low surrogate escape"));
  EXPECT_THAT(ParseError(R"("\ud83d\u0041")"),
              StartsWith("test.json:1:8: expected a low surrogate"));
}

TEST(JsonParseTest, RejectsInvalidUtf8) {
  EXPECT_THAT(ParseError("\"\xC3\""), HasSubstr("invalid UTF-8"));
  EXPECT_THAT(ParseError("\"\xC0\xAF\""), HasSubstr("invalid UTF-8"));          // overlong
  EXPECT_THAT(ParseError("\"\xED\xA0\x80\""), HasSubstr("invalid UTF-8"));      // surrogate
  EXPECT_THAT(ParseError("\"\xF4\x90\x80\x80\""), HasSubstr("invalid UTF-8"));  // > U+10FFFF
}

TEST(JsonParseTest, RejectsUnterminatedContainersAndStrings) {
  EXPECT_EQ(ParseError("\"abc"),
            "test.json:1:5: expected '\"' to close the string, got end "
            "of input");
  EXPECT_EQ(ParseError("[1"),
            "test.json:1:3: expected ',' or ']' after an array element, got end of input");
  EXPECT_EQ(ParseError("{\"a\" 1}"),
            "test.json:1:6: expected ':' after member name \"a\", got '1'");
  EXPECT_EQ(ParseError("{\"a\": 1 \"b\": 2}"),
            "test.json:1:9: expected ',' or '}' after an object member, got '\"'");
  EXPECT_EQ(ParseError("{a: 1}"),
            "test.json:1:2: expected a member name in double quotes, got 'a'");
  EXPECT_EQ(ParseError("[tru]"), "test.json:1:2: expected a value, got 't'");
}

TEST(JsonParseTest, RejectsNestingDeeperThanTheLimit) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_THAT(ParseError(deep), HasSubstr("nesting deeper than 512 levels"));
  const std::string ok = std::string(512, '[') + std::string(512, ']');
  EXPECT_TRUE(Parse(ok, "test.json").ok());
  std::string nested;
  for (int i = 0; i < 600; ++i) nested += "{\"a\":";
  nested += "1" + std::string(600, '}');
  EXPECT_THAT(ParseError(nested), HasSubstr("nesting deeper than 512 levels"));
}

TEST(JsonParseTest, ParseFileReportsMissingFileAsNotFound) {
  absl::StatusOr<Value> v = ParseFile("/nonexistent/dir/x.json");
  EXPECT_EQ(v.status().code(), absl::StatusCode::kNotFound);
}

TEST(JsonParseTest, ParseFileNamesThePathInErrors) {
  const std::string path = ::testing::TempDir() + "/json_test_bad.json";
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("{\n  \"a\": tru\n}\n", f);
  std::fclose(f);
  absl::StatusOr<Value> v = ParseFile(path);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(std::string(v.status().message()), path + ":2:8: expected a value, got 't'");
}

TEST(ParseUint64TextTest, ReadsHexAndDecimal) {
  EXPECT_EQ(ParseUint64Text("0x1f"), std::optional<uint64_t>(31));
  EXPECT_EQ(ParseUint64Text("0X1F"), std::optional<uint64_t>(31));
  EXPECT_EQ(ParseUint64Text("31"), std::optional<uint64_t>(31));
  EXPECT_EQ(ParseUint64Text("0xffffffffffffffff"),
            std::optional<uint64_t>(std::numeric_limits<uint64_t>::max()));
  EXPECT_EQ(ParseUint64Text("18446744073709551615"),
            std::optional<uint64_t>(std::numeric_limits<uint64_t>::max()));
}

TEST(ParseUint64TextTest, RefusesEverythingElse) {
  for (const char* bad : {"", "0x", "-1", "+1", " 1", "1 ", "0x-1", "0x0x1", "1.0", "1e3", "0x1g",
                          "0x10000000000000000", "18446744073709551616", "abc"}) {
    EXPECT_EQ(ParseUint64Text(bad), std::nullopt) << bad;
  }
}

// ---------------------------------------------------------------------------------------

class ObjectReaderTest : public ::testing::Test {
 protected:
  Value doc_ = MustParse(
      "{\n"
      "  \"name\": \"hbm\",\n"
      "  \"bandwidth_gbps\": 400.5,\n"
      "  \"start\": \"0x7f3a12300000\",\n"
      "  \"size\": 18446744073709551615,\n"
      "  \"flag\": true,\n"
      "  \"list\": [1],\n"
      "  \"obj\": {}\n"
      "}\n");
};

TEST_F(ObjectReaderTest, ReadsTypedMembers) {
  ObjectReader r(doc_, "m.json", "tiers[1]");
  ASSERT_TRUE(r.CheckIsObject().ok());
  EXPECT_EQ(*r.RequiredString("name"), "hbm");
  EXPECT_EQ(*r.RequiredNumber("bandwidth_gbps"), 400.5);
  EXPECT_EQ(*r.RequiredUint64("start"), 0x7f3a12300000ull);
  EXPECT_EQ(*r.RequiredUint64("size"), 18446744073709551615ull);
  EXPECT_EQ(*r.OptionalBool("flag", false), true);
  EXPECT_EQ((*r.RequiredArray("list"))->array().size(), 1u);
  EXPECT_TRUE((*r.RequiredObject("obj"))->is_object());
  EXPECT_TRUE(r.NoOtherKeys().ok());
}

TEST_F(ObjectReaderTest, OptionalAccessorsFallBackWhenAbsent) {
  ObjectReader r(doc_, "m.json", "");
  EXPECT_EQ(*r.OptionalString("nope", "x"), "x");
  EXPECT_EQ(*r.OptionalNumber("nope2", 2.5), 2.5);
  EXPECT_EQ(*r.OptionalUint64("nope3", 7), 7u);
  EXPECT_EQ(*r.OptionalBool("nope4", true), true);
  EXPECT_EQ(*r.OptionalMember("nope5"), nullptr);
  EXPECT_FALSE(r.Has("nope"));
  EXPECT_TRUE(r.Has("name"));
}

TEST_F(ObjectReaderTest, WrongTypeNamesSourceLinePathAndTypes) {
  ObjectReader r(doc_, "machine.json", "tiers[1]");
  absl::StatusOr<double> bw = r.RequiredNumber("name");
  ASSERT_FALSE(bw.ok());
  EXPECT_EQ(bw.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(bw.status().message()),
            "machine.json:2:11: tiers[1].name: expected a number, got a string");
  EXPECT_EQ(std::string(r.RequiredString("list").status().message()),
            "machine.json:7:11: tiers[1].list: expected a string, got an array");
  EXPECT_EQ(std::string(r.OptionalBool("obj", false).status().message()),
            "machine.json:8:10: tiers[1].obj: expected true or false, got an object");
}

TEST_F(ObjectReaderTest, MissingRequiredKeyPointsAtTheObject) {
  ObjectReader r(doc_, "machine.json", "tiers[1]");
  EXPECT_EQ(std::string(r.RequiredString("latency_ns").status().message()),
            "machine.json:1:1: tiers[1]: missing required key \"latency_ns\"");
  ObjectReader root(doc_, "machine.json", "");
  EXPECT_EQ(std::string(root.RequiredArray("tiers").status().message()),
            "machine.json:1:1: missing required key \"tiers\"");
}

TEST_F(ObjectReaderTest, Uint64RefusesFractionsNegativesAndBadStrings) {
  Value v = MustParse(R"({"a": 1.5, "b": -3, "c": "0xzz", "d": true})");
  ObjectReader r(v, "x.json", "");
  EXPECT_EQ(std::string(r.RequiredUint64("a").status().message()),
            "x.json:1:7: a: expected a non-negative integer below 2^64, got 1.5");
  EXPECT_THAT(std::string(r.RequiredUint64("b").status().message()),
              HasSubstr("b: expected a non-negative integer below 2^64, got -3"));
  EXPECT_THAT(std::string(r.OptionalUint64("c", 0).status().message()),
              HasSubstr("c: expected a non-negative integer below 2^64 (decimal or "
                        "0x-prefixed hex), got the string \"0xzz\""));
  EXPECT_THAT(std::string(r.RequiredUint64("d").status().message()),
              HasSubstr("d: expected a non-negative integer (number or string), got a "
                        "boolean"));
}

TEST_F(ObjectReaderTest, NoOtherKeysNamesTheUnknownKeyAndSuggestsKnownOnes) {
  Value v = MustParse("{\"name\": \"x\",\n \"bandwith_gbps\": 1}");
  ObjectReader r(v, "machine.json", "tiers[0]");
  ASSERT_TRUE(r.RequiredString("name").ok());
  ASSERT_TRUE(r.OptionalNumber("bandwidth_gbps", 1).ok());
  absl::Status s = r.NoOtherKeys();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(s.message()),
            "machine.json:2:19: tiers[0]: unknown key \"bandwith_gbps\"; did you mean "
            "\"bandwidth_gbps\"?; known keys: name, bandwidth_gbps");
}

TEST_F(ObjectReaderTest, NoOtherKeysWithoutCloseMatchListsKnownKeysOnly) {
  Value v = MustParse(R"({"name": "x", "zzzzzz": 1})");
  ObjectReader r(v, "m.json", "");
  ASSERT_TRUE(r.RequiredString("name").ok());
  EXPECT_EQ(std::string(r.NoOtherKeys().message()),
            "m.json:1:25: unknown key \"zzzzzz\"; known keys: name");
}

TEST_F(ObjectReaderTest, CheckIsObjectRefusesOtherTypes) {
  Value v = MustParse("[1]");
  ObjectReader r(v, "p.json", "");
  EXPECT_EQ(std::string(r.CheckIsObject().message()),
            "p.json:1:1: expected an object, got an array");
  EXPECT_FALSE(r.RequiredString("x").ok());
  EXPECT_FALSE(r.Has("x"));
}

TEST_F(ObjectReaderTest, MemberPathJoinsWithDots) {
  EXPECT_EQ(ObjectReader(doc_, "m", "tiers[1]").MemberPath("name"), "tiers[1].name");
  EXPECT_EQ(ObjectReader(doc_, "m", "").MemberPath("name"), "name");
}

// ---------------------------------------------------------------------------------------

TEST(JsonWriterTest, WritesCompactJson) {
  Writer w;
  w.BeginObject();
  w.Key("a");
  w.Uint(18446744073709551615ull);
  w.Key("b");
  w.BeginArray();
  w.Int(-5);
  w.Bool(true);
  w.Null();
  w.String("s");
  w.BeginObject();
  w.EndObject();
  w.BeginArray();
  w.EndArray();
  w.EndArray();
  w.Key("c");
  w.Double(0.1);
  w.EndObject();
  EXPECT_EQ(w.Take(), R"({"a":18446744073709551615,"b":[-5,true,null,"s",{},[]],"c":0.1})");
  EXPECT_EQ(w.Take(), "");
}

TEST(JsonWriterTest, WritesIndentedJson) {
  Writer w(2);
  w.BeginObject();
  w.Key("a");
  w.BeginArray();
  w.Int(1);
  w.Int(2);
  w.EndArray();
  w.Key("e");
  w.BeginObject();
  w.EndObject();
  w.EndObject();
  EXPECT_EQ(w.Take(), "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"e\": {}\n}");
}

TEST(JsonWriterTest, WritesNonFiniteDoublesAsNull) {
  Writer w;
  w.BeginArray();
  w.Double(std::numeric_limits<double>::quiet_NaN());
  w.Double(std::numeric_limits<double>::infinity());
  w.Double(-std::numeric_limits<double>::infinity());
  w.EndArray();
  EXPECT_EQ(w.Take(), "[null,null,null]");
}

TEST(JsonWriterTest, DoublesRoundTripExactly) {
  for (double d : {0.1, 1.0 / 3, 1e300, -2.5e-310, 123456789.125, 0.0, -0.0,
                   std::numeric_limits<double>::max(), std::numeric_limits<double>::min()}) {
    Writer w;
    w.Double(d);
    const std::string text = w.Take();
    Value v = MustParse(text);
    ASSERT_TRUE(v.is_number()) << text;
    EXPECT_EQ(v.number(), d) << text;
    EXPECT_EQ(std::signbit(v.number()), std::signbit(d)) << text;
  }
}

TEST(JsonWriterTest, EscapesStringsAndKeys) {
  EXPECT_EQ(Quote("a\"b\\c\n\t\r\b\f\x01\x1f/\xC3\xA9"),
            "\"a\\\"b\\\\c\\n\\t\\r\\b\\f\\u0001\\u001f/\xC3\xA9\"");
  Writer w;
  w.BeginObject();
  w.Key("k\"ey");
  w.String("v\n");
  w.EndObject();
  EXPECT_EQ(w.Take(), "{\"k\\\"ey\":\"v\\n\"}");
}

TEST(JsonWriterTest, EveryStringRoundTripsThroughParse) {
  std::string all;
  for (int c = 1; c < 0x80; ++c) all.push_back(static_cast<char>(c));
  all += "\xF0\x9F\x98\x80 \xE2\x82\xAC";
  Value v = MustParse(Quote(all));
  EXPECT_EQ(v.string(), all);
}

TEST(JsonWriterTest, WrittenDocumentParsesBackToTheSameValues) {
  Writer w(4);
  w.BeginObject();
  w.Key("list");
  w.BeginArray();
  w.Uint(9007199254740993ull);
  w.Double(2.5);
  w.String("x,y");
  w.EndArray();
  w.Key("nested");
  w.BeginObject();
  w.Key("t");
  w.Bool(false);
  w.EndObject();
  w.EndObject();
  Value v = MustParse(w.Take());
  const Value& list = *v.Find("list");
  EXPECT_EQ(list.array()[0].AsUint64(), std::optional<uint64_t>(9007199254740993ull));
  EXPECT_EQ(list.array()[1].number(), 2.5);
  EXPECT_EQ(list.array()[2].string(), "x,y");
  EXPECT_FALSE(v.Find("nested")->Find("t")->bool_value());
}

TEST(JsonOnlyKeysTest, NamesAMisspeltKeyBeforeAnyRequiredOneIsChecked) {
  auto v = Parse("{\"name\": \"ddr\",\n \"bandwith_gbps\": 90}", "m.json");
  ASSERT_TRUE(v.ok());
  absl::Status s = OnlyKeys(*v, "m.json", "tiers[0]", {"name", "bandwidth_gbps"});
  EXPECT_THAT(std::string(s.message()), HasSubstr("m.json:2:"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("unknown key \"bandwith_gbps\""));
  EXPECT_TRUE(OnlyKeys(*v, "m.json", "", {"name", "bandwith_gbps"}).ok());
  auto array = Parse("[1]", "a.json");
  EXPECT_FALSE(OnlyKeys(*array, "a.json", "", {"x"}).ok());
}

}  // namespace
}  // namespace tiergym::json
