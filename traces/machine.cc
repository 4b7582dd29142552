#include "traces/machine.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <utility>

#include "traces/base/file.h"
#include "traces/base/json.h"
#include "traces/base/model_source.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"
#include "traces/bundled_models.h"

namespace tiergym {
namespace {

constexpr std::string_view kMachinePrefix = "machine_";

// A number member that must lie in [lo, hi] (inclusive unless `lo_open`).
absl::StatusOr<double> CheckedNumber(json::ObjectReader& r, const json::Value& obj,
                                     std::string_view key, std::optional<double> fallback,
                                     double lo, bool lo_open) {
  double v = 0;
  if (fallback.has_value()) {
    TG_ASSIGN_OR_RETURN(v, r.OptionalNumber(key, *fallback));
  } else {
    TG_ASSIGN_OR_RETURN(v, r.RequiredNumber(key));
  }
  if (!std::isfinite(v) || (lo_open ? v <= lo : v < lo)) {
    return r.Error(key, obj.Find(key), StrCat("must be ", lo_open ? "> " : ">= ", lo));
  }
  return v;
}

absl::StatusOr<int> CheckedInt(json::ObjectReader& r, const json::Value& obj, std::string_view key,
                               int fallback, int lo) {
  TG_ASSIGN_OR_RETURN(double v, r.OptionalNumber(key, fallback));
  if (v != std::floor(v) || v < lo || v > 1e9) {
    return r.Error(key, obj.Find(key), StrCat("must be an integer >= ", lo));
  }
  return static_cast<int>(v);
}

// "curves": [{"read_pct": R, "points": [[bandwidth_gbps, latency_ns], ...]}, ...].
absl::StatusOr<std::vector<BandwidthLatencyCurve>> ParseCurves(const json::Value& array,
                                                               const std::string& source,
                                                               const std::string& path) {
  json::ObjectReader at(array, source, path);
  if (array.array().empty()) {
    return at.Error("", &array, "needs at least one curve (or leave \"curves\" out)");
  }
  std::vector<BandwidthLatencyCurve> curves;
  for (size_t i = 0; i < array.array().size(); ++i) {
    const json::Value& cv = array.array()[i];
    const std::string cpath = StrCat(path, "[", i, "]");
    TG_RETURN_IF_ERROR(json::OnlyKeys(cv, source, cpath, {"read_pct", "points"}));
    json::ObjectReader r(cv, source, cpath);
    BandwidthLatencyCurve c;
    TG_ASSIGN_OR_RETURN(c.read_pct, r.RequiredNumber("read_pct"));
    if (!(c.read_pct >= 0 && c.read_pct <= 100)) {
      return r.Error("read_pct", cv.Find("read_pct"), "must be in [0, 100]");
    }
    if (!curves.empty() && c.read_pct <= curves.back().read_pct) {
      return r.Error("read_pct", cv.Find("read_pct"),
                     StrCat(c.read_pct, " is not above the previous curve's ",
                            curves.back().read_pct, " (list curves by ascending read_pct)"));
    }
    TG_ASSIGN_OR_RETURN(const json::Value* points, r.RequiredArray("points"));
    if (points->array().size() < 2) {
      return r.Error("points", points,
                     "a curve needs at least two [bandwidth_gbps, latency_ns] points");
    }
    for (size_t k = 0; k < points->array().size(); ++k) {
      const json::Value& pv = points->array()[k];
      const std::string key = StrCat("points[", k, "]");
      if (!pv.is_array() || pv.array().size() != 2 || !pv.array()[0].is_number() ||
          !pv.array()[1].is_number()) {
        return r.Error(key, &pv, "must be a pair of numbers [bandwidth_gbps, latency_ns]");
      }
      const double bw = pv.array()[0].number(), lat = pv.array()[1].number();
      if (!std::isfinite(bw) || bw <= 0) {
        return r.Error(key, &pv, StrCat("bandwidth ", bw, " GB/s must be > 0"));
      }
      if (!std::isfinite(lat) || lat <= 0) {
        return r.Error(key, &pv, StrCat("latency ", lat, " ns must be > 0"));
      }
      if (!c.points.empty() && bw <= c.points.back().first) {
        return r.Error(
            key, &pv,
            StrCat("bandwidth ", bw, " is not above the previous point's ", c.points.back().first,
                   " (bandwidth must increase along a curve: keep the points "
                   "up to the curve's peak)"));
      }
      if (!c.points.empty() && lat < c.points.back().second) {
        return r.Error(
            key, &pv,
            StrCat("latency ", lat, " is below the previous point's ", c.points.back().second,
                   " (latency must not fall as bandwidth grows: smooth the "
                   "measurement, e.g. with a running maximum)"));
      }
      c.points.emplace_back(bw, lat);
    }
    TG_RETURN_IF_ERROR(r.NoOtherKeys());
    curves.push_back(std::move(c));
  }
  return curves;
}

absl::StatusOr<TierSpec> ParseTier(const json::Value& v, const std::string& source,
                                   const std::string& path) {
  TG_RETURN_IF_ERROR(json::OnlyKeys(v, source, path,
                                    {"name", "capacity_bytes", "bandwidth_gbps", "latency_ns",
                                     "migration_gbps", "numa_node", "curves"}));
  json::ObjectReader r(v, source, path);
  TierSpec t;
  TG_ASSIGN_OR_RETURN(t.name, r.RequiredString("name"));
  if (t.name.empty()) return r.Error("name", v.Find("name"), "must not be empty");
  for (char c : t.name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) {
      return r.Error("name", v.Find("name"),
                     "may only hold letters, digits, '_' and '-' (it names files)");
    }
  }
  TG_ASSIGN_OR_RETURN(t.capacity_bytes, r.RequiredUint64("capacity_bytes"));
  if (t.capacity_bytes == 0) {
    return r.Error("capacity_bytes", v.Find("capacity_bytes"), "must be > 0");
  }
  TG_ASSIGN_OR_RETURN(const json::Value* curves, r.OptionalMember("curves"));
  if (curves != nullptr) {
    for (std::string_view key : {"bandwidth_gbps", "latency_ns"}) {
      if (v.Find(key) != nullptr) {
        return r.Error(key, v.Find(key),
                       "give either bandwidth_gbps and latency_ns or curves, not both (with "
                       "curves they are the all-reads curve's peak and idle latency)");
      }
    }
    if (!curves->is_array()) return r.Error("curves", curves, "must be an array of curves");
    TG_ASSIGN_OR_RETURN(t.curves, ParseCurves(*curves, source, r.MemberPath("curves")));
    const BandwidthLatencyCurve& top = t.curves.back();
    t.bandwidth_gbps = top.points.back().first;
    t.latency_ns = top.points.front().second;
  } else {
    TG_ASSIGN_OR_RETURN(t.bandwidth_gbps,
                        CheckedNumber(r, v, "bandwidth_gbps", std::nullopt, 0, true));
    TG_ASSIGN_OR_RETURN(t.latency_ns, CheckedNumber(r, v, "latency_ns", std::nullopt, 0, true));
  }
  TG_ASSIGN_OR_RETURN(t.migration_gbps,
                      CheckedNumber(r, v, "migration_gbps", std::nullopt, 0, true));
  TG_ASSIGN_OR_RETURN(t.numa_node, CheckedInt(r, v, "numa_node", -1, -1));
  TG_RETURN_IF_ERROR(r.NoOtherKeys());
  return t;
}

std::string ReadShares(const TierSpec& t) {
  std::string out;
  for (const BandwidthLatencyCurve& c : t.curves) {
    StrAppend(&out, out.empty() ? "" : ", ", c.read_pct);
  }
  return out;
}

// The latency ratio of one measured curve at utilisation u of its own peak.
double CurveRatio(const BandwidthLatencyCurve& c, double u) {
  const double peak = c.points.back().first, idle = c.points.front().second;
  const double bw = u * peak;
  if (bw <= c.points.front().first) return 1.0;
  for (size_t k = 1; k < c.points.size(); ++k) {
    if (bw <= c.points[k].first) {
      const auto& [b0, l0] = c.points[k - 1];
      const auto& [b1, l1] = c.points[k];
      return (l0 + (l1 - l0) * (bw - b0) / (b1 - b0)) / idle;
    }
  }
  return c.points.back().second / idle;
}

}  // namespace

double LoadCurve::Ratio(double u) const {
  if (ratio.empty() || u <= 0) return 1.0;
  if (u <= ratio.front().first) return 1.0 + (ratio.front().second - 1.0) * u / ratio.front().first;
  for (size_t k = 1; k < ratio.size(); ++k) {
    if (u <= ratio[k].first) {
      const auto& [u0, r0] = ratio[k - 1];
      const auto& [u1, r1] = ratio[k];
      return r0 + (r1 - r0) * (u - u0) / (u1 - u0);
    }
  }
  return ratio.back().second;
}

LoadCurve TierSpec::CurveAt(double read_pct) const {
  LoadCurve out;
  out.idle_latency_ns = latency_ns;
  out.peak_gbps = bandwidth_gbps;
  if (curves.empty()) return out;
  // The two measured curves around read_pct (the same one at or beyond the ends).
  size_t hi = 0;
  while (hi + 1 < curves.size() && curves[hi].read_pct < read_pct) ++hi;
  const size_t lo = (hi > 0 && curves[hi].read_pct > read_pct) ? hi - 1 : hi;
  const BandwidthLatencyCurve &a = curves[lo], &b = curves[hi];
  const double w = (lo == hi) ? 0.0 : (read_pct - a.read_pct) / (b.read_pct - a.read_pct);
  out.peak_gbps = (1 - w) * a.points.back().first + w * b.points.back().first;
  out.idle_latency_ns = (1 - w) * a.points.front().second + w * b.points.front().second;
  // The union of both curves' utilisations, each ratio interpolated at them.
  std::vector<double> us;
  for (const BandwidthLatencyCurve* c : {&a, &b}) {
    for (const auto& [bw, lat] : c->points) us.push_back(bw / c->points.back().first);
  }
  std::sort(us.begin(), us.end());
  us.erase(std::unique(us.begin(), us.end()), us.end());
  for (double u : us) {
    out.ratio.emplace_back(u, (1 - w) * CurveRatio(a, u) + w * CurveRatio(b, u));
  }
  return out;
}

LoadCurve TierSpec::CurveAt(double read_pct, const TierSpec* shape) const {
  LoadCurve c = CurveAt(read_pct);
  if (c.flat() && shape != nullptr) c.ratio = shape->CurveAt(read_pct).ratio;
  return c;
}

namespace {

// The m in [lo, hi] with f(m) = m, where f(m) - m falls with m, f_lo = f(lo) > lo and
// f(hi) <= hi, to a relative 1e-12: the upper end of the bracket, which the Illinois variant of
// regula falsi narrows (Dowell and Jarratt, "A modified regula falsi method for computing the root
// of an equation"; a step outside the bracket bisects). Over the blocks of a lulesh
// profile on disagg, queueing along xeonmax's DDR5 curve, it takes 15-17 calls of f per
// solve, the two ends' included; bisection took about 40.
template <typename F>
double FallingFixedPoint(F f, double lo, double f_lo, double hi) {
  double g_lo = f_lo - lo, g_hi = f(hi) - hi;
  int last = 0;  // which end the previous step moved: -1 lo, +1 hi
  for (int it = 0; it < 100 && hi - lo > 1e-12 * hi; ++it) {
    double m = g_lo - g_hi > 0 ? (lo * -g_hi + hi * g_lo) / (g_lo - g_hi) : 0.5 * (lo + hi);
    if (!(m > lo && m < hi)) m = 0.5 * (lo + hi);
    const double g = f(m) - m;
    if (g > 0) {
      lo = m;
      g_lo = g;
      if (last == -1) g_hi *= 0.5;  // the other end stalls: halve its weight (Illinois)
      last = -1;
    } else {
      hi = m;
      g_hi = g;
      if (last == 1) g_lo *= 0.5;
      last = 1;
    }
  }
  return hi;
}

// (1 + x^p)^(1/p) for x in [0, 1] and p >= 1, without std::pow for p 1, 2 and 4 (the
// calibration's smoothness candidates and the family's, where pow took half a build).
double PNormOfOne(double x, double p) {
  if (p == 1) return 1 + x;
  if (p == 2) return std::sqrt(1 + x * x);
  if (p == 4) {
    const double x2 = x * x;
    return std::sqrt(std::sqrt(1 + x2 * x2));
  }
  return std::pow(1 + std::pow(x, p), 1 / p);
}

}  // namespace

double LoadedMemoryTimeNs(std::span<const double> latency_time, std::span<const double> band_time,
                          std::span<const LoadCurve* const> curves) {
  double floor = 0, flat_sum = 0;
  bool loaded = false;
  for (size_t t = 0; t < latency_time.size(); ++t) {
    floor = std::max(floor, band_time[t]);
    flat_sum += latency_time[t];
    if (curves[t] != nullptr && !curves[t]->flat() && latency_time[t] > 0) loaded = true;
  }
  if (!loaded) return std::max(flat_sum, floor);
  // f(m) = sum_t latency_time[t] * ratio_t(band_time[t] / m) - m falls strictly with m.
  auto demand = [&](double m) {
    double sum = 0;
    for (size_t t = 0; t < latency_time.size(); ++t) {
      if (latency_time[t] <= 0) continue;
      const double u = m > 0 ? band_time[t] / m : 0.0;
      sum += latency_time[t] * (curves[t] != nullptr ? curves[t]->Ratio(u) : 1.0);
    }
    return sum;
  };
  const double hi = demand(floor);             // latency at the floor's load bounds m above
  if (floor > 0 && hi <= floor) return floor;  // bandwidth-bound: the slowest tier at its peak
  if (floor > 0) return FallingFixedPoint(demand, floor, hi, hi);
  // No bandwidth term: the latency is at least idle.
  if (hi <= flat_sum) return flat_sum;
  return FallingFixedPoint(demand, flat_sum, demand(flat_sum), hi);
}

double LoadedMemoryTimeNs(std::span<const double> latency_time, std::span<const double> band_time,
                          std::span<const LoadCurve* const> curves, const MemoryCombination& how) {
  if (how.spec()) return LoadedMemoryTimeNs(latency_time, band_time, curves);
  double band_max = 0, band_sum = 0, idle_latency = 0;
  for (size_t t = 0; t < latency_time.size(); ++t) {
    band_max = std::max(band_max, band_time[t]);
    band_sum += band_time[t];
    idle_latency += std::max(0.0, latency_time[t]);
  }
  const double band = band_max + (1 - how.tier_overlap) * (band_sum - band_max);
  const double p = how.limit_smoothness;
  // max(a, b) (1 + (min / max)^p)^(1/p): the p-norm without overflow.
  auto combine = [&](double lat) {
    const double hi = std::max(lat, band), lo = std::min(lat, band);
    return p == 0 || hi <= 0 ? hi : hi * PNormOfOne(lo / hi, p);
  };
  // target(m): the time the work takes when the tiers' latencies are those of time m. It
  // falls as m grows (less bandwidth, lower latencies), so target(m) = m has one solution,
  // at least combine(idle latencies) and at most target of that.
  auto target = [&](double m) {
    double lat = 0;
    for (size_t t = 0; t < latency_time.size(); ++t) {
      if (latency_time[t] <= 0) continue;
      const LoadCurve* c = curves[t];
      lat += latency_time[t] *
             (c == nullptr || c->flat() || m <= 0 ? 1.0 : c->Ratio(band_time[t] / m));
    }
    return combine(lat);
  };
  double lo = combine(idle_latency);
  if (!(lo > 0)) return 0;
  const double hi = target(lo);
  if (hi <= lo) return lo;
  return FallingFixedPoint(target, lo, hi, hi);
}

const TierSpec* Machine::Find(std::string_view tier_name) const {
  for (const TierSpec& t : tiers) {
    if (t.name == tier_name) return &t;
  }
  return nullptr;
}

int Machine::IndexOf(std::string_view tier_name) const {
  for (size_t i = 0; i < tiers.size(); ++i) {
    if (tiers[i].name == tier_name) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<Machine> ParseMachine(std::string_view json_text, std::string_view source) {
  TG_ASSIGN_OR_RETURN(json::Value root, json::Parse(json_text, source));
  const std::string src(source);
  TG_RETURN_IF_ERROR(json::OnlyKeys(
      root, src, "", {"name", "description", "cores", "cache_line_bytes", "pebs_event", "tiers"}));
  json::ObjectReader r(root, src, "");
  Machine m;
  TG_ASSIGN_OR_RETURN(m.name, r.RequiredString("name"));
  TG_ASSIGN_OR_RETURN(m.description, r.OptionalString("description", ""));
  TG_ASSIGN_OR_RETURN(m.cores, CheckedInt(r, root, "cores", 1, 1));
  TG_ASSIGN_OR_RETURN(m.cache_line_bytes,
                      CheckedNumber(r, root, "cache_line_bytes", 64.0, 0, true));
  TG_ASSIGN_OR_RETURN(m.pebs_event, r.OptionalString("pebs_event", m.pebs_event));
  TG_ASSIGN_OR_RETURN(const json::Value* tiers, r.RequiredArray("tiers"));
  if (tiers->array().empty()) {
    return r.Error("tiers", tiers, "a machine needs at least one tier");
  }
  for (size_t i = 0; i < tiers->array().size(); ++i) {
    const json::Value& tv = tiers->array()[i];
    TG_ASSIGN_OR_RETURN(TierSpec t, ParseTier(tv, src, StrCat("tiers[", i, "]")));
    if (m.Find(t.name) != nullptr) {
      return json::ObjectReader(tv, src, StrCat("tiers[", i, "]"))
          .Error("name", tv.Find("name"), StrCat("duplicate tier name \"", t.name, "\""));
    }
    for (const TierSpec& other : m.tiers) {
      if (t.curves.empty() || other.curves.empty()) continue;
      if (ReadShares(t) != ReadShares(other)) {
        return json::ObjectReader(tv, src, StrCat("tiers[", i, "]"))
            .Error("curves", tv.Find("curves"),
                   StrCat("read shares ", ReadShares(t), " differ from tier \"", other.name,
                          "\"'s ", ReadShares(other),
                          " (every tier with curves must be measured at the same read shares)"));
      }
    }
    m.tiers.push_back(std::move(t));
  }
  TG_RETURN_IF_ERROR(r.NoOtherKeys());
  return m;
}

std::vector<std::string> BundledMachineNames() {
  std::vector<std::string> names;
  for (const BundledModel& b : BundledModels()) {
    if (b.name.starts_with(kMachinePrefix)) {
      names.emplace_back(b.name.substr(kMachinePrefix.size()));
    }
  }
  return names;
}

absl::StatusOr<Machine> LoadMachine(std::string_view name_or_path) {
  const BundledModel* bundled = nullptr;
  for (const BundledModel& b : BundledModels()) {
    if (!b.name.starts_with(kMachinePrefix)) continue;
    if (b.name == name_or_path || b.name.substr(kMachinePrefix.size()) == name_or_path) {
      bundled = &b;
    }
  }
  TG_ASSIGN_OR_RETURN(ModelSource model,
                      ReadModelSource(name_or_path, bundled, "machine", BundledMachineNames()));
  return ParseMachine(model.text, model.source);
}

std::string MachineToJson(const Machine& m) {
  json::Writer w(2);
  w.BeginObject();
  w.Key("name");
  w.String(m.name);
  if (!m.description.empty()) {
    w.Key("description");
    w.String(m.description);
  }
  w.Key("cores");
  w.Int(m.cores);
  w.Key("cache_line_bytes");
  w.Double(m.cache_line_bytes);
  w.Key("pebs_event");
  w.String(m.pebs_event);
  w.Key("tiers");
  w.BeginArray();
  for (const TierSpec& t : m.tiers) {
    w.BeginObject();
    w.Key("name");
    w.String(t.name);
    w.Key("capacity_bytes");
    w.Uint(t.capacity_bytes);
    if (t.curves.empty()) {
      w.Key("bandwidth_gbps");
      w.Double(t.bandwidth_gbps);
      w.Key("latency_ns");
      w.Double(t.latency_ns);
    }
    w.Key("migration_gbps");
    w.Double(t.migration_gbps);
    w.Key("numa_node");
    w.Int(t.numa_node);
    if (!t.curves.empty()) {
      w.Key("curves");
      w.BeginArray();
      for (const BandwidthLatencyCurve& c : t.curves) {
        w.BeginObject();
        w.Key("read_pct");
        w.Double(c.read_pct);
        w.Key("points");
        w.BeginArray();
        for (const auto& [bw, lat] : c.points) {
          w.BeginArray();
          w.Double(bw);
          w.Double(lat);
          w.EndArray();
        }
        w.EndArray();
        w.EndObject();
      }
      w.EndArray();
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return w.Take();
}

}  // namespace tiergym
