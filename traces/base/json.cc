#include "traces/base/json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>
#include <system_error>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_join.h"
#include "traces/base/file.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym::json {
namespace {

// Deeper documents are refused rather than risking the stack on hostile input.
constexpr int kMaxDepth = 512;

// Objects with more members than this check duplicate keys through a hash set.
constexpr size_t kLinearDuplicateCheckLimit = 16;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

int HexDigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendUtf8(std::string& out, uint32_t code_point) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

// Length of the well-formed UTF-8 sequence at the start of `s` (whose first byte is
// >= 0x80), or 0 when it is not well-formed (overlong forms, surrogates and code points
// above U+10FFFF are not).
size_t Utf8SequenceLength(std::string_view s) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const auto cont = [&](size_t i) { return i < s.size() && (b(i) & 0xC0) == 0x80; };
  const unsigned char c = b(0);
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(1) >= 0xA0) return 0;  // UTF-16 surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

// "a string", "an object", ... for error messages.
std::string WithArticle(Value::Type type) {
  switch (type) {
    case Value::Type::kNull:
      return "null";
    case Value::Type::kArray:
    case Value::Type::kObject:
      return StrCat("an ", Value::TypeName(type));
    default:
      return StrCat("a ", Value::TypeName(type));
  }
}

// A short, printable description of the byte at `p` for "got ..." in errors.
std::string Describe(std::string_view text, size_t pos) {
  if (pos >= text.size()) return "end of input";
  const unsigned char c = static_cast<unsigned char>(text[pos]);
  if (c == '\n') return "end of line";
  if (c >= 0x20 && c < 0x7F) return StrCat("'", static_cast<char>(c), "'");
  static constexpr char kHex[] = "0123456789abcdef";
  return StrCat("byte 0x", kHex[c >> 4], kHex[c & 0xF]);
}

// Levenshtein distance, for "did you mean" suggestions.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

// Recursive-descent parser over the whole text. Tracks the line and the start of the
// current line so that every value and every error carries a line and a (byte) column.
class Parser {
 public:
  Parser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  absl::StatusOr<Value> ParseDocument() {
    // A UTF-8 byte order mark is ignored, as RFC 8259 section 8.1 allows.
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") {
      pos_ = 3;
      line_start_ = 3;
    }
    Value root;
    SkipWhitespace();
    TG_RETURN_IF_ERROR(ParseValue(root, 0));
    SkipWhitespace();
    if (pos_ != text_.size()) {
      return ErrorHere(
          StrCat("expected end of input after the top-level value, got ", Describe(text_, pos_)));
    }
    return root;
  }

 private:
  absl::Status ErrorAt(size_t pos, std::string_view message) const {
    return absl::InvalidArgumentError(
        StrCat(source_, ":", line_, ":", pos - line_start_ + 1, ": ", message));
  }
  absl::Status ErrorHere(std::string_view message) const { return ErrorAt(pos_, message); }

  void SkipWhitespace() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\r') {
        ++pos_;
      } else if (c == '\n') {
        ++pos_;
        ++line_;
        line_start_ = pos_;
      } else {
        break;
      }
    }
  }

  bool Consume(std::string_view literal) {
    if (text_.substr(pos_, literal.size()) != literal) return false;
    pos_ += literal.size();
    return true;
  }

  void Mark(Value& v) const {
    v.line_ = line_;
    v.column_ = static_cast<int>(pos_ - line_start_ + 1);
  }

  absl::Status ParseValue(Value& out, int depth) {
    Mark(out);
    if (pos_ >= text_.size()) return ErrorHere("expected a value, got end of input");
    const char c = text_[pos_];
    switch (c) {
      case '{':
        return ParseObject(out, depth + 1);
      case '[':
        return ParseArray(out, depth + 1);
      case '"':
        out.type_ = Value::Type::kString;
        return ParseString(out.text_);
      case 't':
        if (Consume("true")) {
          out.type_ = Value::Type::kBool;
          out.bool_ = true;
          return absl::OkStatus();
        }
        break;
      case 'f':
        if (Consume("false")) {
          out.type_ = Value::Type::kBool;
          out.bool_ = false;
          return absl::OkStatus();
        }
        break;
      case 'n':
        if (Consume("null")) {
          out.type_ = Value::Type::kNull;
          return absl::OkStatus();
        }
        break;
      default:
        if (c == '-' || IsDigit(c)) return ParseNumber(out);
        break;
    }
    if (c == 'N' || c == 'I') {
      return ErrorHere("expected a value, got NaN or Infinity, which JSON does not have");
    }
    if (c == '/') return ErrorHere("expected a value, got a comment, which JSON does not have");
    return ErrorHere(StrCat("expected a value, got ", Describe(text_, pos_)));
  }

  absl::Status CheckDepth(int depth) const {
    if (depth > kMaxDepth) {
      return ErrorHere(StrCat("nesting deeper than ", kMaxDepth, " levels"));
    }
    return absl::OkStatus();
  }

  absl::Status ParseObject(Value& out, int depth) {
    TG_RETURN_IF_ERROR(CheckDepth(depth));
    out.type_ = Value::Type::kObject;
    ++pos_;  // '{'
    SkipWhitespace();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return absl::OkStatus();
    }
    absl::flat_hash_set<std::string> seen;  // filled only for large objects
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] != '"') {
        const bool after_comma = !out.object_.empty();
        if (after_comma && pos_ < text_.size() && text_[pos_] == '}') {
          return ErrorHere("expected a member name after ',', got '}' (trailing comma)");
        }
        return ErrorHere(
            StrCat("expected a member name in double quotes, got ", Describe(text_, pos_)));
      }
      const size_t key_pos = pos_;
      std::string key;
      TG_RETURN_IF_ERROR(ParseString(key));
      if (IsDuplicate(out, seen, key)) {
        return ErrorAt(key_pos, StrCat("duplicate key ", Quote(key), " in object"));
      }
      SkipWhitespace();
      if (pos_ >= text_.size() || text_[pos_] != ':') {
        return ErrorHere(
            StrCat("expected ':' after member name ", Quote(key), ", got ", Describe(text_, pos_)));
      }
      ++pos_;
      SkipWhitespace();
      out.object_.emplace_back(std::move(key), Value());
      TG_RETURN_IF_ERROR(ParseValue(out.object_.back().second, depth));
      SkipWhitespace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        SkipWhitespace();
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        return absl::OkStatus();
      }
      return ErrorHere(
          StrCat("expected ',' or '}' after an object member, got ", Describe(text_, pos_)));
    }
  }

  static bool IsDuplicate(const Value& object, absl::flat_hash_set<std::string>& seen,
                          const std::string& key) {
    const auto& members = object.object_;
    if (members.size() < kLinearDuplicateCheckLimit) {
      for (const auto& [k, v] : members) {
        if (k == key) return true;
      }
      return false;
    }
    if (seen.empty()) {
      for (const auto& [k, v] : members) seen.insert(k);
    }
    return !seen.insert(key).second;
  }

  absl::Status ParseArray(Value& out, int depth) {
    TG_RETURN_IF_ERROR(CheckDepth(depth));
    out.type_ = Value::Type::kArray;
    ++pos_;  // '['
    SkipWhitespace();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return absl::OkStatus();
    }
    while (true) {
      if (!out.array_.empty() && pos_ < text_.size() && text_[pos_] == ']') {
        return ErrorHere("expected a value after ',', got ']' (trailing comma)");
      }
      out.array_.emplace_back();
      TG_RETURN_IF_ERROR(ParseValue(out.array_.back(), depth));
      SkipWhitespace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        SkipWhitespace();
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
        return absl::OkStatus();
      }
      return ErrorHere(
          StrCat("expected ',' or ']' after an array element, got ", Describe(text_, pos_)));
    }
  }

  // Reads four hex digits at pos_.
  absl::StatusOr<uint32_t> ParseHex4() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const int d = pos_ < text_.size() ? HexDigitValue(text_[pos_]) : -1;
      if (d < 0) {
        return ErrorHere(StrCat("expected four hex digits after \\u, got ", Describe(text_, pos_)));
      }
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    return v;
  }

  absl::Status ParseString(std::string& out) {
    ++pos_;  // opening quote
    out.clear();
    while (true) {
      // Copy the run of ordinary ASCII characters in one go.
      size_t run = pos_;
      while (run < text_.size()) {
        const unsigned char c = static_cast<unsigned char>(text_[run]);
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
        ++run;
      }
      out.append(text_.data() + pos_, run - pos_);
      pos_ = run;
      if (pos_ >= text_.size()) {
        return ErrorHere("expected '\"' to close the string, got end of input");
      }
      const unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return absl::OkStatus();
      }
      if (c < 0x20) {
        return ErrorHere(
            StrCat("expected '\"' or a character, got an unescaped control "
                   "character (",
                   Describe(text_, pos_), ") inside a string"));
      }
      if (c >= 0x80) {
        const size_t n = Utf8SequenceLength(text_.substr(pos_));
        if (n == 0) return ErrorHere("expected UTF-8 text, got an invalid UTF-8 sequence");
        out.append(text_.data() + pos_, n);
        pos_ += n;
        continue;
      }
      // Backslash escape.
      ++pos_;
      if (pos_ >= text_.size()) return ErrorHere("expected an escape, got end of input");
      const char e = text_[pos_];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out.push_back(e);
          ++pos_;
          break;
        case 'b':
          out.push_back('\b');
          ++pos_;
          break;
        case 'f':
          out.push_back('\f');
          ++pos_;
          break;
        case 'n':
          out.push_back('\n');
          ++pos_;
          break;
        case 'r':
          out.push_back('\r');
          ++pos_;
          break;
        case 't':
          out.push_back('\t');
          ++pos_;
          break;
        case 'u': {
          const size_t escape_pos = pos_ - 1;
          ++pos_;
          TG_ASSIGN_OR_RETURN(uint32_t unit, ParseHex4());
          if (unit >= 0xDC00 && unit <= 0xDFFF) {
            return ErrorAt(escape_pos,
                           "expected a high surrogate before a low surrogate "
                           "escape, got an unpaired low surrogate");
          }
          if (unit >= 0xD800 && unit <= 0xDBFF) {
            if (!Consume("\\u")) {
              return ErrorHere("expected a \\u low surrogate escape after a high surrogate, got " +
                               Describe(text_, pos_));
            }
            TG_ASSIGN_OR_RETURN(uint32_t low, ParseHex4());
            if (low < 0xDC00 || low > 0xDFFF) {
              return ErrorAt(pos_ - 6,
                             "expected a low surrogate (\\uDC00-\\uDFFF) after a high "
                             "surrogate");
            }
            unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
          }
          AppendUtf8(out, unit);
          break;
        }
        default:
          return ErrorHere(StrCat("expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u, got ",
                                  Describe(text_, pos_), " after a backslash"));
      }
    }
  }

  absl::Status ParseNumber(Value& out) {
    const size_t start = pos_;
    if (text_[pos_] == '-') ++pos_;
    if (pos_ >= text_.size() || !IsDigit(text_[pos_])) {
      if (pos_ < text_.size() && text_[pos_] == 'I') {
        return ErrorHere("expected a digit, got Infinity, which JSON does not have");
      }
      return ErrorHere(StrCat("expected a digit after '-', got ", Describe(text_, pos_)));
    }
    if (text_[pos_] == '0') {
      ++pos_;
      if (pos_ < text_.size() && IsDigit(text_[pos_])) {
        return ErrorAt(start,
                       "expected a number without leading zeros, got one starting "
                       "with 0 followed by a digit");
      }
    } else {
      while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
    }
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (pos_ >= text_.size() || !IsDigit(text_[pos_])) {
        return ErrorHere(
            StrCat("expected a digit after the decimal point, got ", Describe(text_, pos_)));
      }
      while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (pos_ >= text_.size() || !IsDigit(text_[pos_])) {
        return ErrorHere(StrCat("expected a digit in the exponent, got ", Describe(text_, pos_)));
      }
      while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
    }
    out.type_ = Value::Type::kNumber;
    out.text_.assign(text_.data() + start, pos_ - start);
    const char* first = out.text_.data();
    const char* last = first + out.text_.size();
    auto [ptr, ec] = std::from_chars(first, last, out.number_);
    if (ec == std::errc::result_out_of_range) {
      // Underflow rounds to zero or a subnormal; overflow has no double to give.
      out.number_ = std::strtod(out.text_.c_str(), nullptr);
      if (std::isinf(out.number_)) {
        return ErrorAt(start, StrCat("expected a number a double can hold, got ", out.text_));
      }
    } else if (ec != std::errc() || ptr != last) {
      return ErrorAt(start, StrCat("expected a number, got ", out.text_));
    }
    return absl::OkStatus();
  }

  std::string_view text_;
  std::string_view source_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
};

// ---------------------------------------------------------------------------------------
// Value

const Value* Value::Find(std::string_view key) const {
  for (const auto& [k, v] : object_) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::optional<uint64_t> Value::AsUint64() const {
  if (type_ != Type::kNumber || text_.empty()) return std::nullopt;
  for (char c : text_) {
    if (!IsDigit(c)) return std::nullopt;
  }
  uint64_t v = 0;
  const char* last = text_.data() + text_.size();
  auto [ptr, ec] = std::from_chars(text_.data(), last, v);
  if (ec != std::errc() || ptr != last) return std::nullopt;
  return v;
}

std::string_view Value::TypeName(Type type) {
  switch (type) {
    case Type::kNull:
      return "null";
    case Type::kBool:
      return "boolean";
    case Type::kNumber:
      return "number";
    case Type::kString:
      return "string";
    case Type::kArray:
      return "array";
    case Type::kObject:
      return "object";
  }
  return "unknown";
}

absl::StatusOr<Value> Parse(std::string_view text, std::string_view source) {
  return Parser(text, source).ParseDocument();
}

absl::StatusOr<Value> ParseFile(const std::string& path) {
  TG_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return Parse(text, path);
}

std::optional<uint64_t> ParseUint64Text(std::string_view text) {
  int base = 10;
  if (text.size() >= 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.remove_prefix(2);
  }
  if (text.empty()) return std::nullopt;
  uint64_t v = 0;
  const char* last = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), last, v, base);
  if (ec != std::errc() || ptr != last) return std::nullopt;
  return v;
}

// ---------------------------------------------------------------------------------------
// ObjectReader

ObjectReader::ObjectReader(const Value& value, std::string source, std::string path)
    : value_(value), source_(std::move(source)), path_(std::move(path)) {}

absl::Status ObjectReader::CheckIsObject() const {
  if (value_.is_object()) return absl::OkStatus();
  return Error("", &value_, StrCat("expected an object, got ", WithArticle(value_.type())));
}

bool ObjectReader::Has(std::string_view key) const {
  return value_.is_object() && value_.Find(key) != nullptr;
}

std::string ObjectReader::MemberPath(std::string_view key) const {
  if (path_.empty()) return std::string(key);
  if (key.empty()) return path_;
  return StrCat(path_, ".", key);
}

absl::Status ObjectReader::Error(std::string_view key, const Value* at,
                                 std::string_view message) const {
  const Value& where = at != nullptr ? *at : value_;
  const std::string path = key.empty() ? path_ : MemberPath(key);
  std::string out = StrCat(source_, ":", where.line(), ":", where.column(), ": ");
  if (!path.empty()) StrAppend(&out, path, ": ");
  StrAppend(&out, message);
  return absl::InvalidArgumentError(out);
}

absl::StatusOr<const Value*> ObjectReader::OptionalMember(std::string_view key) {
  TG_RETURN_IF_ERROR(CheckIsObject());
  if (std::find(used_.begin(), used_.end(), key) == used_.end()) {
    used_.emplace_back(key);
  }
  return value_.Find(key);
}

namespace {

absl::StatusOr<const Value*> Require(ObjectReader& reader, const Value* member,
                                     std::string_view key) {
  if (member == nullptr) {
    return reader.Error("", nullptr, StrCat("missing required key ", Quote(key)));
  }
  return member;
}

absl::Status WrongType(const ObjectReader& reader, std::string_view key, const Value& v,
                       std::string_view expected) {
  return reader.Error(key, &v, StrCat("expected ", expected, ", got ", WithArticle(v.type())));
}

}  // namespace

absl::StatusOr<std::string> ObjectReader::RequiredString(std::string_view key) {
  TG_ASSIGN_OR_RETURN(const Value* m, OptionalMember(key));
  TG_ASSIGN_OR_RETURN(m, Require(*this, m, key));
  if (!m->is_string()) return WrongType(*this, key, *m, "a string");
  return m->string();
}

absl::StatusOr<std::string> ObjectReader::OptionalString(std::string_view key,
                                                         std::string fallback) {
  TG_ASSIGN_OR_RETURN(const Value* m, OptionalMember(key));
  if (m == nullptr) return fallback;
  if (!m->is_string()) return WrongType(*this, key, *m, "a string");
  return m->string();
}

absl::StatusOr<double> ObjectReader::RequiredNumber(std::string_view key) {
  TG_ASSIGN_OR_RETURN(const Value* m, OptionalMember(key));
  TG_ASSIGN_OR_RETURN(m, Require(*this, m, key));
  if (!m->is_number()) return WrongType(*this, key, *m, "a number");
  return m->number();
}

absl::StatusOr<double> ObjectReader::OptionalNumber(std::string_view key, double fallback) {
  TG_ASSIGN_OR_RETURN(const Value* m, OptionalMember(key));
  if (m == nullptr) return fallback;
  if (!m->is_number()) return WrongType(*this, key, *m, "a number");
  return m->number();
}

namespace {

absl::StatusOr<uint64_t> MemberAsUint64(const ObjectReader& reader, std::string_view key,
                                        const Value& v) {
  if (v.is_number()) {
    if (std::optional<uint64_t> u = v.AsUint64()) return *u;
    return reader.Error(
        key, &v, StrCat("expected a non-negative integer below 2^64, got ", v.number_text()));
  }
  if (v.is_string()) {
    if (std::optional<uint64_t> u = ParseUint64Text(v.string())) return *u;
    return reader.Error(key, &v,
                        StrCat("expected a non-negative integer below 2^64 (decimal or "
                               "0x-prefixed hex), got the string ",
                               Quote(v.string())));
  }
  return WrongType(reader, key, v, "a non-negative integer (number or string)");
}

}  // namespace

absl::StatusOr<uint64_t> ObjectReader::RequiredUint64(std::string_view key) {
  TG_ASSIGN_OR_RETURN(const Value* m, OptionalMember(key));
  TG_ASSIGN_OR_RETURN(m, Require(*this, m, key));
  return MemberAsUint64(*this, key, *m);
}

absl::StatusOr<uint64_t> ObjectReader::OptionalUint64(std::string_view key, uint64_t fallback) {
  TG_ASSIGN_OR_RETURN(const Value* m, OptionalMember(key));
  if (m == nullptr) return fallback;
  return MemberAsUint64(*this, key, *m);
}

absl::StatusOr<bool> ObjectReader::OptionalBool(std::string_view key, bool fallback) {
  TG_ASSIGN_OR_RETURN(const Value* m, OptionalMember(key));
  if (m == nullptr) return fallback;
  if (!m->is_bool()) return WrongType(*this, key, *m, "true or false");
  return m->bool_value();
}

absl::StatusOr<const Value*> ObjectReader::RequiredArray(std::string_view key) {
  TG_ASSIGN_OR_RETURN(const Value* m, OptionalMember(key));
  TG_ASSIGN_OR_RETURN(m, Require(*this, m, key));
  if (!m->is_array()) return WrongType(*this, key, *m, "an array");
  return m;
}

absl::StatusOr<const Value*> ObjectReader::RequiredObject(std::string_view key) {
  TG_ASSIGN_OR_RETURN(const Value* m, OptionalMember(key));
  TG_ASSIGN_OR_RETURN(m, Require(*this, m, key));
  if (!m->is_object()) return WrongType(*this, key, *m, "an object");
  return m;
}

absl::Status ObjectReader::NoOtherKeys() const {
  TG_RETURN_IF_ERROR(CheckIsObject());
  for (const auto& [key, member] : value_.object()) {
    if (std::find(used_.begin(), used_.end(), key) != used_.end()) continue;
    std::string message = StrCat("unknown key ", Quote(key));
    const std::string* closest = nullptr;
    size_t best = std::string::npos;
    for (const std::string& known : used_) {
      const size_t d = EditDistance(key, known);
      if (d < best) {
        best = d;
        closest = &known;
      }
    }
    if (closest != nullptr && best <= std::max<size_t>(2, closest->size() / 3)) {
      StrAppend(&message, "; did you mean ", Quote(*closest), "?");
    }
    if (used_.empty()) {
      StrAppend(&message, "; this object takes no keys");
    } else {
      StrAppend(&message, "; known keys: ", absl::StrJoin(used_, ", "));
    }
    return Error("", &member, message);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// Writer

namespace {

void AppendQuoted(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  size_t run = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        out.append("\\\"");
        break;
      case '\\':
        out.append("\\\\");
        break;
      case '\b':
        out.append("\\b");
        break;
      case '\f':
        out.append("\\f");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\r':
        out.append("\\r");
        break;
      case '\t':
        out.append("\\t");
        break;
      default:
        out.append("\\u00");
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 0xF]);
        break;
    }
  }
  out.append(s.data() + run, s.size() - run);
  out.push_back('"');
}

}  // namespace

std::string Quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  AppendQuoted(out, s);
  return out;
}

void Writer::Newline() {
  if (indent_ <= 0) return;
  out_.push_back('\n');
  out_.append(static_cast<size_t>(depth_) * static_cast<size_t>(indent_), ' ');
}

void Writer::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (has_element_.empty()) return;  // top level
  if (has_element_.back()) out_.push_back(',');
  Newline();
  has_element_.back() = true;
}

void Writer::BeginObject() {
  BeforeValue();
  out_.push_back('{');
  has_element_.push_back(false);
  ++depth_;
}

void Writer::EndObject() {
  --depth_;
  const bool had = !has_element_.empty() && has_element_.back();
  if (!has_element_.empty()) has_element_.pop_back();
  if (had) Newline();
  out_.push_back('}');
}

void Writer::BeginArray() {
  BeforeValue();
  out_.push_back('[');
  has_element_.push_back(false);
  ++depth_;
}

void Writer::EndArray() {
  --depth_;
  const bool had = !has_element_.empty() && has_element_.back();
  if (!has_element_.empty()) has_element_.pop_back();
  if (had) Newline();
  out_.push_back(']');
}

void Writer::Key(std::string_view key) {
  if (!has_element_.empty()) {
    if (has_element_.back()) out_.push_back(',');
    has_element_.back() = true;
  }
  Newline();
  AppendQuoted(out_, key);
  out_.push_back(':');
  if (indent_ > 0) out_.push_back(' ');
  after_key_ = true;
}

void Writer::String(std::string_view s) {
  BeforeValue();
  AppendQuoted(out_, s);
}

void Writer::Double(double d) {
  BeforeValue();
  if (!std::isfinite(d)) {
    out_.append("null");
    return;
  }
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, d);
  out_.append(buf, r.ptr);
}

void Writer::Int(int64_t i) {
  BeforeValue();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, i);
  out_.append(buf, r.ptr);
}

void Writer::Uint(uint64_t u) {
  BeforeValue();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, u);
  out_.append(buf, r.ptr);
}

void Writer::Bool(bool b) {
  BeforeValue();
  out_.append(b ? "true" : "false");
}

void Writer::Null() {
  BeforeValue();
  out_.append("null");
}

std::string Writer::Take() {
  std::string result = std::move(out_);
  out_.clear();
  has_element_.clear();
  depth_ = 0;
  after_key_ = false;
  return result;
}

absl::Status ObjectReader::OnlyKeys(std::initializer_list<std::string_view> keys) {
  TG_RETURN_IF_ERROR(CheckIsObject());
  for (std::string_view key : keys) TG_RETURN_IF_ERROR(OptionalMember(key).status());
  return NoOtherKeys();
}

absl::Status OnlyKeys(const Value& value, std::string source, std::string path,
                      std::initializer_list<std::string_view> keys) {
  ObjectReader r(value, std::move(source), std::move(path));
  return r.OnlyKeys(keys);
}

}  // namespace tiergym::json
