#include "traces/placement.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <optional>

#include "traces/base/field_status.h"
#include "traces/base/file.h"
#include "traces/base/json.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym {
namespace {

// Fractions written as decimals (0.1 + 0.2 + 0.7) may sum a rounding error above 1.
constexpr double kFractionSumSlack = 1e-9;

std::string Bounds(uint64_t start, uint64_t end) {
  return StrCat("[", Hex(start), ", ", Hex(end), ")");
}

// What is wrong with a placement: the path of the part at fault inside the document
// ("ranges[2].tier", "fractions.hbm"; range indexes as listed) and the rule it breaks.
struct Problem {
  std::string path;
  std::string detail;
};

// The one set of rules of a placement, whatever it was read from (JSON text, a protocol
// map): sorts the ranges by start; returns the first problem found, if any.
std::optional<Problem> FindProblem(Placement& placement) {
  if (placement.default_tier.empty()) return Problem{"default", "tier name is empty"};
  std::vector<size_t> order(placement.ranges.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const PlacementRange& r = placement.ranges[i];
    order[i] = i;
    if (r.tier.empty()) return Problem{StrCat("ranges[", i, "].tier"), "tier name is empty"};
    if (r.start >= r.end) {
      return Problem{StrCat("ranges[", i, "]"),
                     StrCat("start ", Hex(r.start), " is not below end ", Hex(r.end),
                            " (ranges are half-open [start, end) and may not be empty)")};
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return placement.ranges[a].start < placement.ranges[b].start;
  });
  for (size_t k = 1; k < order.size(); ++k) {
    const PlacementRange& prev = placement.ranges[order[k - 1]];
    const PlacementRange& cur = placement.ranges[order[k]];
    if (cur.start < prev.end) {
      // Named by whichever of the two comes later in the document.
      const size_t first = std::min(order[k - 1], order[k]);
      const size_t second = std::max(order[k - 1], order[k]);
      const PlacementRange& a = placement.ranges[first];
      const PlacementRange& b = placement.ranges[second];
      return Problem{StrCat("ranges[", second, "]"),
                     StrCat("ranges overlap: ranges[", first, "] ", Bounds(a.start, a.end),
                            " and ranges[", second, "] ", Bounds(b.start, b.end))};
    }
  }
  double sum = 0;
  for (const auto& [tier, f] : placement.fractions) {
    const std::string path = StrCat("fractions.", tier);
    if (tier.empty()) return Problem{"fractions", "tier name is empty"};
    if (!(f >= 0 && f <= 1)) return Problem{path, StrCat("fraction ", f, " is outside [0, 1]")};
    if (tier == placement.default_tier) {
      return Problem{path, StrCat("names the default tier ", json::Quote(placement.default_tier),
                                  ", which receives the pages no fraction takes; leave it out")};
    }
    for (const auto& [other, unused] : placement.fractions) {
      if (&other == &tier) break;
      if (other == tier) return Problem{path, "the same tier appears twice"};
    }
    sum += f;
  }
  if (sum > 1 + kFractionSumSlack) {
    return Problem{"fractions", StrCat("fractions sum to ", sum, ", above 1")};
  }
  std::vector<PlacementRange> sorted;
  sorted.reserve(order.size());
  for (size_t i : order) sorted.push_back(std::move(placement.ranges[i]));
  placement.ranges = std::move(sorted);
  return std::nullopt;
}

// The JSON value a problem's path names (for its line and column), or nullptr.
const json::Value* ValueAt(const json::Value& root, std::string_view path) {
  const json::Value* at = &root;
  while (!path.empty() && at != nullptr) {
    if (path[0] == '.') path.remove_prefix(1);
    if (path.empty()) break;
    if (path[0] == '[') {
      // A path names an index as [DIGITS]; anything else (a member name holding '[') is
      // not looked up.
      const size_t close = path.find(']');
      if (close == std::string_view::npos) return nullptr;
      size_t i = 0;
      const std::string_view digits = path.substr(1, close - 1);
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), i);
      if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
        return nullptr;
      }
      at = at->is_array() && i < at->array().size() ? &at->array()[i] : nullptr;
      path.remove_prefix(close + 1);
      continue;
    }
    // A member name runs to the next '.' or '[' (fraction tiers: to the end).
    const bool fraction = at == root.Find("fractions");
    const size_t end = fraction ? path.size() : std::min(path.find('.'), path.find('['));
    at = at->is_object() ? at->Find(path.substr(0, end)) : nullptr;
    path.remove_prefix(std::min(end, path.size()));
  }
  return at;
}

}  // namespace

std::vector<std::string> Placement::Tiers() const {
  std::vector<std::string> tiers;
  const auto add = [&tiers](const std::string& t) {
    if (std::find(tiers.begin(), tiers.end(), t) == tiers.end()) tiers.push_back(t);
  };
  add(default_tier);
  for (const PlacementRange& r : ranges) add(r.tier);
  for (const auto& [tier, fraction] : fractions) add(tier);
  return tiers;
}

absl::StatusOr<Placement> ParsePlacement(std::string_view json_text, const std::string& source) {
  TG_ASSIGN_OR_RETURN(json::Value root, json::Parse(json_text, source));
  json::ObjectReader r(root, source, "");
  TG_RETURN_IF_ERROR(r.CheckIsObject());
  TG_RETURN_IF_ERROR(r.OnlyKeys({"default", "ranges", "fractions"}));
  Placement placement;
  TG_ASSIGN_OR_RETURN(placement.default_tier, r.RequiredString("default"));
  TG_ASSIGN_OR_RETURN(const json::Value* ranges, r.OptionalMember("ranges"));
  TG_ASSIGN_OR_RETURN(const json::Value* fractions, r.OptionalMember("fractions"));
  if (ranges != nullptr && fractions != nullptr) {
    return r.Error("fractions", fractions,
                   "\"ranges\" and \"fractions\" may not both appear; a placement is "
                   "either address ranges or fractions of the footprint");
  }
  if (ranges != nullptr) {
    TG_RETURN_IF_ERROR(r.RequiredArray("ranges").status());
    for (size_t i = 0; i < ranges->array().size(); ++i) {
      json::ObjectReader item(ranges->array()[i], source, StrCat("ranges[", i, "]"));
      TG_RETURN_IF_ERROR(item.CheckIsObject());
      // Unknown keys first, so that a misspelt "teir" is reported as such rather than as
      // a missing "tier".
      TG_RETURN_IF_ERROR(item.OnlyKeys({"start", "end", "tier"}));
      PlacementRange range;
      TG_ASSIGN_OR_RETURN(range.start, item.RequiredUint64("start"));
      TG_ASSIGN_OR_RETURN(range.end, item.RequiredUint64("end"));
      TG_ASSIGN_OR_RETURN(range.tier, item.RequiredString("tier"));
      placement.ranges.push_back(std::move(range));
    }
  }
  if (fractions != nullptr) {
    TG_RETURN_IF_ERROR(r.RequiredObject("fractions").status());
    json::ObjectReader f(*fractions, source, "fractions");
    for (const auto& [tier, value] : fractions->object()) {
      if (tier.empty()) return f.Error("", &value, "tier name is empty");
      TG_ASSIGN_OR_RETURN(const double share, f.RequiredNumber(tier));
      placement.fractions.emplace_back(tier, share);
    }
  }
  if (std::optional<Problem> problem = FindProblem(placement)) {
    const json::Value* at = ValueAt(root, problem->path);
    json::ObjectReader where(root, source, problem->path);
    return where.Error("", at, problem->detail);
  }
  return placement;
}

absl::Status CheckPlacement(Placement& placement) {
  if (std::optional<Problem> problem = FindProblem(placement)) {
    return InvalidFieldError(problem->path, problem->detail);
  }
  return absl::OkStatus();
}

absl::StatusOr<Placement> ReadPlacement(const std::string& path) {
  TG_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParsePlacement(text, path);
}

std::string FormatPlacementJson(const Placement& placement) {
  json::Writer w(2);
  w.BeginObject();
  w.Key("default");
  w.String(placement.default_tier);
  if (placement.uses_fractions()) {
    w.Key("fractions");
    w.BeginObject();
    for (const auto& [tier, fraction] : placement.fractions) {
      w.Key(tier);
      w.Double(fraction);
    }
    w.EndObject();
  } else if (!placement.ranges.empty()) {
    w.Key("ranges");
    w.BeginArray();
    for (const PlacementRange& range : placement.ranges) {
      w.BeginObject();
      w.Key("start");
      w.String(Hex(range.start));
      w.Key("end");
      w.String(Hex(range.end));
      w.Key("tier");
      w.String(range.tier);
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
  std::string out = w.Take();
  out.push_back('\n');
  return out;
}

absl::Status WritePlacement(const Placement& placement, const std::string& path) {
  return WriteFileAtomically(path, FormatPlacementJson(placement));
}

std::string_view TierOf(const Placement& placement, uint64_t address) {
  const std::vector<PlacementRange>& ranges = placement.ranges;
  // The last range starting at or below `address`.
  auto it = std::upper_bound(ranges.begin(), ranges.end(), address,
                             [](uint64_t a, const PlacementRange& r) { return a < r.start; });
  if (it != ranges.begin()) {
    --it;
    if (address < it->end) return it->tier;
  }
  return placement.default_tier;
}

}  // namespace tiergym
