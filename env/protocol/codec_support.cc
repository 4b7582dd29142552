// The readers and writers the protocol's codec is made of (internal/codec_support.h): plain
// values, request maps, arrays, and the semantic ones that schema.json names (actions,
// configurations, placements, spaces, a step_batch's fields and columns).
#include "env/protocol/internal/codec_support.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <utility>
#include <variant>

#include "absl/strings/str_join.h"
#include "traces/base/field_status.h"
#include "traces/base/json.h"

namespace tiergym::env::protocol::internal {
namespace {

static_assert(std::endian::native == std::endian::little,
              "arrays travel little-endian and are copied as they are in memory");

// absl::StrJoin's formatter for std::string_view (which this Abseil's AlphaNum does not take).
void AppendView(std::string* out, std::string_view s) { out->append(s); }

const DtypeInfo* FindDtype(std::string_view name) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// A bool per entry: an array of bools or a bool/uint8 ndarray.
absl::StatusOr<std::vector<uint8_t>> ReadBoolVector(const object& o, std::string_view field) {
  std::vector<uint8_t> out;
  if (o.type == mtype::ARRAY) {
    for (uint32_t i = 0; i < o.via.array.size; ++i) {
      TG_ASSIGN_OR_RETURN(bool b, ReadBool(o.via.array.ptr[i], Index(field, i)));
      out.push_back(b ? 1 : 0);
    }
    return out;
  }
  if (o.type == mtype::MAP) {
    TG_ASSIGN_OR_RETURN(NdarrayView a, ReadNdarray(o, field));
    if (a.shape.size() != 1) return Invalid(StrCat(field, ".shape"), "expected 1 dimension");
    TG_ASSIGN_OR_RETURN(std::vector<int64_t> v, IntegersOf(a, field));
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] != 0 && v[i] != 1)
        return Invalid(Index(field, i), StrCat("expected 0 or 1, got ", v[i]));
      out.push_back(static_cast<uint8_t>(v[i]));
    }
    return out;
  }
  return Expected(field, "an array of bools or a bool array", o);
}

// A placement given as a map (traces/TRACE_CSV.md section 2): its structure and types;
// the rules (CheckPlacement) are the service's.
absl::StatusOr<uint64_t> ReadAddress(const object& o, std::string_view field) {
  if (o.type == mtype::STR) {
    if (std::optional<uint64_t> v = json::ParseUint64Text(AsView(o))) return *v;
    return Invalid(field, StrCat("expected an address (decimal or 0x-prefixed hex), got \"",
                                 Printable(AsView(o)), "\""));
  }
  if (o.type == mtype::POSITIVE_INTEGER) return o.via.u64;
  return Expected(field, "an address (an unsigned integer or its text)", o);
}

absl::StatusOr<Placement> ReadPlacementMap(const object& o, std::string_view field) {
  MapReader r(o, std::string(field));
  TG_RETURN_IF_ERROR(r.Check());
  Placement p;
  TG_ASSIGN_OR_RETURN(p.default_tier, r.RequiredString("default"));
  const object* ranges = r.Find("ranges");
  const object* fractions = r.Find("fractions");
  if (ranges != nullptr && fractions != nullptr) {
    return Invalid(r.Field("fractions"),
                   "\"ranges\" and \"fractions\" may not both appear; a placement is either "
                   "address ranges or fractions of the footprint");
  }
  if (ranges != nullptr) {
    const std::string path = r.Field("ranges");
    if (ranges->type != mtype::ARRAY) return Expected(path, "an array", *ranges);
    for (uint32_t i = 0; i < ranges->via.array.size; ++i) {
      MapReader item(ranges->via.array.ptr[i], Index(path, i));
      TG_RETURN_IF_ERROR(item.Check());
      PlacementRange range;
      TG_ASSIGN_OR_RETURN(const object* start, item.Required("start"));
      TG_ASSIGN_OR_RETURN(range.start, ReadAddress(*start, item.Field("start")));
      TG_ASSIGN_OR_RETURN(const object* end, item.Required("end"));
      TG_ASSIGN_OR_RETURN(range.end, ReadAddress(*end, item.Field("end")));
      TG_ASSIGN_OR_RETURN(range.tier, item.RequiredString("tier"));
      TG_RETURN_IF_ERROR(item.NoOtherKeys());
      p.ranges.push_back(std::move(range));
    }
  }
  if (fractions != nullptr) {
    const std::string path = r.Field("fractions");
    if (fractions->type != mtype::MAP) return Expected(path, "a map", *fractions);
    for (uint32_t i = 0; i < fractions->via.map.size; ++i) {
      const std::string tier(AsView(fractions->via.map.ptr[i].key));
      TG_ASSIGN_OR_RETURN(double share,
                          ReadDouble(fractions->via.map.ptr[i].val, Member(path, tier)));
      p.fractions.emplace_back(tier, share);
    }
  }
  TG_RETURN_IF_ERROR(r.NoOtherKeys());
  return p;
}

// A per-entry list (seeds, options): exactly n entries, each read with `read` into `out`
// unless nil (then left as it is).
template <typename T, typename Read>
absl::Status ReadEntries(const object& o, std::string_view field, size_t n, std::vector<T>& out,
                         Read read) {
  if (o.type != mtype::ARRAY) return Expected(field, "an array", o);
  if (o.via.array.size != n) {
    return Invalid(field, StrCat(o.via.array.size, " entries for ", n, " sessions"));
  }
  out.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const object& entry = o.via.array.ptr[i];
    if (entry.type == mtype::NIL) continue;
    TG_ASSIGN_OR_RETURN(out[i], read(entry, Index(field, i)));
  }
  return absl::OkStatus();
}

void WriteInts(Packer& p, const std::vector<int64_t>& values) {
  p.Ndarray("int64", {values.size()}, values.data(), values.size() * sizeof(int64_t));
}

// [n, width] observations of `results`.
void WriteObservations(Packer& p, const std::vector<StepResult>& results) {
  const size_t n = results.size();
  const size_t width = n == 0 ? 0 : results[0].observation.size();
  std::vector<float> obs;
  obs.reserve(n * width);
  for (const StepResult& r : results)
    obs.insert(obs.end(), r.observation.begin(), r.observation.end());
  p.Ndarray("float32", {n, width}, obs.data(), obs.size() * sizeof(float));
}

std::vector<const StepInfo*> InfosOf(const std::vector<StepResult>& results) {
  std::vector<const StepInfo*> infos(results.size());
  for (size_t i = 0; i < results.size(); ++i) infos[i] = &results[i].info;
  return infos;
}

// The columns of the action mask: tiers in placement mode, 1 + tiers in keep mode; 0 when
// the mask does not divide into them (move mode).
size_t MaskColumns(const StepInfo& info) {
  const size_t columns =
      info.action_mask_columns > 0 ? info.action_mask_columns : info.tier_used_bytes.size();
  return columns > 1 && info.action_mask.size() % columns == 0 ? columns : 0;
}

}  // namespace

// --- Errors --------------------------------------------------------------------------------

absl::Status Invalid(std::string_view field, std::string_view detail) {
  return InvalidFieldError(field, detail);
}

std::string_view TypeName(const object& o) {
  switch (o.type) {
    case mtype::NIL:
      return "nil";
    case mtype::BOOLEAN:
      return "bool";
    case mtype::POSITIVE_INTEGER:
    case mtype::NEGATIVE_INTEGER:
      return "integer";
    case mtype::FLOAT32:
    case mtype::FLOAT64:
      return "float";
    case mtype::STR:
      return "str";
    case mtype::BIN:
      return "bin";
    case mtype::ARRAY:
      return "array";
    case mtype::MAP:
      return "map";
    case mtype::EXT:
      return "ext";
  }
  return "unknown";
}

absl::Status Expected(std::string_view field, std::string_view what, const object& o) {
  return Invalid(field, StrCat("expected ", what, ", got ", TypeName(o)));
}

// --- Plain values --------------------------------------------------------------------------

absl::StatusOr<uint64_t> ReadUint(const object& o, std::string_view field) {
  if (o.type == mtype::POSITIVE_INTEGER) return o.via.u64;
  if (o.type == mtype::NEGATIVE_INTEGER) {
    return Invalid(field, StrCat("must be >= 0, got ", o.via.i64));
  }
  return Expected(field, "an unsigned integer", o);
}

absl::StatusOr<int64_t> ReadInt64(const object& o, std::string_view field) {
  if (o.type == mtype::NEGATIVE_INTEGER) return o.via.i64;
  if (o.type == mtype::POSITIVE_INTEGER) {
    if (o.via.u64 > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Invalid(field, StrCat(o.via.u64, " is out of the int64 range"));
    }
    return static_cast<int64_t>(o.via.u64);
  }
  return Expected(field, "an integer", o);
}

absl::StatusOr<double> ReadDouble(const object& o, std::string_view field) {
  if (o.type == mtype::FLOAT32 || o.type == mtype::FLOAT64) return o.via.f64;
  if (o.type == mtype::POSITIVE_INTEGER) return static_cast<double>(o.via.u64);
  if (o.type == mtype::NEGATIVE_INTEGER) return static_cast<double>(o.via.i64);
  return Expected(field, "a number", o);
}

absl::StatusOr<std::string> ReadString(const object& o, std::string_view field) {
  if (o.type != mtype::STR) return Expected(field, "a string", o);
  return std::string(AsView(o));
}

// A session handle: a non-empty string of at most kMaxSessionIdBytes.
absl::StatusOr<SessionId> ReadSession(const object& o, std::string_view field) {
  if (o.type != mtype::STR) return Expected(field, "a session handle (a string)", o);
  if (o.via.str.size == 0 || o.via.str.size > kMaxSessionIdBytes) {
    return Invalid(field, StrCat("a session handle has 1 to ", kMaxSessionIdBytes,
                                 " characters, got ", o.via.str.size));
  }
  return SessionId(AsView(o));
}

absl::StatusOr<bool> ReadBool(const object& o, std::string_view field) {
  if (o.type != mtype::BOOLEAN) return Expected(field, "a bool", o);
  return o.via.boolean;
}

absl::StatusOr<int> ReadIntFromUint(const object& o, std::string_view field) {
  TG_ASSIGN_OR_RETURN(uint64_t v, ReadUint(o, field));
  return static_cast<int>(v);
}

absl::StatusOr<std::string> ReadName(const object& o, std::string_view field) {
  TG_ASSIGN_OR_RETURN(std::string s, ReadString(o, field));
  if (s.size() > kMaxNameBytes) {
    return Invalid(field, StrCat(s.size(), " bytes; a name has at most ", kMaxNameBytes));
  }
  return s;
}

absl::StatusOr<std::vector<std::string>> ReadStrings(const object& o, std::string_view field) {
  if (o.type != mtype::ARRAY) return Expected(field, "an array", o);
  std::vector<std::string> out;
  out.reserve(o.via.array.size);
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    TG_ASSIGN_OR_RETURN(std::string s, ReadString(o.via.array.ptr[i], Index(field, i)));
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<std::vector<uint64_t>> ReadUints(const object& o, std::string_view field) {
  if (o.type != mtype::ARRAY) return Expected(field, "an array", o);
  std::vector<uint64_t> out;
  out.reserve(o.via.array.size);
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    TG_ASSIGN_OR_RETURN(uint64_t d, ReadUint(o.via.array.ptr[i], Index(field, i)));
    out.push_back(d);
  }
  return out;
}

absl::StatusOr<ConfigText> ReadTextMap(const object& o, std::string_view field) {
  if (o.type != mtype::MAP) return Expected(field, "a map", o);
  ConfigText out;
  for (uint32_t i = 0; i < o.via.map.size; ++i) {
    TG_ASSIGN_OR_RETURN(std::string k, ReadString(o.via.map.ptr[i].key, field));
    TG_ASSIGN_OR_RETURN(std::string v, ReadString(o.via.map.ptr[i].val, Member(field, k)));
    out[k] = std::move(v);
  }
  return out;
}

absl::StatusOr<std::map<std::string, uint64_t>> ReadCountMap(const object& o,
                                                             std::string_view field) {
  if (o.type != mtype::MAP) return Expected(field, "a map", o);
  std::map<std::string, uint64_t> out;
  for (uint32_t i = 0; i < o.via.map.size; ++i) {
    TG_ASSIGN_OR_RETURN(std::string k, ReadString(o.via.map.ptr[i].key, field));
    TG_ASSIGN_OR_RETURN(uint64_t v, ReadUint(o.via.map.ptr[i].val, Member(field, k)));
    out[k] = v;
  }
  return out;
}

absl::StatusOr<absl::StatusCode> ReadCodeName(const object& o, std::string_view field) {
  TG_ASSIGN_OR_RETURN(std::string code, ReadString(o, field));
  return ParseCodeName(code);
}

void WriteTextMap(Packer& p, const ConfigText& v) {
  p.Map(v.size());
  for (const auto& [k, text] : v) {
    p.Str(k);
    p.Str(text);
  }
}

void WriteCountMap(Packer& p, const std::map<std::string, uint64_t>& v) {
  p.Map(v.size());
  for (const auto& [k, n] : v) {
    p.Str(k);
    p.Uint(n);
  }
}

void WriteCodeName(Packer& p, absl::StatusCode code) { p.Str(CodeName(code)); }

// --- Request maps --------------------------------------------------------------------------

absl::Status MapReader::Check() const {
  if (o_.type != mtype::MAP) {
    return Expected(path_.empty() ? std::string(kPayloadField) : path_, "a map", o_);
  }
  for (uint32_t i = 0; i < o_.via.map.size; ++i) {
    if (o_.via.map.ptr[i].key.type != mtype::STR) {
      return Invalid(path_.empty() ? std::string(kPayloadField) : path_,
                     StrCat("map keys must be strings, got ", TypeName(o_.via.map.ptr[i].key)));
    }
  }
  return absl::OkStatus();
}

const object* MapReader::Find(std::string_view key) {
  known_.push_back(key);
  for (uint32_t i = 0; i < o_.via.map.size; ++i) {
    const msgpack::object_kv& kv = o_.via.map.ptr[i];
    if (AsView(kv.key) == key) return kv.val.type == mtype::NIL ? nullptr : &kv.val;
  }
  return nullptr;
}

bool MapReader::Has(std::string_view key) const {
  for (uint32_t i = 0; i < o_.via.map.size; ++i) {
    const msgpack::object_kv& kv = o_.via.map.ptr[i];
    if (AsView(kv.key) == key) return kv.val.type != mtype::NIL;
  }
  return false;
}

absl::StatusOr<const object*> MapReader::Required(std::string_view key) {
  const object* o = Find(key);
  if (o == nullptr) return Invalid(Field(key), "required field is missing");
  return o;
}

absl::StatusOr<uint64_t> MapReader::RequiredUint(std::string_view key) {
  TG_ASSIGN_OR_RETURN(const object* o, Required(key));
  return ReadUint(*o, Field(key));
}

absl::StatusOr<std::string> MapReader::RequiredString(std::string_view key) {
  TG_ASSIGN_OR_RETURN(const object* o, Required(key));
  return ReadString(*o, Field(key));
}

absl::Status MapReader::NoOtherKeys() const {
  for (uint32_t i = 0; i < o_.via.map.size; ++i) {
    const std::string_view key = AsView(o_.via.map.ptr[i].key);
    bool known = false;
    for (std::string_view k : known_) known = known || k == key;
    if (!known) {
      return Invalid(
          Field(key),
          StrCat("unknown key (expected: ", absl::StrJoin(known_, ", ", AppendView), ")"));
    }
  }
  return absl::OkStatus();
}

// --- Replies' maps ---------------------------------------------------------------------------

const object* Get(const object& map, std::string_view key) {
  if (map.type != mtype::MAP) return nullptr;
  for (uint32_t i = 0; i < map.via.map.size; ++i) {
    const msgpack::object_kv& kv = map.via.map.ptr[i];
    if (kv.key.type == mtype::STR && AsView(kv.key) == key) return &kv.val;
  }
  return nullptr;
}

absl::StatusOr<const object*> Need(const object& map, std::string_view key, std::string_view path) {
  const object* o = Get(map, key);
  if (o == nullptr) return Invalid(Member(path, key), "missing in the reply");
  return o;
}

// --- Arrays ----------------------------------------------------------------------------

absl::StatusOr<NdarrayView> ReadNdarray(const object& o, std::string_view field) {
  MapReader r(o, std::string(field));
  TG_RETURN_IF_ERROR(r.Check());
  NdarrayView a;
  TG_ASSIGN_OR_RETURN(std::string dtype, r.RequiredString("dtype"));
  a.dtype = FindDtype(dtype);
  if (a.dtype == nullptr) {
    const std::string names = absl::StrJoin(
        kDtypes, ", ", [](std::string* out, const DtypeInfo& d) { out->append(d.name); });
    return Invalid(r.Field("dtype"),
                   StrCat("unknown dtype \"", Printable(dtype), "\" (known: ", names, ")"));
  }
  TG_ASSIGN_OR_RETURN(const object* shape, r.Required("shape"));
  if (shape->type != mtype::ARRAY) return Expected(r.Field("shape"), "an array", *shape);
  if (shape->via.array.size > 8) return Invalid(r.Field("shape"), "more than 8 dimensions");
  a.size = 1;
  for (uint32_t i = 0; i < shape->via.array.size; ++i) {
    TG_ASSIGN_OR_RETURN(uint64_t d, ReadUint(shape->via.array.ptr[i], Index(r.Field("shape"), i)));
    if (d != 0 && a.size > std::numeric_limits<uint32_t>::max() / d) {
      return Invalid(r.Field("shape"), "too many elements");
    }
    a.size *= d;
    a.shape.push_back(d);
  }
  TG_ASSIGN_OR_RETURN(const object* data, r.Required("data"));
  if (data->type != mtype::BIN) return Expected(r.Field("data"), "bin", *data);
  a.data = std::string_view(data->via.bin.ptr, data->via.bin.size);
  if (a.data.size() != a.size * a.dtype->itemsize) {
    return Invalid(r.Field("data"),
                   StrCat(a.data.size(), " bytes for ", a.size, " elements of ", a.dtype->name,
                          " (", a.size * a.dtype->itemsize, " bytes expected)"));
  }
  TG_RETURN_IF_ERROR(r.NoOtherKeys());
  return a;
}

// The elements of an integer (or bool) array as int64; `field` names the array, errors name
// the element.
absl::StatusOr<std::vector<int64_t>> IntegersOf(const NdarrayView& a, std::string_view field) {
  if (!a.dtype->is_integer) {
    return Invalid(StrCat(field, ".dtype"),
                   StrCat("expected an integer dtype, got ", a.dtype->name));
  }
  std::vector<int64_t> out(a.size);
  const char* p = a.data.data();
  const size_t w = a.dtype->itemsize;
  for (uint64_t i = 0; i < a.size; ++i, p += w) {
    if (a.dtype->is_signed) {
      out[i] = w == 1   ? Load<int8_t>(p)
               : w == 2 ? Load<int16_t>(p)
               : w == 4 ? Load<int32_t>(p)
                        : Load<int64_t>(p);
    } else {
      const uint64_t u = w == 1   ? Load<uint8_t>(p)
                         : w == 2 ? Load<uint16_t>(p)
                         : w == 4 ? Load<uint32_t>(p)
                                  : Load<uint64_t>(p);
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Invalid(Index(field, i), StrCat(u, " is out of the int64 range"));
      }
      out[i] = static_cast<int64_t>(u);
    }
  }
  return out;
}

void Packer::Double(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  char b[9];
  b[0] = static_cast<char>(0xcb);
  for (int i = 0; i < 8; ++i) b[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
  buf_.write(b, sizeof b);
}

void Packer::Ndarray(std::string_view dtype, const std::vector<uint64_t>& shape, const void* data,
                     size_t bytes) {
  Map(3);
  Str("dtype");
  Str(dtype);
  Str("shape");
  Array(shape.size());
  for (uint64_t d : shape) Uint(d);
  Str("data");
  pk_.pack_bin(static_cast<uint32_t>(bytes));
  pk_.pack_bin_body(static_cast<const char*>(data), static_cast<uint32_t>(bytes));
}

// --- Requests' semantic fields ------------------------------------------------------------

// Configuration values keep their msgpack types (env/spec/config_value.h); arrays are
// lists of strings.
absl::StatusOr<ConfigMap> ReadConfig(const object& o, std::string_view field) {
  MapReader r(o, std::string(field));
  TG_RETURN_IF_ERROR(r.Check());
  ConfigMap config;
  for (uint32_t i = 0; i < o.via.map.size; ++i) {
    const std::string key(AsView(o.via.map.ptr[i].key));
    const object& v = o.via.map.ptr[i].val;
    const std::string f = Member(field, key);
    ConfigValue value;
    switch (v.type) {
      case mtype::STR:
        if (v.via.str.size > kMaxValueBytes) {
          return Invalid(f, StrCat(v.via.str.size, " bytes; at most ", kMaxValueBytes));
        }
        value = ConfigValue(AsView(v));
        break;
      case mtype::POSITIVE_INTEGER:
      case mtype::NEGATIVE_INTEGER: {
        TG_ASSIGN_OR_RETURN(int64_t n, ReadInt64(v, f));
        value = ConfigValue(n);
        break;
      }
      case mtype::FLOAT32:
      case mtype::FLOAT64:
        value = ConfigValue(v.via.f64);
        break;
      case mtype::BOOLEAN:
        value = ConfigValue(v.via.boolean);
        break;
      case mtype::ARRAY: {
        ConfigValue::List list;
        size_t bytes = 0;
        for (uint32_t j = 0; j < v.via.array.size; ++j) {
          TG_ASSIGN_OR_RETURN(std::string s, ReadString(v.via.array.ptr[j], Index(f, j)));
          if (s.size() > kMaxValueBytes) {
            return Invalid(Index(f, j), StrCat(s.size(), " bytes; at most ", kMaxValueBytes));
          }
          bytes += s.size() + 1;
          if (bytes > kMaxListBytes) {
            return Invalid(Index(f, j), StrCat("the list passes ", kMaxListBytes, " bytes"));
          }
          list.push_back(std::move(s));
        }
        value = ConfigValue(std::move(list));
        break;
      }
      default:
        return Expected(f, "a string, number, bool or array of strings", v);
    }
    config[key] = std::move(value);
  }
  return config;
}

// An action: an integer, an array of integers or a 0-/1-dimensional integer array.
absl::StatusOr<Action> ReadAction(const object& o, std::string_view field) {
  Action action;
  switch (o.type) {
    case mtype::POSITIVE_INTEGER:
    case mtype::NEGATIVE_INTEGER: {
      TG_ASSIGN_OR_RETURN(int64_t v, ReadInt64(o, field));
      action.values.push_back(v);
      return action;
    }
    case mtype::ARRAY:
      action.values.reserve(o.via.array.size);
      for (uint32_t i = 0; i < o.via.array.size; ++i) {
        TG_ASSIGN_OR_RETURN(int64_t v, ReadInt64(o.via.array.ptr[i], Index(field, i)));
        action.values.push_back(v);
      }
      return action;
    case mtype::MAP: {
      TG_ASSIGN_OR_RETURN(NdarrayView a, ReadNdarray(o, field));
      if (a.shape.size() > 1) {
        return Invalid(StrCat(field, ".shape"),
                       StrCat("an action has at most 1 dimension, got ", a.shape.size()));
      }
      TG_ASSIGN_OR_RETURN(action.values, IntegersOf(a, field));
      return action;
    }
    default:
      return Expected(field, "an integer, an array of integers or an integer array", o);
  }
}

void WriteAction(Packer& p, const Action& action) { WriteInts(p, action.values); }

// A profile by name (at most kMaxNameBytes) or index (its text).
absl::StatusOr<std::string> ReadProfileRef(const object& o, std::string_view field) {
  if (o.type == mtype::STR) {
    if (o.via.str.size > kMaxNameBytes) {
      return Invalid(field, StrCat(o.via.str.size, " bytes; a name has at most ", kMaxNameBytes));
    }
    return std::string(AsView(o));
  }
  if (o.type == mtype::POSITIVE_INTEGER) return StrCat(o.via.u64);
  return Expected(field, "a profile name or index", o);
}

absl::StatusOr<ResetOptions> ReadResetOptions(const object& o, std::string_view field) {
  MapReader r(o, std::string(field));
  TG_RETURN_IF_ERROR(r.Check());
  ResetOptions options;
  if (const object* p = r.Find("profile")) {
    TG_ASSIGN_OR_RETURN(options.profile, ReadProfileRef(*p, r.Field("profile")));
  }
  TG_RETURN_IF_ERROR(r.NoOtherKeys());
  return options;
}

void WriteResetOptions(Packer& p, const ResetOptions& options) {
  p.Map(options.profile ? 1 : 0);
  if (options.profile) {
    p.Str("profile");
    p.Str(*options.profile);
  }
}

bool HasResetOptions(const ResetRequest& r) { return r.options.profile.has_value(); }

void WriteConfig(Packer& p, const ConfigMap& config) {
  p.Map(config.size());
  for (const auto& [k, v] : config) {
    p.Str(k);
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::string>) {
            p.Str(x);
          } else if constexpr (std::is_same_v<T, int64_t>) {
            p.Int(x);
          } else if constexpr (std::is_same_v<T, double>) {
            p.Double(x);
          } else if constexpr (std::is_same_v<T, bool>) {
            p.Bool(x);
          } else {
            WriteStrings(p, x);
          }
        },
        v.value);
  }
}

// step_batch: its sessions decide how many entries every other field has.
absl::Status ReadBatchSessions(const object& o, std::string_view field, StepBatchRequest& into,
                               const DecodeLimits& limits) {
  if (o.type != mtype::ARRAY) return Expected(field, "an array", o);
  const size_t n = o.via.array.size;
  if (n == 0) return Invalid(field, "no sessions");
  if (n > limits.max_batch) {
    return FieldError(absl::StatusCode::kResourceExhausted, field,
                      StrCat(n, " entries; at most ", limits.max_batch, " per batch"));
  }
  into.sessions.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    TG_ASSIGN_OR_RETURN(SessionId id, ReadSession(o.via.array.ptr[i], Index(field, i)));
    into.sessions.push_back(std::move(id));
  }
  return absl::OkStatus();
}

absl::Status ReadBatchActions(const object& o, std::string_view field, StepBatchRequest& into,
                              const DecodeLimits&) {
  const size_t n = into.sessions.size();
  if (o.type == mtype::MAP) {
    TG_ASSIGN_OR_RETURN(NdarrayView a, ReadNdarray(o, field));
    const std::string shape = StrCat(field, ".shape");
    if (a.shape.empty() || a.shape.size() > 2) {
      return Invalid(
          shape, StrCat("expected [n] or [n, num_regions], got ", a.shape.size(), " dimensions"));
    }
    if (a.shape[0] != n) return Invalid(shape, StrCat(a.shape[0], " rows for ", n, " sessions"));
    TG_ASSIGN_OR_RETURN(std::vector<int64_t> flat, IntegersOf(a, field));
    const size_t width = a.shape.size() == 2 ? a.shape[1] : 1;
    into.actions.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const auto row = static_cast<std::ptrdiff_t>(i * width);
      into.actions[i].values.assign(flat.begin() + row,
                                    flat.begin() + row + static_cast<std::ptrdiff_t>(width));
    }
    return absl::OkStatus();
  }
  if (o.type != mtype::ARRAY) {
    return Expected(field, "an integer array or an array of actions", o);
  }
  if (o.via.array.size != n) {
    return Invalid(field, StrCat(o.via.array.size, " actions for ", n, " sessions"));
  }
  into.actions.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    TG_ASSIGN_OR_RETURN(Action a, ReadAction(o.via.array.ptr[i], Index(field, i)));
    into.actions.push_back(std::move(a));
  }
  return absl::OkStatus();
}

// Rectangular actions as one [n, width] array; others one array each.
void WriteBatchActions(Packer& p, const std::vector<Action>& actions) {
  const size_t n = actions.size();
  const size_t width = actions.empty() ? 0 : actions[0].values.size();
  const bool rectangular = std::all_of(actions.begin(), actions.end(),
                                       [&](const Action& a) { return a.values.size() == width; });
  if (!rectangular) {
    p.Array(n);
    for (const Action& a : actions) WriteAction(p, a);
    return;
  }
  std::vector<int64_t> flat;
  flat.reserve(n * width);
  for (const Action& a : actions) flat.insert(flat.end(), a.values.begin(), a.values.end());
  p.Ndarray("int64", {n, width}, flat.data(), flat.size() * sizeof(int64_t));
}

absl::Status ReadBatchReset(const object& o, std::string_view field, StepBatchRequest& into,
                            const DecodeLimits&) {
  const size_t n = into.sessions.size();
  TG_ASSIGN_OR_RETURN(into.reset, ReadBoolVector(o, field));
  if (into.reset.size() != n) {
    return Invalid(field, StrCat(into.reset.size(), " entries for ", n, " sessions"));
  }
  return absl::OkStatus();
}

void WriteBoolArray(Packer& p, const std::vector<uint8_t>& v) {
  p.Ndarray("bool", {v.size()}, v.data(), v.size());
}

absl::Status ReadBatchSeeds(const object& o, std::string_view field, StepBatchRequest& into,
                            const DecodeLimits&) {
  return ReadEntries(o, field, into.sessions.size(), into.seeds, ReadUint);
}

void WriteBatchSeeds(Packer& p, const std::vector<std::optional<uint64_t>>& seeds) {
  p.Array(seeds.size());
  for (const auto& s : seeds) {
    if (s) {
      p.Uint(*s);
    } else {
      p.Nil();
    }
  }
}

absl::Status ReadBatchOptions(const object& o, std::string_view field, StepBatchRequest& into,
                              const DecodeLimits&) {
  return ReadEntries(o, field, into.sessions.size(), into.options, ReadResetOptions);
}

void WriteBatchOptions(Packer& p, const std::vector<ResetOptions>& options) {
  p.Array(options.size());
  for (const ResetOptions& o : options) WriteResetOptions(p, o);
}

absl::StatusOr<Autoreset> ReadAutoreset(const object& o, std::string_view field) {
  TG_ASSIGN_OR_RETURN(std::string mode, ReadString(o, field));
  if (mode == "none") return Autoreset::kNone;
  if (mode == "same_step") return Autoreset::kSameStep;
  return Invalid(field, StrCat(R"(expected "none" or "same_step", got ")", mode, "\""));
}

void WriteAutoreset(Packer& p, Autoreset mode) {
  p.Str(mode == Autoreset::kSameStep ? "same_step" : "none");
}

absl::Status ReadShmTarget(const object& o, std::string_view field, StepBatchRequest& into,
                           const DecodeLimits&) {
  if (o.type == mtype::BOOLEAN) {
    into.shm_new = o.via.boolean;
    return absl::OkStatus();
  }
  if (o.type != mtype::STR) return Expected(field, "true or a segment handle (a string)", o);
  const std::string_view handle = AsView(o);
  const bool hex = handle.size() == 32 && std::all_of(handle.begin(), handle.end(), [](char c) {
                     return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                   });
  if (!hex) {
    return Invalid(field,
                   "expected true (a new segment) or a segment handle (32 hex digits from an "
                   "earlier reply's shm.segment)");
  }
  into.shm_segment = std::string(handle);
  return absl::OkStatus();
}

bool HasShmTarget(const StepBatchRequest& r) { return r.shm_new || !r.shm_segment.empty(); }

void WriteShmTarget(Packer& p, const StepBatchRequest& r) {
  if (r.shm_new) {
    p.Bool(true);
  } else {
    p.Str(r.shm_segment);
  }
}

absl::Status ReadShmSignal(const object& o, std::string_view field, StepBatchRequest& into,
                           const DecodeLimits&) {
  TG_ASSIGN_OR_RETURN(into.shm_signal, ReadBool(o, field));
  if (into.shm_signal && into.shm_segment.empty()) {
    return Invalid(field,
                   "only with shm naming a segment (the reply that makes a segment is always "
                   "sent: it carries the segment's name)");
  }
  return absl::OkStatus();
}

bool HasShmSignal(const StepBatchRequest& r) { return r.shm_signal && !r.shm_segment.empty(); }

absl::Status ReadShmRequests(const object& o, std::string_view field, StepBatchRequest& into,
                             const DecodeLimits&) {
  TG_ASSIGN_OR_RETURN(into.shm_requests, ReadBool(o, field));
  if (into.shm_requests && !into.shm_new) {
    return Invalid(field, "only with shm: true (the batch that makes the segment asks for it)");
  }
  return absl::OkStatus();
}

bool HasShmRequests(const StepBatchRequest& r) { return r.shm_requests && r.shm_new; }

absl::Status ReadEstimateConfig(const object& o, std::string_view field, EstimateRequest& into,
                                const DecodeLimits&) {
  if (!into.session.empty()) return Invalid(field, "give a session or a config, not both");
  TG_ASSIGN_OR_RETURN(into.config, ReadConfig(o, field));
  return absl::OkStatus();
}

absl::Status ReadPlacementArg(const object& o, std::string_view field, EstimateRequest& into,
                              const DecodeLimits&) {
  if (o.type == mtype::MAP) {
    TG_ASSIGN_OR_RETURN(into.placement, ReadPlacementMap(o, field));
    return absl::OkStatus();
  }
  TG_ASSIGN_OR_RETURN(into.placement_json, ReadString(o, field));
  return absl::OkStatus();
}

void WritePlacementArg(Packer& p, const EstimateRequest& r) {
  if (!r.placement) {
    p.Str(r.placement_json);
    return;
  }
  const Placement& placement = *r.placement;
  const bool ranges = !placement.ranges.empty(), fractions = !placement.fractions.empty();
  p.Map(1 + (ranges ? 1 : 0) + (fractions ? 1 : 0));
  p.Str("default");
  p.Str(placement.default_tier);
  if (ranges) {
    p.Str("ranges");
    p.Array(placement.ranges.size());
    for (const PlacementRange& range : placement.ranges) {
      p.Map(3);
      p.Str("start");
      p.Uint(range.start);
      p.Str("end");
      p.Uint(range.end);
      p.Str("tier");
      p.Str(range.tier);
    }
  }
  if (fractions) {
    p.Str("fractions");
    p.Map(placement.fractions.size());
    for (const auto& [tier, share] : placement.fractions) {
      p.Str(tier);
      p.Double(share);
    }
  }
}

namespace {
// One action per tenant; nil keeps the tenant's placement (an empty action).
absl::Status ReadActionsPerTenant(const object& o, std::string_view field,
                                  std::vector<Action>& into, const DecodeLimits& limits) {
  if (o.type != mtype::ARRAY) return Expected(field, "an array (one action per tenant)", o);
  if (o.via.array.size > limits.max_batch) {
    return Invalid(field, StrCat(o.via.array.size, " actions; at most ", limits.max_batch));
  }
  into.resize(o.via.array.size);
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    const object& one = o.via.array.ptr[i];
    if (one.type == mtype::NIL) continue;  // keep the tenant's placement
    TG_ASSIGN_OR_RETURN(into[i], ReadAction(one, Index(field, i)));
  }
  return absl::OkStatus();
}
}  // namespace

absl::Status ReadTenantActions(const object& o, std::string_view field, CoschedStepRequest& into,
                               const DecodeLimits& limits) {
  return ReadActionsPerTenant(o, field, into.actions, limits);
}

absl::Status ReadTenantActions(const object& o, std::string_view field, StepRequest& into,
                               const DecodeLimits& limits) {
  return ReadActionsPerTenant(o, field, into.actions, limits);
}

bool HasSingleAction(const StepRequest& r) { return !r.action.values.empty() || r.actions.empty(); }

// An empty action (keep the tenant's placement) as nil.
void WriteTenantActions(Packer& p, const std::vector<Action>& actions) {
  p.Array(actions.size());
  for (const Action& a : actions) {
    if (a.values.empty()) {
      p.Nil();
    } else {
      WriteAction(p, a);
    }
  }
}

// --- Replies' semantic fields --------------------------------------------------------------

namespace {

// A required member of a reply map, read with `read` on its path.
template <typename Read>
auto NeedAs(const object& map, std::string_view key, std::string_view path, Read read)
    -> decltype(read(map, path)) {
  TG_ASSIGN_OR_RETURN(const object* o, Need(map, key, path));
  return read(*o, Member(path, key));
}

// Observations of a batch ([n, obs]) into rows (resized to n).
absl::Status ReadObservationRows(const object& o, std::string_view key,
                                 std::vector<StepResult>& rows) {
  std::vector<uint64_t> shape;
  TG_ASSIGN_OR_RETURN(const object* x, Need(o, key, ""));
  TG_ASSIGN_OR_RETURN(std::vector<float> obs, ReadArrayOf<float>(*x, key, "float32", &shape));
  if (shape.size() != 2) return Invalid(key, "expected 2 dimensions");
  rows.resize(shape[0]);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto row = static_cast<std::ptrdiff_t>(i * shape[1]);
    rows[i].observation.assign(obs.begin() + row,
                               obs.begin() + row + static_cast<std::ptrdiff_t>(shape[1]));
  }
  return absl::OkStatus();
}

// A batch's [n] column of `dtype` (its length checked against n by the caller).
template <typename T>
absl::StatusOr<std::vector<T>> ReadBatchColumn(const object& o, std::string_view key,
                                               std::string_view dtype) {
  TG_ASSIGN_OR_RETURN(const object* x, Need(o, key, ""));
  return ReadArrayOf<T>(*x, key, dtype);
}

}  // namespace

absl::StatusOr<Space> ReadSpace(const object& o, std::string_view path) {
  Space s;
  TG_ASSIGN_OR_RETURN(std::string type, NeedAs(o, "type", path, ReadString));
  auto shape = [&]() -> absl::Status {
    TG_ASSIGN_OR_RETURN(const object* sh, Need(o, "shape", path));
    if (sh->type != mtype::ARRAY) return Expected(Member(path, "shape"), "an array", *sh);
    for (uint32_t i = 0; i < sh->via.array.size; ++i) {
      TG_ASSIGN_OR_RETURN(int64_t d, ReadInt64(sh->via.array.ptr[i], Member(path, "shape")));
      s.shape.push_back(d);
    }
    return absl::OkStatus();
  };
  if (type == "box") {
    s.kind = Space::kBox;
    TG_RETURN_IF_ERROR(shape());
    TG_ASSIGN_OR_RETURN(double low, NeedAs(o, "low", path, ReadDouble));
    TG_ASSIGN_OR_RETURN(double high, NeedAs(o, "high", path, ReadDouble));
    s.low = static_cast<float>(low);
    s.high = static_cast<float>(high);
  } else if (type == "discrete") {
    s.kind = Space::kDiscrete;
    TG_ASSIGN_OR_RETURN(s.n, NeedAs(o, "n", path, ReadUint));
  } else if (type == "multi_discrete") {
    s.kind = Space::kMultiDiscrete;
    TG_RETURN_IF_ERROR(shape());
    TG_ASSIGN_OR_RETURN(s.n, NeedAs(o, "nvec", path, ReadUint));
  } else {
    return Invalid(Member(path, "type"), StrCat("unknown space type \"", type, "\""));
  }
  return s;
}

void WriteSpace(Packer& p, const Space& s) {
  auto shape = [&] {
    p.Str("shape");
    p.Array(s.shape.size());
    for (int64_t d : s.shape) p.Int(d);
  };
  switch (s.kind) {
    case Space::kBox:
      p.Map(5);
      p.Str("type");
      p.Str("box");
      shape();
      p.Str("dtype");
      p.Str("float32");
      p.Str("low");
      p.Double(s.low);
      p.Str("high");
      p.Double(s.high);
      return;
    case Space::kDiscrete:
      p.Map(3);
      p.Str("type");
      p.Str("discrete");
      p.Str("n");
      p.Int(s.n);
      p.Str("dtype");
      p.Str("int64");
      return;
    case Space::kMultiDiscrete:
      p.Map(4);
      p.Str("type");
      p.Str("multi_discrete");
      shape();
      p.Str("nvec");
      p.Int(s.n);
      p.Str("dtype");
      p.Str("int64");
      return;
  }
}

absl::Status ReadRegionBounds(const object& o, std::string_view field, EnvSpec& into) {
  std::vector<uint64_t> shape;
  TG_ASSIGN_OR_RETURN(into.region_bounds, ReadArrayOf<uint64_t>(o, field, "uint64", &shape));
  const std::vector<uint64_t> want = {into.profiles.size(), static_cast<uint64_t>(into.num_regions),
                                      2};
  if (shape != want) return Invalid(StrCat(field, ".shape"), "expected [profiles, num_regions, 2]");
  return absl::OkStatus();
}

void WriteRegionBounds(Packer& p, const EnvSpec& spec) {
  p.Ndarray("uint64", {spec.profiles.size(), static_cast<uint64_t>(spec.num_regions), uint64_t{2}},
            spec.region_bounds.data(), spec.region_bounds.size() * sizeof(uint64_t));
}

absl::StatusOr<std::vector<int>> ReadRefusedRegions(const object& o, std::string_view field) {
  TG_ASSIGN_OR_RETURN(std::vector<int32_t> refused, ReadArrayOf<int32_t>(o, field, "int32"));
  return std::vector<int>(refused.begin(), refused.end());
}

void WriteRefusedRegions(Packer& p, const std::vector<int>& regions) {
  const std::vector<int32_t> refused(regions.begin(), regions.end());
  p.Ndarray("int32", {refused.size()}, refused.data(), refused.size() * sizeof(int32_t));
}

// Placement mode: [regions, tiers]; keep mode: [regions, 1 + tiers]; move mode
// (regions * tiers + 1 actions): [n].
void WriteActionMask(Packer& p, const StepInfo& info) {
  const size_t columns = MaskColumns(info);
  if (columns > 0) {
    p.Ndarray("uint8", {info.action_mask.size() / columns, columns}, info.action_mask.data(),
              info.action_mask.size());
  } else {
    p.Ndarray("uint8", {info.action_mask.size()}, info.action_mask.data(), info.action_mask.size());
  }
}

// One int32 array per row (their lengths vary).
void PackRefusedColumn(Packer& p, const std::vector<const StepInfo*>& infos) {
  p.Array(infos.size());
  for (const StepInfo* i : infos) WriteRefusedRegions(p, i->refused_regions);
}

absl::Status ReadRefusedColumn(const object& o, std::string_view path,
                               std::vector<StepResult>& rows) {
  const std::string field = Member(path, "refused_regions");
  TG_ASSIGN_OR_RETURN(const object* refused, Need(o, "refused_regions", path));
  if (refused->type != mtype::ARRAY || refused->via.array.size != rows.size()) {
    return Invalid(field, "expected one array per row");
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    TG_ASSIGN_OR_RETURN(rows[i].info.refused_regions,
                        ReadRefusedRegions(refused->via.array.ptr[i], field));
  }
  return absl::OkStatus();
}

// [n, mask / columns, columns] (placement and keep modes), else [n, mask].
void PackMaskColumn(Packer& p, const std::vector<const StepInfo*>& infos) {
  const size_t n = infos.size();
  const size_t mask = n == 0 ? 0 : infos[0]->action_mask.size();
  std::vector<uint8_t> masks;
  masks.reserve(n * mask);
  for (const StepInfo* i : infos)
    masks.insert(masks.end(), i->action_mask.begin(), i->action_mask.end());
  const size_t columns = n == 0 ? 0 : MaskColumns(*infos[0]);
  if (columns > 0) {
    p.Ndarray("uint8", {n, mask / columns, columns}, masks.data(), masks.size());
  } else {
    p.Ndarray("uint8", {n, mask}, masks.data(), masks.size());
  }
}

absl::Status ReadMaskColumn(const object& o, std::string_view path, std::vector<StepResult>& rows) {
  return ReadRowsColumn<uint8_t>(
      o, "action_mask", "uint8", path, rows, [](StepInfo & i) -> auto& { return i.action_mask; });
}

bool ShmRequestsOffered(const Limits& l) {
  return l.max_shm_bytes > 0 && l.max_shm_request_threads > 0;
}
bool ShmMade(const ShmReply& s) { return !s.name.empty(); }
bool ShmSignalled(const ShmReply& s) { return ShmMade(s) && s.signal; }
bool ShmTakesRequests(const ShmReply& s) { return ShmMade(s) && s.requests; }

// A batch's arrays are in its reply unless its results went to a segment the reply did not
// make (then the reply has only `shm`).
bool HasBatchArrays(const StepBatchReply& r) { return !(r.shm && r.results.empty()); }
bool HasBatchFinals(const StepBatchReply& r) { return HasBatchArrays(r) && !r.finals.empty(); }

void WriteBatchObs(Packer& p, const StepBatchReply& r) { WriteObservations(p, r.results); }

void WriteBatchRewards(Packer& p, const StepBatchReply& r) {
  std::vector<double> reward(r.results.size());
  for (size_t i = 0; i < reward.size(); ++i) reward[i] = r.results[i].reward;
  WriteArray(p, "float64", reward);
}

void WriteBatchTerminated(Packer& p, const StepBatchReply& r) {
  std::vector<uint8_t> flags(r.results.size());
  for (size_t i = 0; i < flags.size(); ++i) flags[i] = r.results[i].terminated ? 1 : 0;
  WriteBoolArray(p, flags);
}

void WriteBatchTruncated(Packer& p, const StepBatchReply& r) {
  std::vector<uint8_t> flags(r.results.size());
  for (size_t i = 0; i < flags.size(); ++i) flags[i] = r.results[i].truncated ? 1 : 0;
  WriteBoolArray(p, flags);
}

void WriteBatchWasReset(Packer& p, const StepBatchReply& r) { WriteBoolArray(p, r.was_reset); }
void WriteBatchInfo(Packer& p, const StepBatchReply& r) { WriteInfoColumns(p, InfosOf(r.results)); }
void WriteBatchFinalObs(Packer& p, const StepBatchReply& r) { WriteObservations(p, r.finals); }
void WriteBatchFinalInfo(Packer& p, const StepBatchReply& r) {
  WriteInfoColumns(p, InfosOf(r.finals));
}

// The batch's columns back into one StepResult per row (hand-written: the reply's arrays
// are columns of the results).
template <>
absl::StatusOr<StepBatchReply> DecodeStruct<StepBatchReply>(const object& o,
                                                            std::string_view path) {
  StepBatchReply r;
  if (const object* shm = Get(o, "shm")) {
    TG_ASSIGN_OR_RETURN(r.shm, DecodeStruct<ShmReply>(*shm, Member(path, "shm")));
    if (Get(o, "obs") == nullptr) return r;  // the results are in the segment
  }
  TG_RETURN_IF_ERROR(ReadObservationRows(o, "obs", r.results));
  const size_t n = r.results.size();
  TG_ASSIGN_OR_RETURN(std::vector<double> reward, ReadBatchColumn<double>(o, "reward", "float64"));
  TG_ASSIGN_OR_RETURN(std::vector<uint8_t> terminated,
                      ReadBatchColumn<uint8_t>(o, "terminated", "bool"));
  TG_ASSIGN_OR_RETURN(std::vector<uint8_t> truncated,
                      ReadBatchColumn<uint8_t>(o, "truncated", "bool"));
  TG_ASSIGN_OR_RETURN(r.was_reset, ReadBatchColumn<uint8_t>(o, "reset", "bool"));
  if (reward.size() != n || terminated.size() != n || truncated.size() != n ||
      r.was_reset.size() != n) {
    return Invalid(kPayloadField, "batch columns of different lengths");
  }
  for (size_t i = 0; i < n; ++i) {
    r.results[i].reward = reward[i];
    r.results[i].terminated = terminated[i] != 0;
    r.results[i].truncated = truncated[i] != 0;
  }
  TG_ASSIGN_OR_RETURN(const object* info, Need(o, "info", path));
  TG_RETURN_IF_ERROR(ReadInfoColumns(*info, "info", r.results));
  if (Get(o, "final_obs") != nullptr) {
    TG_RETURN_IF_ERROR(ReadObservationRows(o, "final_obs", r.finals));
    if (r.finals.size() != n) return Invalid("final_obs", "wrong number of rows");
    TG_ASSIGN_OR_RETURN(const object* final_info, Need(o, "final_info", path));
    TG_RETURN_IF_ERROR(ReadInfoColumns(*final_info, "final_info", r.finals));
  }
  return r;
}

}  // namespace tiergym::env::protocol::internal
