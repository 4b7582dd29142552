#include "traces/base/args.h"

#include <charconv>
#include <cstdlib>
#include <iostream>
#include <optional>

#include "CLI/CLI.hpp"
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

// CLI11 parses; the declarations above become its options for one parse, and what it
// found is copied out, so that the parser keeps no CLI11 state between calls.
absl::Status ArgParser::Parse(const std::vector<std::string>& args) {
  CLI::App app(summary_, command_);
  app.set_help_flag("-h,--help");
  // A rest positional (the profiled command) takes everything from the first argument no
  // positional slot holds, its options included.
  if (!rest_name_.empty()) app.prefix_command();
  std::vector<std::pair<const Spec*, CLI::Option*>> options;
  for (const Spec& s : specs_) {
    CLI::Option* o = nullptr;
    if (s.value_name.empty()) {
      o = app.add_flag(StrCat("--", s.name))->disable_flag_override();
    } else {
      o = app.add_option(StrCat("--", s.name))
              ->type_name(s.value_name)
              ->expected(1)
              ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    }
    options.emplace_back(&s, o);
  }
  std::vector<std::pair<const PositionalSpec*, CLI::Option*>> positionals;
  for (const PositionalSpec& p : positionals_) {
    positionals.emplace_back(&p, app.add_option(p.name)->required(p.required));
  }
  // CLI11 takes the arguments last to first.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    help_requested_ = true;
    return absl::OkStatus();
  } catch (const CLI::ParseError& e) {
    return UsageError(e.what());
  }
  for (const auto& [spec, o] : options) {
    if (o->count() == 0) continue;
    std::vector<std::string>& slot = values_[spec->name];
    if (spec->value_name.empty()) {
      slot.assign(1, "true");
    } else if (spec->repeated) {
      slot = o->results();
    } else {
      slot.assign(1, o->results().back());  // the last one given wins
    }
  }
  for (const auto& [spec, o] : positionals) {
    if (o->count() > 0) positional_values_[spec->name] = o->results().front();
  }
  rest_ = app.remaining();
  if (!rest_.empty() && rest_.front() == "--") {
    rest_.erase(rest_.begin());
  } else if (!rest_.empty() && rest_.front().size() > 1 && rest_.front()[0] == '-') {
    // Before the command starts, an option must be one of ours.
    return UsageError(StrCat("the following argument was not expected: ", rest_.front()));
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
