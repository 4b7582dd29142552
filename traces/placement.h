// A placement: which memory tier backs which part of an application's address space.
//
// The in-memory form of the placement JSON of traces/TRACE_CSV.md section 2
// (traces/TRACE_CSV.md): a default tier plus either address ranges, each on a
// named tier, or fractions of the application's footprint pages per tier. Reading is
// strict: ParsePlacement refuses the whole document with an InvalidArgument error
// "SOURCE:LINE:COL: PATH: what is wrong" when
//   - the document is not a JSON object, or breaks JSON (duplicate keys, so the same
//     tier twice in "fractions", are a JSON error);
//   - "default" is missing, not a string, or empty;
//   - both "ranges" and "fractions" appear;
//   - a range's "start"/"end" is not a non-negative integer or a hex/decimal string,
//     start >= end, its "tier" is missing or empty, or two ranges overlap (both named
//     by index and bounds);
//   - a fraction is not a number, lies outside [0, 1], names the default tier, or the
//     fractions sum above 1;
//   - any object holds a key other than the known ones (the error names it).
// Ranges may be listed in any order; they are kept sorted by start. Addresses are exact
// over the whole 64-bit range.
//
// Thread-safety: Placement is a plain value; the functions share no state.
#ifndef TIERGYM_TRACES_PLACEMENT_H_
#define TIERGYM_TRACES_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tiergym {

// The half-open byte range [start, end) of virtual addresses, placed on `tier`.
struct PlacementRange {
  uint64_t start = 0;
  uint64_t end = 0;
  std::string tier;

  friend bool operator==(const PlacementRange&, const PlacementRange&) = default;
};

struct Placement {
  // Tier of every address (or page) that no range (fraction) places elsewhere.
  std::string default_tier;
  // Non-overlapping, sorted by start. Empty when fractions are used.
  std::vector<PlacementRange> ranges;
  // (tier, fraction of footprint pages) in the order listed, filled in that order.
  // Each fraction is in [0, 1], their sum is at most 1, no tier is the default.
  std::vector<std::pair<std::string, double>> fractions;

  bool uses_fractions() const { return !fractions.empty(); }

  // Every tier the placement names: the default first, then the others in order of
  // first appearance, each once.
  std::vector<std::string> Tiers() const;

  friend bool operator==(const Placement&, const Placement&) = default;
};

// Parses placement JSON; `source` names the document in errors.
absl::StatusOr<Placement> ParsePlacement(std::string_view json_text, const std::string& source);

// Reads and parses a file. NotFound when it does not exist.
absl::StatusOr<Placement> ReadPlacement(const std::string& path);

// The placement as indented JSON ending in a newline, range bounds as 0x hex strings.
// ParsePlacement of the result gives back an equal Placement.
std::string FormatPlacementJson(const Placement& placement);

// Writes FormatPlacementJson(placement) to `path` through a temporary file renamed into
// place, so a reader never sees a half-written file.
absl::Status WritePlacement(const Placement& placement, const std::string& path);

// The tier of `address`: that of the range holding it, else the default tier. For a
// fractions placement (which says nothing about individual addresses) the default.
// The view points into `placement`.
std::string_view TierOf(const Placement& placement, uint64_t address);

}  // namespace tiergym

#endif  // TIERGYM_TRACES_PLACEMENT_H_
