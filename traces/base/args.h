// Command-line parsing for the subcommands of `tiergym` and `tiergym-prof`.
//
// Each subcommand declares its positionals and options with their help text; Parse()
// fills them in and --help prints a usage page generated from the declarations, so the
// help never drifts from what the command accepts. Errors name the offending argument
// and end with a pointer to --help. Accepts `--name value`, `--name=value`, boolean
// `--flag`, and `--` to end option parsing (everything after it is positional). The
// parsing is CLI11's (Debian's libcli11-dev); this class keeps the project's declarations,
// its usage page and its typed, Status-returning reads of the values.
//
//   ArgParser p("tiergym trace info", "Summarise one trace file.");
//   p.AddPositional("PATH", "trace CSV or binary file");
//   p.AddFlag("json", "print one JSON object instead of text");
//   p.AddOption("gap", "BYTES", "merge touched ranges closer than this", "1048576");
//   if (std::optional<int> rc = p.ParseOrExit(args)) return *rc;  // --help, usage errors
//   TG_ASSIGN_OR_RETURN(uint64_t gap, p.GetUint64("gap"));
//
// Not thread-safe; one parser per invocation.
#ifndef TIERGYM_TRACES_BASE_ARGS_H_
#define TIERGYM_TRACES_BASE_ARGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tiergym {

class ArgParser {
 public:
  ArgParser(std::string command, std::string summary);

  // A free-form paragraph printed after the option list (JSON keys, examples, ...).
  void SetEpilog(std::string epilog) { epilog_ = std::move(epilog); }

  // REQUIRES: names are unique; positionals are declared in order, required ones first.
  void AddPositional(std::string name, std::string help, bool required = true);
  // All further positionals (e.g. the command after `--`) are collected under `name`.
  void AddRestPositional(std::string name, std::string help);
  void AddFlag(std::string name, std::string help);
  // `fallback` is the default shown in --help; empty means "no default" (optional value).
  void AddOption(std::string name, std::string value_name, std::string help,
                 std::string fallback = "");
  // An option that may be given several times; values collected in order.
  void AddRepeatedOption(std::string name, std::string value_name, std::string help);

  // Parses argv[0..argc). InvalidArgument on an unknown option, a missing value, a missing
  // required positional or a surplus positional. `--help`/`-h` sets help_requested() and
  // returns OK without checking required positionals.
  absl::Status Parse(int argc, const char* const* argv);
  absl::Status Parse(const std::vector<std::string>& args);

  // Parse() for a command's entry point: prints the usage on --help and returns 0, prints
  // the error on a usage error and returns 2, and returns nullopt when the command
  // should go on.
  std::optional<int> ParseOrExit(const std::vector<std::string>& args);

  // InvalidArgument "COMMAND: --NAME VALUE is required (see ...)" unless the option was given.
  absl::Status Require(std::string_view name) const;

  bool help_requested() const { return help_requested_; }
  std::string Usage() const;

  bool Flag(std::string_view name) const;
  // The positional's value, or "" for an absent optional positional.
  std::string Positional(std::string_view name) const;
  const std::vector<std::string>& Rest() const { return rest_; }
  // Whether the user gave the option (as opposed to its default applying).
  bool Given(std::string_view name) const;
  // The option's value (or its default; "" when neither).
  std::string Get(std::string_view name) const;
  std::vector<std::string> GetAll(std::string_view name) const;
  // Typed reads of an option's value; InvalidArgument names the option and the value.
  absl::StatusOr<uint64_t> GetUint64(std::string_view name) const;
  absl::StatusOr<int64_t> GetInt64(std::string_view name) const;
  absl::StatusOr<double> GetDouble(std::string_view name) const;

 private:
  struct Spec {
    std::string name;
    std::string value_name;  // empty for flags
    std::string help;
    std::string fallback;
    bool repeated = false;
  };
  struct PositionalSpec {
    std::string name;
    std::string help;
    bool required = true;
  };

  const Spec* FindSpec(std::string_view name) const;
  absl::Status UsageError(std::string_view message) const;

  std::string command_;
  std::string summary_;
  std::string epilog_;
  std::vector<Spec> specs_;
  std::vector<PositionalSpec> positionals_;
  std::string rest_name_, rest_help_;
  bool help_requested_ = false;
  std::map<std::string, std::vector<std::string>, std::less<>> values_;
  std::map<std::string, std::string, std::less<>> positional_values_;
  std::vector<std::string> rest_;
};

}  // namespace tiergym

#endif  // TIERGYM_TRACES_BASE_ARGS_H_
