// A small, strict JSON reader and writer (RFC 8259).
//
// The project reads placement JSON, machine descriptions and synthetic application
// models, and every CLI prints `--json` output; this is the one place that speaks JSON.
// Why not Debian's nlohmann-json (3.11.2): its values do not remember where they were
// parsed, and its SAX interface reports a position only with an error, while every check
// made after parsing here ("machine.json:7:22: tiers[1].bandwidth_gbps: ...") needs the
// value's line and column; it also keeps the last of duplicate keys and turns integers
// above 2^64 into doubles, both of which this reader refuses or keeps exact. The reader is
// fuzzed (tests/fuzz: placement, machine). Parsing refuses
// trailing commas, comments, duplicate object keys, NaN/Infinity, invalid escapes and
// trailing garbage; every error names the source, the line and column and what was
// expected. Values remember where they were parsed so that later checks of their
// contents (ObjectReader below) can point back to the file and line.
//
// Thread-safety: Value is immutable after parsing; Writer is not thread-safe.
#ifndef TIERGYM_TRACES_BASE_JSON_H_
#define TIERGYM_TRACES_BASE_JSON_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tiergym::json {

class Value {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  Value() = default;

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  // REQUIRES: the matching is_*() is true.
  bool bool_value() const { return bool_; }
  double number() const { return number_; }
  // The number exactly as written, so integers above 2^53 (addresses) stay exact.
  const std::string& number_text() const { return text_; }
  const std::string& string() const { return text_; }
  const std::vector<Value>& array() const { return array_; }
  // Members in the order they appear in the document; keys are unique.
  const std::vector<std::pair<std::string, Value>>& object() const { return object_; }

  // The member named `key`, or nullptr. REQUIRES: is_object().
  const Value* Find(std::string_view key) const;

  // The number as an exact unsigned 64-bit integer, or nullopt when it has a fraction,
  // an exponent, a sign or does not fit. REQUIRES: is_number().
  std::optional<uint64_t> AsUint64() const;

  // Where the value starts in its source (1-based).
  int line() const { return line_; }
  int column() const { return column_; }

  // Lowercase name of the type ("object", "number", ...) for error messages.
  static std::string_view TypeName(Type type);

 private:
  friend class Parser;

  Type type_ = Type::kNull;
  bool bool_ = false;
  double number_ = 0;
  std::string text_;
  std::vector<Value> array_;
  std::vector<std::pair<std::string, Value>> object_;
  int line_ = 0;
  int column_ = 0;
};

// Parses one JSON document. `source` names it in errors ("placement.json:3:14: ...").
// Fails with InvalidArgument.
absl::StatusOr<Value> Parse(std::string_view text, std::string_view source);

// Reads and parses a file. NotFound when it cannot be opened.
absl::StatusOr<Value> ParseFile(const std::string& path);

// Typed access to the members of one JSON object with errors that name the source, the
// line and the member's path, e.g.
//   "machine.json:7:22: tiers[1].bandwidth_gbps: expected a number, got a string".
// Typical use:
//   ObjectReader r(value, "machine.json", "tiers[1]");
//   TG_ASSIGN_OR_RETURN(std::string name, r.RequiredString("name"));
//   TG_ASSIGN_OR_RETURN(double bw, r.OptionalNumber("bandwidth_gbps", 100.0));
//   TG_RETURN_IF_ERROR(r.NoOtherKeys());
class ObjectReader {
 public:
  // `path` is the member path of `value` inside the document ("" for the root).
  ObjectReader(const Value& value, std::string source, std::string path);

  // InvalidArgument unless the value is an object.
  absl::Status CheckIsObject() const;

  bool Has(std::string_view key) const;
  absl::StatusOr<std::string> RequiredString(std::string_view key);
  absl::StatusOr<std::string> OptionalString(std::string_view key, std::string fallback);
  absl::StatusOr<double> RequiredNumber(std::string_view key);
  absl::StatusOr<double> OptionalNumber(std::string_view key, double fallback);
  // A non-negative integer written as a JSON integer or as a "0x..." / decimal string.
  absl::StatusOr<uint64_t> RequiredUint64(std::string_view key);
  absl::StatusOr<uint64_t> OptionalUint64(std::string_view key, uint64_t fallback);
  absl::StatusOr<bool> OptionalBool(std::string_view key, bool fallback);
  // The member, checked to be an array / object; nullptr-free.
  absl::StatusOr<const Value*> RequiredArray(std::string_view key);
  absl::StatusOr<const Value*> RequiredObject(std::string_view key);
  absl::StatusOr<const Value*> OptionalMember(std::string_view key);  // nullptr if absent

  // InvalidArgument naming the first member that no accessor above asked for, so that a
  // misspelt key ("bandwith_gbps") is reported instead of silently ignored.
  absl::Status NoOtherKeys() const;

  // NoOtherKeys() with `keys` counted as asked for: refuses any member outside `keys`.
  // Checked before the members themselves, it reports a misspelt key as such rather than
  // as the required key it was meant to be.
  absl::Status OnlyKeys(std::initializer_list<std::string_view> keys);

  // An InvalidArgument error located at `at` (or at this object) with this object's path.
  absl::Status Error(std::string_view key, const Value* at, std::string_view message) const;
  // Path of a member for nested readers: "tiers[1]" + "name" -> "tiers[1].name".
  std::string MemberPath(std::string_view key) const;
  const std::string& source() const { return source_; }

 private:
  const Value& value_;
  std::string source_;
  std::string path_;
  std::vector<std::string> used_;
};

// ObjectReader(value, source, path).OnlyKeys(keys), including the check that `value` is
// an object.
absl::Status OnlyKeys(const Value& value, std::string source, std::string path,
                      std::initializer_list<std::string_view> keys);

// Parses "0x1f" (hex) or "31" (decimal) into an unsigned 64-bit integer; nullopt on any
// other text or overflow.
std::optional<uint64_t> ParseUint64Text(std::string_view text);

// Streaming writer. Produces compact JSON, or indented JSON with `indent` > 0.
//   Writer w;
//   w.BeginObject(); w.Key("runtime_ns"); w.Uint(123); w.EndObject();
//   std::string s = w.Take();
// Doubles are written with enough digits to round-trip; NaN and infinities as null.
class Writer {
 public:
  explicit Writer(int indent = 0) : indent_(indent) {}

  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  void Key(std::string_view key);
  void String(std::string_view s);
  void Double(double d);
  void Int(int64_t i);
  void Uint(uint64_t u);
  void Bool(bool b);
  void Null();

  // The document written so far; the writer is left empty.
  std::string Take();

 private:
  void BeforeValue();
  void Newline();

  std::string out_;
  int indent_;
  int depth_ = 0;
  // Per open container: whether it already holds an element.
  std::vector<bool> has_element_;
  bool after_key_ = false;
};

// `s` as a JSON string literal, quotes included.
std::string Quote(std::string_view s);

}  // namespace tiergym::json

#endif  // TIERGYM_TRACES_BASE_JSON_H_
