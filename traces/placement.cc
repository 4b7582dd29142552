#include "traces/placement.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <initializer_list>

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

struct ParsedRange {
  PlacementRange range;
  size_t index;  // position in the document's "ranges" array
  const json::Value* value;
};

absl::StatusOr<std::vector<PlacementRange>> ParseRanges(const json::Value& array,
                                                        const std::string& source) {
  std::vector<ParsedRange> parsed;
  parsed.reserve(array.array().size());
  for (size_t i = 0; i < array.array().size(); ++i) {
    const json::Value& item = array.array()[i];
    json::ObjectReader r(item, source, StrCat("ranges[", i, "]"));
    TG_RETURN_IF_ERROR(r.CheckIsObject());
    // Unknown keys first, so that a misspelt "teir" is reported as such rather than as
    // a missing "tier".
    TG_RETURN_IF_ERROR(r.OnlyKeys({"start", "end", "tier"}));
    ParsedRange p{.range = {}, .index = i, .value = &item};
    TG_ASSIGN_OR_RETURN(p.range.start, r.RequiredUint64("start"));
    TG_ASSIGN_OR_RETURN(p.range.end, r.RequiredUint64("end"));
    TG_ASSIGN_OR_RETURN(p.range.tier, r.RequiredString("tier"));
    if (p.range.tier.empty()) {
      return r.Error("tier", item.Find("tier"), "tier name is empty");
    }
    if (p.range.start >= p.range.end) {
      return r.Error("", &item,
                     StrCat("start ", Hex(p.range.start), " is not below end ", Hex(p.range.end),
                            " (ranges are half-open [start, end) and "
                            "may not be empty)"));
    }
    parsed.push_back(std::move(p));
  }
  std::stable_sort(parsed.begin(), parsed.end(), [](const ParsedRange& a, const ParsedRange& b) {
    return a.range.start < b.range.start;
  });
  for (size_t i = 1; i < parsed.size(); ++i) {
    const ParsedRange& prev = parsed[i - 1];
    const ParsedRange& cur = parsed[i];
    if (cur.range.start < prev.range.end) {
      // Point at whichever of the two comes later in the document.
      const ParsedRange& first = prev.index < cur.index ? prev : cur;
      const ParsedRange& second = prev.index < cur.index ? cur : prev;
      json::ObjectReader r(*second.value, source, StrCat("ranges[", second.index, "]"));
      return r.Error("", second.value,
                     StrCat("ranges overlap: ranges[", first.index, "] ",
                            Bounds(first.range.start, first.range.end), " and ranges[",
                            second.index, "] ", Bounds(second.range.start, second.range.end)));
    }
  }
  std::vector<PlacementRange> ranges;
  ranges.reserve(parsed.size());
  for (ParsedRange& p : parsed) ranges.push_back(std::move(p.range));
  return ranges;
}

absl::StatusOr<std::vector<std::pair<std::string, double>>> ParseFractions(
    const json::Value& object, const std::string& source, const std::string& default_tier) {
  json::ObjectReader r(object, source, "fractions");
  std::vector<std::pair<std::string, double>> fractions;
  double sum = 0;
  for (const auto& [tier, value] : object.object()) {
    if (tier.empty()) return r.Error("", &value, "tier name is empty");
    TG_ASSIGN_OR_RETURN(const double f, r.RequiredNumber(tier));
    if (!(f >= 0 && f <= 1)) {
      return r.Error(tier, &value, StrCat("fraction ", value.number_text(), " is outside [0, 1]"));
    }
    if (tier == default_tier) {
      return r.Error(tier, &value,
                     StrCat("names the default tier ", json::Quote(default_tier),
                            ", which receives the pages no fraction takes; leave it out"));
    }
    sum += f;
    fractions.emplace_back(tier, f);
  }
  if (sum > 1 + kFractionSumSlack) {
    return r.Error("", &object, StrCat("fractions sum to ", sum, ", above 1"));
  }
  return fractions;
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
  if (placement.default_tier.empty()) {
    return r.Error("default", root.Find("default"), "tier name is empty");
  }
  TG_ASSIGN_OR_RETURN(const json::Value* ranges, r.OptionalMember("ranges"));
  TG_ASSIGN_OR_RETURN(const json::Value* fractions, r.OptionalMember("fractions"));
  if (ranges != nullptr && fractions != nullptr) {
    return r.Error("fractions", fractions,
                   "\"ranges\" and \"fractions\" may not both appear; a placement is "
                   "either address ranges or fractions of the footprint");
  }
  if (ranges != nullptr) {
    TG_RETURN_IF_ERROR(r.RequiredArray("ranges").status());
    TG_ASSIGN_OR_RETURN(placement.ranges, ParseRanges(*ranges, source));
  }
  if (fractions != nullptr) {
    TG_RETURN_IF_ERROR(r.RequiredObject("fractions").status());
    TG_ASSIGN_OR_RETURN(placement.fractions,
                        ParseFractions(*fractions, source, placement.default_tier));
  }
  return placement;
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
