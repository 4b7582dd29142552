#include "traces/base/args.h"

#include <charconv>
#include <cstdlib>
#include <iostream>
#include <optional>

#include "traces/base/strings.h"

namespace tiergym {

ArgParser::ArgParser(std::string command, std::string summary)
    : command_(std::move(command)), summary_(std::move(summary)) {}

void ArgParser::AddPositional(std::string name, std::string help, bool required) {
  positionals_.push_back({std::move(name), std::move(help), required});
}

void ArgParser::AddRestPositional(std::string name, std::string help) {
  rest_name_ = std::move(name);
  rest_help_ = std::move(help);
}

void ArgParser::AddFlag(std::string name, std::string help) {
  specs_.push_back({std::move(name), "", std::move(help), "", false});
}

void ArgParser::AddOption(std::string name, std::string value_name, std::string help,
                          std::string fallback) {
  specs_.push_back(
      {std::move(name), std::move(value_name), std::move(help), std::move(fallback), false});
}

void ArgParser::AddRepeatedOption(std::string name, std::string value_name, std::string help) {
  specs_.push_back({std::move(name), std::move(value_name), std::move(help), "", true});
}

const ArgParser::Spec* ArgParser::FindSpec(std::string_view name) const {
  for (const Spec& s : specs_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

absl::Status ArgParser::UsageError(std::string_view message) const {
  return absl::InvalidArgumentError(
      StrCat(command_, ": ", message, " (see '", command_, " --help')"));
}

absl::Status ArgParser::Parse(int argc, const char* const* argv) {
  std::vector<std::string> args(argv, argv + argc);
  return Parse(args);
}

absl::Status ArgParser::Parse(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  bool options_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (options_done || a.size() < 2 || a[0] != '-' || a == "-") {
      positional.push_back(a);
      // Once the rest-collector starts (e.g. the profiled command), everything is its.
      if (!rest_name_.empty() && positional.size() > positionals_.size()) options_done = true;
      continue;
    }
    if (a == "--") {
      options_done = true;
      continue;
    }
    if (a == "--help" || a == "-h") {
      help_requested_ = true;
      return absl::OkStatus();
    }
    if (a[1] != '-') return UsageError(StrCat("unknown option '", a, "'"));
    std::string name = a.substr(2);
    std::optional<std::string> inline_value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name.resize(eq);
    }
    const Spec* spec = FindSpec(name);
    if (spec == nullptr) return UsageError(StrCat("unknown option '--", name, "'"));
    if (spec->value_name.empty()) {
      if (inline_value) return UsageError(StrCat("--", name, " takes no value"));
      values_[name].push_back("true");
      continue;
    }
    std::string value;
    if (inline_value) {
      value = *inline_value;
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return UsageError(StrCat("--", name, " needs a value (", spec->value_name, ")"));
    }
    auto& slot = values_[name];
    if (!spec->repeated) slot.clear();  // the last one given wins
    slot.push_back(std::move(value));
  }
  size_t k = 0;
  for (; k < positionals_.size() && k < positional.size(); ++k) {
    positional_values_[positionals_[k].name] = positional[k];
  }
  for (size_t j = k; j < positionals_.size(); ++j) {
    if (positionals_[j].required) {
      return UsageError(StrCat("missing ", positionals_[j].name));
    }
  }
  if (k < positional.size()) {
    if (rest_name_.empty()) {
      return UsageError(StrCat("unexpected argument '", positional[k], "'"));
    }
    rest_.assign(positional.begin() + k, positional.end());
  }
  return absl::OkStatus();
}

std::string ArgParser::Usage() const {
  std::string out = StrCat("usage: ", command_);
  if (!specs_.empty()) out += " [options]";
  for (const auto& p : positionals_) {
    out += p.required ? StrCat(" ", p.name) : StrCat(" [", p.name, "]");
  }
  if (!rest_name_.empty()) out += StrCat(" [--] ", rest_name_, "...");
  out += StrCat("\n\n", summary_, "\n");
  auto row = [&out](const std::string& left, const std::string& help) {
    std::string line = StrCat("  ", left);
    if (line.size() < 28) {
      line.resize(28, ' ');
    } else {
      line += StrCat("\n", std::string(28, ' '));
    }
    out += StrCat(line, help, "\n");
  };
  if (!positionals_.empty() || !rest_name_.empty()) {
    out += "\narguments:\n";
    for (const auto& p : positionals_) row(p.name, p.help);
    if (!rest_name_.empty()) row(rest_name_, rest_help_);
  }
  out += "\noptions:\n";
  for (const Spec& s : specs_) {
    std::string left = StrCat("--", s.name);
    if (!s.value_name.empty()) left += StrCat(" ", s.value_name);
    std::string help = s.help;
    if (!s.fallback.empty()) help += StrCat(" (default: ", s.fallback, ")");
    if (s.repeated) help += " (repeatable)";
    row(left, help);
  }
  row("-h, --help", "show this help and exit");
  if (!epilog_.empty()) out += StrCat("\n", epilog_, "\n");
  return out;
}

std::optional<int> ArgParser::ParseOrExit(const std::vector<std::string>& args) {
  absl::Status s = Parse(args);
  if (help_requested_) {
    std::cout << Usage();
    return 0;
  }
  if (!s.ok()) {
    std::cerr << s.message() << "\n";
    return 2;
  }
  return std::nullopt;
}

absl::Status ArgParser::Require(std::string_view name) const {
  if (Given(name)) return absl::OkStatus();
  const Spec* spec = FindSpec(name);
  return UsageError(
      StrCat("--", name, spec != nullptr ? StrCat(" ", spec->value_name) : "", " is required"));
}

bool ArgParser::Flag(std::string_view name) const { return Given(name); }

std::string ArgParser::Positional(std::string_view name) const {
  auto it = positional_values_.find(name);
  return it == positional_values_.end() ? "" : it->second;
}

bool ArgParser::Given(std::string_view name) const { return values_.find(name) != values_.end(); }

std::string ArgParser::Get(std::string_view name) const {
  auto it = values_.find(name);
  if (it != values_.end() && !it->second.empty()) return it->second.back();
  const Spec* spec = FindSpec(name);
  return spec != nullptr ? spec->fallback : "";
}

std::vector<std::string> ArgParser::GetAll(std::string_view name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

absl::StatusOr<uint64_t> ArgParser::GetUint64(std::string_view name) const {
  std::string v = Get(name);
  uint64_t out = 0;
  int base = 10;
  std::string_view digits = v;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    base = 16;
    digits.remove_prefix(2);
  }
  auto r = std::from_chars(digits.data(), digits.data() + digits.size(), out, base);
  if (digits.empty() || r.ec != std::errc() || r.ptr != digits.data() + digits.size()) {
    return UsageError(StrCat("--", name, " wants a non-negative integer, got '", v, "'"));
  }
  return out;
}

absl::StatusOr<int64_t> ArgParser::GetInt64(std::string_view name) const {
  std::string v = Get(name);
  int64_t out = 0;
  auto r = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || r.ec != std::errc() || r.ptr != v.data() + v.size()) {
    return UsageError(StrCat("--", name, " wants an integer, got '", v, "'"));
  }
  return out;
}

absl::StatusOr<double> ArgParser::GetDouble(std::string_view name) const {
  std::string v = Get(name);
  double out = 0;
  auto r = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || r.ec != std::errc() || r.ptr != v.data() + v.size()) {
    return UsageError(StrCat("--", name, " wants a number, got '", v, "'"));
  }
  return out;
}

}  // namespace tiergym
