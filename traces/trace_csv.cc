#include "traces/trace_csv.h"

#include <charconv>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "traces/base/file.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym {
namespace {

constexpr std::string_view kVersionLine = "# tiergym trace v1";
constexpr std::string_view kVersionPrefix = "# tiergym trace ";
constexpr std::string_view kRequiredColumns[] = {"type",  "time_ns",      "tid",
                                                 "phase", "instructions", "address"};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool ParseDecimal(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out, 10);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

bool ParseAddress(std::string_view s, uint64_t* out) {
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    auto r = std::from_chars(s.data() + 2, s.data() + s.size(), *out, 16);
    return r.ec == std::errc() && r.ptr == s.data() + s.size();
  }
  return ParseDecimal(s, out);
}

// Scans an unsigned decimal at `p` up to the next ',' or `end`, leaving `p` on that
// delimiter. False (p unspecified) on an empty field, a non-digit or overflow.
inline bool ScanDecimal(const char*& p, const char* end, uint64_t* out) {
  const char* start = p;
  uint64_t v = 0;
  while (p < end) {
    const unsigned d = static_cast<unsigned char>(*p) - '0';
    if (d > 9) break;
    if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, d, &v)) return false;
    ++p;
  }
  if (p == start || (p < end && *p != ',')) {
    p = start;
    return false;
  }
  *out = v;
  return true;
}

// What each column after the six required ones means to the reader.
enum class Extra : uint8_t { kIgnored, kOp, kWeight, kCpu };

class CsvParser {
 public:
  CsvParser(std::string_view text, std::string source) : text_(text), source_(std::move(source)) {}

  absl::StatusOr<Trace> Parse();

 private:
  // The next line without its terminator; false at the end of the text.
  bool NextLine(std::string_view* line) {
    if (pos_ >= text_.size()) return false;
    const char* start = text_.data() + pos_;
    const void* nl = std::memchr(start, '\n', text_.size() - pos_);
    size_t len;
    if (nl == nullptr) {
      len = text_.size() - pos_;
      pos_ = text_.size();
      last_line_unterminated_ = true;
    } else {
      len = static_cast<const char*>(nl) - start;
      pos_ += len + 1;
    }
    if (len > 0 && start[len - 1] == '\r') --len;
    *line = std::string_view(start, len);
    ++line_no_;
    return true;
  }

  absl::Status Error(std::string_view rule, std::string_view detail) const {
    return absl::InvalidArgumentError(StrCat(source_, ":", line_no_, ": ", rule, ": ", detail));
  }

  absl::Status ParseHeader();
  absl::Status ParseColumnLine(std::string_view line);
  absl::Status ParseRow(std::string_view line);
  absl::Status NonNumeric(size_t column, std::string_view value) const {
    return Error("non-numeric", StrCat("column ", column_names_[column], " has '", value,
                                       "', expected an unsigned integer",
                                       column == 5 ? " (decimal or 0x-prefixed hex)" : ""));
  }

  std::string_view text_;
  std::string source_;
  size_t pos_ = 0;
  int line_no_ = 0;
  bool last_line_unterminated_ = false;

  TraceMetadata metadata_;
  bool saw_page_size_ = false, saw_pebs_reset_ = false;
  std::vector<std::string> column_names_;
  std::vector<Extra> extras_;
  OptionalColumns optional_;

  std::optional<TraceBuilder> builder_;
  std::vector<PhaseEvent> marks_;
  std::optional<PhaseEvent> end_;
  uint64_t last_time_ = 0;
  int end_line_ = 0;
};

absl::Status CsvParser::ParseHeader() {
  std::string_view line;
  if (!NextLine(&line)) return Error("empty", "the file is empty");
  if (line != kVersionLine) {
    if (line.substr(0, kVersionPrefix.size()) == kVersionPrefix) {
      return Error("version",
                   StrCat("this reader reads '", kVersionLine, "', the file says '", line, "'"));
    }
    return Error("version", StrCat("the first line must be '", kVersionLine, "'"));
  }
  while (NextLine(&line)) {
    if (Trim(line).empty()) continue;
    if (line[0] != '#') return ParseColumnLine(line);
    std::string_view body = Trim(line.substr(1));
    size_t eq = body.find('=');
    if (eq == std::string_view::npos) continue;  // a plain comment
    std::string key(Trim(body.substr(0, eq)));
    std::string value(Trim(body.substr(eq + 1)));
    auto duplicate = [&](bool seen) {
      return seen ? Error("bad-header", StrCat("header key '", key, "' appears twice"))
                  : absl::OkStatus();
    };
    if (key == "device") {
      TG_RETURN_IF_ERROR(duplicate(!metadata_.device.empty()));
      if (value.empty()) return Error("missing-device", "`# device=` has no value");
      metadata_.device = value;
    } else if (key == "app") {
      TG_RETURN_IF_ERROR(duplicate(!metadata_.app.empty()));
      metadata_.app = value;
    } else if (key == "event") {
      TG_RETURN_IF_ERROR(duplicate(!metadata_.event.empty()));
      metadata_.event = value;
    } else if (key == "pebs_reset") {
      TG_RETURN_IF_ERROR(duplicate(saw_pebs_reset_));
      saw_pebs_reset_ = true;
      uint64_t v;
      if (!ParseDecimal(value, &v) || v == 0) {
        return Error("bad-header", StrCat("pebs_reset '", value, "' is not a positive integer"));
      }
      metadata_.pebs_reset = v;
    } else if (key == "page_size") {
      TG_RETURN_IF_ERROR(duplicate(saw_page_size_));
      saw_page_size_ = true;
      uint64_t v;
      if (!ParseDecimal(value, &v) || v == 0 || (v & (v - 1)) != 0 ||
          v > std::numeric_limits<uint32_t>::max()) {
        return Error("bad-header", StrCat("page_size '", value, "' is not a power of two"));
      }
      metadata_.page_size = static_cast<uint32_t>(v);
    }
    metadata_.entries.emplace_back(std::move(key), std::move(value));
  }
  return Error("empty", "no column line (type,time_ns,tid,phase,instructions,address) found");
}

absl::Status CsvParser::ParseColumnLine(std::string_view line) {
  size_t start = 0;
  while (true) {
    size_t comma = line.find(',', start);
    column_names_.emplace_back(Trim(line.substr(start, comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  for (size_t i = 0; i < std::size(kRequiredColumns); ++i) {
    if (i >= column_names_.size() || column_names_[i] != kRequiredColumns[i]) {
      return Error("column-line", StrCat("expected the column line to start with "
                                         "'type,time_ns,tid,phase,instructions,address', got '",
                                         line, "'"));
    }
  }
  for (size_t i = std::size(kRequiredColumns); i < column_names_.size(); ++i) {
    const std::string& name = column_names_[i];
    Extra e = Extra::kIgnored;
    bool* flag = nullptr;
    if (name == "op") e = Extra::kOp, flag = &optional_.op;
    if (name == "weight") e = Extra::kWeight, flag = &optional_.weight;
    if (name == "cpu") e = Extra::kCpu, flag = &optional_.cpu;
    if (flag != nullptr) {
      if (*flag) return Error("column-line", StrCat("column '", name, "' appears twice"));
      *flag = true;
    }
    extras_.push_back(e);
  }
  if (metadata_.device.empty()) {
    return Error("missing-device",
                 "the header has no `# device=NAME` line (the tier this run was placed on)");
  }
  builder_.emplace(source_, metadata_, optional_);
  builder_->Reserve(text_.size() / 40);
  return absl::OkStatus();
}

absl::Status CsvParser::ParseRow(std::string_view line) {
  const char* p = line.data();
  const char* const end = line.data() + line.size();
  const size_t num_columns = column_names_.size();
  // Splits the next field; false when the row has fewer fields than columns.
  std::string_view field;
  size_t column = 0;
  auto next = [&]() -> bool {
    if (p > end) return false;
    const char* comma = static_cast<const char*>(std::memchr(p, ',', end - p));
    const char* stop = comma != nullptr ? comma : end;
    field = std::string_view(p, stop - p);
    p = stop + 1;  // one past end when this was the last field
    ++column;
    return true;
  };
  auto field_count_error = [&]() {
    size_t count = 1;
    for (char c : line) count += (c == ',');
    return Error("field-count",
                 StrCat("the row has ", count, " fields, the column line has ", num_columns));
  };

  if (end_) {
    return Error("row-after-end", StrCat("a row follows the E row of line ", end_line_));
  }
  if (!next()) return field_count_error();
  if (field.size() != 1 || (field[0] != 'S' && field[0] != 'M' && field[0] != 'E')) {
    return Error("unknown-row-type",
                 StrCat("type '", field, "' is not S (sample), M (phasemark) or E (end)"));
  }
  const char type = field[0];
  // Fast path: digits are scanned and accumulated in one pass, stopping at the comma.
  // Anything unexpected falls back to splitting the field for an exact error message.
  uint64_t v[4];
  for (size_t i = 0; i < 4; ++i) {
    if (p > end) return field_count_error();
    ++column;
    if (!ScanDecimal(p, end, &v[i])) {
      const char* comma = static_cast<const char*>(std::memchr(p, ',', end - p));
      const std::string_view bad(p, (comma != nullptr ? comma : end) - p);
      if (comma == nullptr && i < 3) return field_count_error();
      return NonNumeric(column - 1, bad);
    }
    ++p;  // past the comma (or one past the end for the last field)
  }
  if (p > end) return field_count_error();
  if (v[1] > std::numeric_limits<uint32_t>::max()) {
    return Error("non-numeric", StrCat("tid ", v[1], " does not fit in 32 bits"));
  }
  if (v[2] > std::numeric_limits<uint32_t>::max()) {
    return Error("non-numeric", StrCat("phase ", v[2], " does not fit in 32 bits"));
  }
  if (!next()) return field_count_error();
  const std::string_view address = field;
  // Extra columns.
  uint8_t op = kUnknownOp;
  uint32_t weight = kUnknownU32, cpu = kUnknownU32;
  for (Extra e : extras_) {
    if (!next()) return field_count_error();
    if (type != 'S' || field.empty() || e == Extra::kIgnored) continue;
    if (e == Extra::kOp) {
      if (field != "L" && field != "S") {
        return Error("bad-op", StrCat("op '", field, "' is neither L (load) nor S (store)"));
      }
      op = static_cast<uint8_t>(field[0]);
    } else {
      uint64_t x;
      if (!ParseDecimal(field, &x) || x >= kUnknownU32) return NonNumeric(column - 1, field);
      (e == Extra::kWeight ? weight : cpu) = static_cast<uint32_t>(x);
    }
  }
  if (p <= end) return field_count_error();

  const uint64_t time_ns = v[0];
  const uint32_t tid = static_cast<uint32_t>(v[1]);
  const uint32_t phase = static_cast<uint32_t>(v[2]);
  const uint64_t instructions = v[3];
  if (time_ns < last_time_) {
    return Error("unsorted-time",
                 StrCat("time_ns ", time_ns, " is earlier than the previous row's ", last_time_));
  }
  last_time_ = time_ns;

  if (type == 'S') {
    if (marks_.empty()) {
      return Error("sample-before-first-mark",
                   "an S row comes before the first M row (phase 0 starts with a phasemark)");
    }
    const uint32_t current = marks_.back().phase;
    if (phase != current) {
      return Error("phase-mismatch",
                   StrCat("the sample says phase ", phase, " but the current phase is ", current));
    }
    uint64_t addr;
    if (address.empty()) return Error("address", "an S row needs an address");
    if (!ParseAddress(address, &addr)) return NonNumeric(5, address);
    builder_->AddSample(time_ns, tid, phase, instructions, addr);
    if (optional_.op) builder_->SetLastOp(op);
    if (optional_.weight) builder_->SetLastWeight(weight);
    if (optional_.cpu) builder_->SetLastCpu(cpu);
    return absl::OkStatus();
  }

  if (!address.empty()) {
    return Error("address",
                 StrCat("an ", std::string_view(&type, 1), " row has an address; leave it empty"));
  }
  const PhaseEvent event{time_ns, tid, phase, instructions};
  if (type == 'M') {
    if (marks_.empty()) {
      if (phase != 0 || time_ns != 0 || instructions != 0) {
        return Error("first-mark",
                     "the first phasemark must be phase 0 at time 0 with 0 instructions");
      }
    } else if (phase != marks_.back().phase + 1) {
      return Error("phase-skip", StrCat("phasemark for phase ", phase, " follows phase ",
                                        marks_.back().phase, "; phase indices increase by one"));
    }
    marks_.push_back(event);
    builder_->AddMark(event);
    return absl::OkStatus();
  }
  // type == 'E'
  if (marks_.empty()) {
    return Error("first-mark", "the E row comes before the first phasemark");
  }
  if (phase != marks_.back().phase) {
    return Error("phase-mismatch", StrCat("the E row says phase ", phase, " but the last phase is ",
                                          marks_.back().phase));
  }
  end_ = event;
  end_line_ = line_no_;
  builder_->SetEnd(event);
  return absl::OkStatus();
}

absl::StatusOr<Trace> CsvParser::Parse() {
  TG_RETURN_IF_ERROR(ParseHeader());
  std::string_view line;
  while (NextLine(&line)) {
    if (last_line_unterminated_) {
      return Error("truncated-last-line",
                   "the last line has no newline at its end, so the file was cut short "
                   "(if it is complete, end it with a newline)");
    }
    if (line.empty() || Trim(line).empty()) continue;
    TG_RETURN_IF_ERROR(ParseRow(line));
  }
  if (!end_) {
    return absl::InvalidArgumentError(
        StrCat(source_, ":", line_no_,
               ": missing-end: no E row; a trace ends with exactly one "
               "E row giving the run's end time"));
  }
  return builder_->Finish();
}

// Appends decimal or hex integers to a growing buffer without allocating per field.
class RowWriter {
 public:
  explicit RowWriter(std::string* out) : out_(out) {}
  void Dec(uint64_t v) {
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    out_->append(buf, r.ptr);
  }
  void Hex(uint64_t v) {
    char buf[24] = {'0', 'x'};
    auto r = std::to_chars(buf + 2, buf + sizeof buf, v, 16);
    out_->append(buf, r.ptr);
  }
  void Char(char c) { out_->push_back(c); }
  void Event(char type, const PhaseEvent& e, size_t num_extras) {
    Char(type);
    Char(',');
    Dec(e.time_ns);
    Char(',');
    Dec(e.tid);
    Char(',');
    Dec(e.phase);
    Char(',');
    Dec(e.instructions);
    Char(',');
    for (size_t i = 0; i < num_extras; ++i) Char(',');
    Char('\n');
  }

 private:
  std::string* out_;
};

}  // namespace

absl::StatusOr<Trace> ParseTraceCsv(std::string_view text, std::string source) {
  return CsvParser(text, std::move(source)).Parse();
}

absl::StatusOr<Trace> ReadTraceCsv(const std::string& path) {
  TG_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseTraceCsv(text, path);
}

std::string FormatTraceCsv(const Trace& trace) {
  std::string out;
  out.reserve(256 + trace.num_samples() * 48);
  out.append(kVersionLine);
  out.push_back('\n');
  for (const auto& [key, value] : trace.metadata().entries) {
    StrAppend(&out, "# ", key, "=", value, "\n");
  }
  out.append("type,time_ns,tid,phase,instructions,address");
  const OptionalColumns& opt = trace.optional_columns();
  if (opt.op) out.append(",op");
  if (opt.weight) out.append(",weight");
  if (opt.cpu) out.append(",cpu");
  out.push_back('\n');
  const size_t num_extras = opt.op + opt.weight + opt.cpu;

  RowWriter w(&out);
  const auto time = trace.time_ns();
  const auto tid = trace.tid();
  const auto phase = trace.phase();
  const auto instr = trace.instructions();
  const auto addr = trace.address();
  for (size_t p = 0; p < trace.num_phases(); ++p) {
    w.Event('M', trace.marks()[p], num_extras);
    for (size_t i = trace.PhaseBegin(p); i < trace.PhaseBegin(p + 1); ++i) {
      w.Char('S');
      w.Char(',');
      w.Dec(time[i]);
      w.Char(',');
      w.Dec(tid[i]);
      w.Char(',');
      w.Dec(phase[i]);
      w.Char(',');
      w.Dec(instr[i]);
      w.Char(',');
      w.Hex(addr[i]);
      if (opt.op) {
        w.Char(',');
        if (trace.op()[i] != kUnknownOp) w.Char(static_cast<char>(trace.op()[i]));
      }
      if (opt.weight) {
        w.Char(',');
        if (trace.weight()[i] != kUnknownU32) w.Dec(trace.weight()[i]);
      }
      if (opt.cpu) {
        w.Char(',');
        if (trace.cpu()[i] != kUnknownU32) w.Dec(trace.cpu()[i]);
      }
      w.Char('\n');
    }
  }
  w.Event('E', trace.end(), num_extras);
  return out;
}

absl::Status WriteTraceCsv(const Trace& trace, const std::string& path) {
  return WriteFileAtomically(path, FormatTraceCsv(trace));
}

}  // namespace tiergym
