#include "env/protocol/protocol.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

#include "absl/strings/str_join.h"
#include "env/spec/field_path.h"
#include "msgpack.hpp"
#include "traces/base/field_status.h"
#include "traces/base/json.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym::env::protocol {
namespace {

static_assert(std::endian::native == std::endian::little,
              "arrays travel little-endian and are copied as they are in memory");

using msgpack::object;
namespace mtype = msgpack::type;

constexpr std::string_view kOpNames[kNumOps] = {
    "hello",    "list",  "make",  "reset",        "step",          "step_batch",
    "estimate", "close", "stats", "cosched_make", "cosched_reset", "cosched_step"};

// --- Errors inside the codec: a Status whose field is its payload (field_status.h) ------

using ::tiergym::FieldError;
absl::Status Invalid(std::string_view field, std::string_view detail) {
  return InvalidFieldError(field, detail);
}

// The field travels as the status's payload; a status without one is about the payload.
Error ErrorFromFieldStatus(const absl::Status& status) {
  return MakeError(status.code(), ErrorField(status).value_or(kPayloadField),
                   std::string_view(status.message().data(), status.message().size()));
}

std::string Member(std::string_view path, std::string_view key) { return MemberPath(path, key); }
// absl::StrJoin's formatter for std::string_view (which this Abseil's AlphaNum does not take).
void AppendView(std::string* out, std::string_view s) { out->append(s); }

std::string Index(std::string_view path, size_t i) { return StrCat(path, "[", i, "]"); }

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

std::string_view AsView(const object& o) { return {o.via.str.ptr, o.via.str.size}; }

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

// The members of one map, looked up by key, with unknown keys refused at the end.
class MapReader {
 public:
  // `path` is the map's field path ("" for the message itself).
  MapReader(const object& o, std::string path) : o_(o), path_(std::move(path)) {}

  absl::Status Check() const {
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

  // The member or nullptr (nil counts as absent). Marks the key as known.
  const object* Find(std::string_view key) {
    known_.push_back(key);
    for (uint32_t i = 0; i < o_.via.map.size; ++i) {
      const msgpack::object_kv& kv = o_.via.map.ptr[i];
      if (AsView(kv.key) == key) return kv.val.type == mtype::NIL ? nullptr : &kv.val;
    }
    return nullptr;
  }
  absl::StatusOr<const object*> Required(std::string_view key) {
    const object* o = Find(key);
    if (o == nullptr) return Invalid(Field(key), "required field is missing");
    return o;
  }
  [[nodiscard]] std::string Field(std::string_view key) const { return Member(path_, key); }

  absl::StatusOr<uint64_t> RequiredUint(std::string_view key) {
    TG_ASSIGN_OR_RETURN(const object* o, Required(key));
    return ReadUint(*o, Field(key));
  }
  absl::StatusOr<std::string> RequiredString(std::string_view key) {
    TG_ASSIGN_OR_RETURN(const object* o, Required(key));
    return ReadString(*o, Field(key));
  }
  absl::StatusOr<double> RequiredDouble(std::string_view key) {
    TG_ASSIGN_OR_RETURN(const object* o, Required(key));
    return ReadDouble(*o, Field(key));
  }
  absl::StatusOr<bool> RequiredBool(std::string_view key) {
    TG_ASSIGN_OR_RETURN(const object* o, Required(key));
    return ReadBool(*o, Field(key));
  }

  // Refuses the first key no Find() asked for.
  absl::Status NoOtherKeys() const {
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

 private:
  const object& o_;
  std::string path_;
  std::vector<std::string_view> known_;
};

// --- Strict decoding: one pass over the whole message ------------------------------------
//
// What every request must satisfy whatever its op, checked on the unpacked msgpack tree
// before any field is read (a schema-driven codec can run the same pass): map keys are
// strings of at most kMaxKeyBytes, no key appears twice in one map, every string and key
// is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), and there
// are no ext values. Errors are INVALID_ARGUMENT naming the field's path ("config.steps",
// "actions[3]", "options.profile").

constexpr size_t kMaxKeyBytes = 64;
// Names (environment, profile) and configuration values: their longest.
constexpr size_t kMaxNameBytes = 256;
constexpr size_t kMaxValueBytes = 4096;

// Whether `s` is well-formed UTF-8.
bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      return false;
    }
    i += len;
  }
  return true;
}

// The path of member `key` of the map at `path`, fit to be quoted ("config.steps").
std::string KeyPath(std::string_view path, std::string_view key) {
  if (key.size() <= kMaxKeyBytes) return Member(path, key);
  return Member(path, StrCat(key.substr(0, kMaxKeyBytes), "..."));
}

absl::Status StrictCheck(const object& o, const std::string& path) {
  const std::string here = path.empty() ? std::string(kPayloadField) : path;
  switch (o.type) {
    case mtype::STR:
      if (!ValidUtf8(AsView(o))) return Invalid(here, "a string that is not valid UTF-8");
      return absl::OkStatus();
    case mtype::EXT:
      return Invalid(here, "msgpack ext values are not part of the protocol");
    case mtype::ARRAY:
      for (uint32_t i = 0; i < o.via.array.size; ++i) {
        TG_RETURN_IF_ERROR(StrictCheck(o.via.array.ptr[i], Index(path, i)));
      }
      return absl::OkStatus();
    case mtype::MAP: {
      const uint32_t n = o.via.map.size;
      std::vector<std::string_view> keys;
      keys.reserve(n);
      for (uint32_t i = 0; i < n; ++i) {
        const object& k = o.via.map.ptr[i].key;
        if (k.type != mtype::STR) {
          return Invalid(here, StrCat("map keys must be strings, got ", TypeName(k)));
        }
        const std::string_view key = AsView(k);
        if (!ValidUtf8(key)) {
          return Invalid(KeyPath(path, key), "a key that is not valid UTF-8");
        }
        if (key.size() > kMaxKeyBytes) {
          return Invalid(KeyPath(path, key),
                         StrCat("a key of ", key.size(), " bytes; at most ", kMaxKeyBytes));
        }
        keys.push_back(key);
      }
      // Duplicates: sorted copies side by side (maps are small; n log n at worst).
      std::vector<std::string_view> sorted = keys;
      std::sort(sorted.begin(), sorted.end());
      for (size_t i = 1; i < sorted.size(); ++i) {
        if (sorted[i] == sorted[i - 1]) {
          return Invalid(KeyPath(path, sorted[i]), "the key appears more than once");
        }
      }
      for (uint32_t i = 0; i < n; ++i) {
        TG_RETURN_IF_ERROR(StrictCheck(o.via.map.ptr[i].val, KeyPath(path, keys[i])));
      }
      return absl::OkStatus();
    }
    default:
      return absl::OkStatus();
  }
}

// --- Arrays ----------------------------------------------------------------------------

struct DtypeInfo {
  std::string_view name;
  size_t itemsize;
  bool is_integer;
  bool is_signed;
};
constexpr DtypeInfo kDtypes[] = {
    {"float32", 4, false, true}, {"float64", 8, false, true}, {"int8", 1, true, true},
    {"int16", 2, true, true},    {"int32", 4, true, true},    {"int64", 8, true, true},
    {"uint8", 1, true, false},   {"uint16", 2, true, false},  {"uint32", 4, true, false},
    {"uint64", 8, true, false},  {"bool", 1, true, false},
};

const DtypeInfo* FindDtype(std::string_view name) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

struct NdarrayView {
  const DtypeInfo* dtype = nullptr;
  std::vector<uint64_t> shape;
  uint64_t size = 0;  // elements
  std::string_view data;
};

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

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
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

absl::StatusOr<ResetOptions> ReadResetOptions(const object& o, std::string_view field) {
  MapReader r(o, std::string(field));
  TG_RETURN_IF_ERROR(r.Check());
  ResetOptions options;
  if (const object* p = r.Find("profile")) {
    if (p->type == mtype::STR) {
      if (p->via.str.size > kMaxNameBytes) {
        return Invalid(r.Field("profile"),
                       StrCat(p->via.str.size, " bytes; a name has at most ", kMaxNameBytes));
      }
      options.profile = std::string(AsView(*p));
    } else if (p->type == mtype::POSITIVE_INTEGER) {
      options.profile = StrCat(p->via.u64);
    } else {
      return Expected(r.Field("profile"), "a profile name or index", *p);
    }
  }
  TG_RETURN_IF_ERROR(r.NoOtherKeys());
  return options;
}

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
          bytes += s.size() + 1;
          if (bytes > kMaxValueBytes) {
            return Invalid(Index(f, j), StrCat("the list passes ", kMaxValueBytes, " bytes"));
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

// Optional per-entry list: absent/nil gives an empty vector; otherwise exactly n entries.
absl::StatusOr<const object*> ReadEntryArray(MapReader& r, std::string_view key, size_t n) {
  const object* o = r.Find(key);
  if (o == nullptr) return o;
  if (o->type != mtype::ARRAY) return Expected(r.Field(key), "an array", *o);
  if (o->via.array.size != n) {
    return Invalid(r.Field(key), StrCat(o->via.array.size, " entries for ", n, " sessions"));
  }
  return o;
}

absl::StatusOr<StepBatchRequest> ReadStepBatch(MapReader& r, const DecodeLimits& limits) {
  StepBatchRequest b;
  TG_ASSIGN_OR_RETURN(const object* sessions, r.Required("sessions"));
  if (sessions->type != mtype::ARRAY) return Expected("sessions", "an array", *sessions);
  const size_t n = sessions->via.array.size;
  if (n == 0) return Invalid("sessions", "no sessions");
  if (n > limits.max_batch) {
    return FieldError(absl::StatusCode::kResourceExhausted, "sessions",
                      StrCat(n, " entries; at most ", limits.max_batch, " per batch"));
  }
  b.sessions.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    TG_ASSIGN_OR_RETURN(SessionId id,
                        ReadSession(sessions->via.array.ptr[i], Index("sessions", i)));
    b.sessions.push_back(std::move(id));
  }

  TG_ASSIGN_OR_RETURN(const object* actions, r.Required("actions"));
  if (actions->type == mtype::MAP) {
    TG_ASSIGN_OR_RETURN(NdarrayView a, ReadNdarray(*actions, "actions"));
    if (a.shape.empty() || a.shape.size() > 2) {
      return Invalid("actions.shape", StrCat("expected [n] or [n, num_regions], got ",
                                             a.shape.size(), " dimensions"));
    }
    if (a.shape[0] != n) {
      return Invalid("actions.shape", StrCat(a.shape[0], " rows for ", n, " sessions"));
    }
    TG_ASSIGN_OR_RETURN(std::vector<int64_t> flat, IntegersOf(a, "actions"));
    const size_t width = a.shape.size() == 2 ? a.shape[1] : 1;
    b.actions.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const auto row = static_cast<std::ptrdiff_t>(i * width);
      b.actions[i].values.assign(flat.begin() + row,
                                 flat.begin() + row + static_cast<std::ptrdiff_t>(width));
    }
  } else if (actions->type == mtype::ARRAY) {
    if (actions->via.array.size != n) {
      return Invalid("actions", StrCat(actions->via.array.size, " actions for ", n, " sessions"));
    }
    b.actions.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      TG_ASSIGN_OR_RETURN(Action a, ReadAction(actions->via.array.ptr[i], Index("actions", i)));
      b.actions.push_back(std::move(a));
    }
  } else {
    return Expected("actions", "an integer array or an array of actions", *actions);
  }

  if (const object* reset = r.Find("reset")) {
    TG_ASSIGN_OR_RETURN(b.reset, ReadBoolVector(*reset, "reset"));
    if (b.reset.size() != n) {
      return Invalid("reset", StrCat(b.reset.size(), " entries for ", n, " sessions"));
    }
  }
  TG_ASSIGN_OR_RETURN(const object* seeds, ReadEntryArray(r, "seeds", n));
  if (seeds != nullptr) {
    b.seeds.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const object& s = seeds->via.array.ptr[i];
      if (s.type == mtype::NIL) continue;
      TG_ASSIGN_OR_RETURN(uint64_t seed, ReadUint(s, Index("seeds", i)));
      b.seeds[i] = seed;
    }
  }
  TG_ASSIGN_OR_RETURN(const object* options, ReadEntryArray(r, "options", n));
  if (options != nullptr) {
    b.options.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const object& o = options->via.array.ptr[i];
      if (o.type == mtype::NIL) continue;
      TG_ASSIGN_OR_RETURN(b.options[i], ReadResetOptions(o, Index("options", i)));
    }
  }
  if (const object* a = r.Find("autoreset")) {
    TG_ASSIGN_OR_RETURN(std::string mode, ReadString(*a, "autoreset"));
    if (mode == "none") {
      b.autoreset = Autoreset::kNone;
    } else if (mode == "same_step") {
      b.autoreset = Autoreset::kSameStep;
    } else {
      return Invalid("autoreset", StrCat(R"(expected "none" or "same_step", got ")", mode, "\""));
    }
  }
  if (const object* shm = r.Find("shm")) {
    if (shm->type == mtype::BOOLEAN) {
      b.shm_new = shm->via.boolean;
    } else if (shm->type == mtype::STR) {
      const std::string_view handle = AsView(*shm);
      const bool hex = handle.size() == 32 && std::all_of(handle.begin(), handle.end(), [](char c) {
                         return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                       });
      if (!hex) {
        return Invalid("shm",
                       "expected true (a new segment) or a segment handle (32 hex digits "
                       "from an earlier reply's shm.segment)");
      }
      b.shm_segment = std::string(handle);
    } else if (shm->type != mtype::NIL) {
      return Expected("shm", "true or a segment handle (a string)", *shm);
    }
  }
  if (const object* signal = r.Find("shm_signal")) {
    TG_ASSIGN_OR_RETURN(b.shm_signal, ReadBool(*signal, "shm_signal"));
    if (b.shm_signal && b.shm_segment.empty()) {
      return Invalid("shm_signal",
                     "only with shm naming a segment (the reply that makes a segment is always "
                     "sent: it carries the segment's name)");
    }
  }
  if (const object* requests = r.Find("shm_requests")) {
    TG_ASSIGN_OR_RETURN(b.shm_requests, ReadBool(*requests, "shm_requests"));
    if (b.shm_requests && !b.shm_new) {
      return Invalid("shm_requests",
                     "only with shm: true (the batch that makes the segment asks for it)");
    }
  }
  return b;
}

absl::Status DecodeBody(MapReader& r, Request& req, const DecodeLimits& limits) {
  switch (req.op) {
    case Op::kHello:
    case Op::kList:
    case Op::kStats:
      return absl::OkStatus();
    case Op::kMake: {
      MakeRequest m;
      TG_ASSIGN_OR_RETURN(m.env, r.RequiredString("env"));
      if (m.env.size() > kMaxNameBytes) {
        return Invalid("env", StrCat(m.env.size(), " bytes; a name has at most ", kMaxNameBytes));
      }
      if (const object* c = r.Find("config")) {
        TG_ASSIGN_OR_RETURN(m.config, ReadConfig(*c, "config"));
      }
      req.body = std::move(m);
      return absl::OkStatus();
    }
    case Op::kReset: {
      ResetRequest m;
      TG_ASSIGN_OR_RETURN(const object* s, r.Required("session"));
      TG_ASSIGN_OR_RETURN(m.session, ReadSession(*s, "session"));
      if (const object* s = r.Find("seed")) {
        TG_ASSIGN_OR_RETURN(m.seed, ReadUint(*s, "seed"));
      }
      if (const object* o = r.Find("options")) {
        TG_ASSIGN_OR_RETURN(m.options, ReadResetOptions(*o, "options"));
      }
      req.body = std::move(m);
      return absl::OkStatus();
    }
    case Op::kStep: {
      StepRequest m;
      TG_ASSIGN_OR_RETURN(const object* s, r.Required("session"));
      TG_ASSIGN_OR_RETURN(m.session, ReadSession(*s, "session"));
      TG_ASSIGN_OR_RETURN(const object* a, r.Required("action"));
      TG_ASSIGN_OR_RETURN(m.action, ReadAction(*a, "action"));
      req.body = std::move(m);
      return absl::OkStatus();
    }
    case Op::kStepBatch: {
      TG_ASSIGN_OR_RETURN(StepBatchRequest m, ReadStepBatch(r, limits));
      req.body = std::move(m);
      return absl::OkStatus();
    }
    case Op::kEstimate: {
      EstimateRequest m;
      if (const object* s = r.Find("session")) {
        TG_ASSIGN_OR_RETURN(m.session, ReadSession(*s, "session"));
      }
      if (const object* c = r.Find("config")) {
        if (!m.session.empty()) return Invalid("config", "give a session or a config, not both");
        TG_ASSIGN_OR_RETURN(m.config, ReadConfig(*c, "config"));
      }
      TG_ASSIGN_OR_RETURN(const object* p, r.Required("profile"));
      if (p->type == mtype::STR) {
        if (p->via.str.size > kMaxNameBytes) {
          return Invalid("profile",
                         StrCat(p->via.str.size, " bytes; a name has at most ", kMaxNameBytes));
        }
        m.profile = std::string(AsView(*p));
      } else if (p->type == mtype::POSITIVE_INTEGER) {
        m.profile = StrCat(p->via.u64);
      } else {
        return Expected("profile", "a profile name or index", *p);
      }
      TG_ASSIGN_OR_RETURN(const object* placement, r.Required("placement"));
      if (placement->type == mtype::MAP) {
        TG_ASSIGN_OR_RETURN(m.placement, ReadPlacementMap(*placement, "placement"));
      } else {
        TG_ASSIGN_OR_RETURN(m.placement_json, ReadString(*placement, "placement"));
      }
      req.body = std::move(m);
      return absl::OkStatus();
    }
    case Op::kClose: {
      CloseRequest m;
      TG_ASSIGN_OR_RETURN(const object* s, r.Required("session"));
      TG_ASSIGN_OR_RETURN(m.session, ReadSession(*s, "session"));
      req.body = m;
      return absl::OkStatus();
    }
    case Op::kCoschedMake: {
      CoschedMakeRequest m;
      TG_ASSIGN_OR_RETURN(const object* c, r.Required("config"));
      TG_ASSIGN_OR_RETURN(m.config, ReadConfig(*c, "config"));
      req.body = std::move(m);
      return absl::OkStatus();
    }
    case Op::kCoschedReset: {
      CoschedResetRequest m;
      TG_ASSIGN_OR_RETURN(const object* s, r.Required("session"));
      TG_ASSIGN_OR_RETURN(m.session, ReadSession(*s, "session"));
      if (const object* s = r.Find("seed")) {
        TG_ASSIGN_OR_RETURN(m.seed, ReadUint(*s, "seed"));
      }
      req.body = std::move(m);
      return absl::OkStatus();
    }
    case Op::kCoschedStep: {
      CoschedStepRequest m;
      TG_ASSIGN_OR_RETURN(const object* s, r.Required("session"));
      TG_ASSIGN_OR_RETURN(m.session, ReadSession(*s, "session"));
      TG_ASSIGN_OR_RETURN(const object* a, r.Required("actions"));
      if (a->type != mtype::ARRAY)
        return Expected("actions", "an array (one action per tenant)", *a);
      if (a->via.array.size > limits.max_batch) {
        return Invalid("actions",
                       StrCat(a->via.array.size, " actions; at most ", limits.max_batch));
      }
      m.actions.resize(a->via.array.size);
      for (uint32_t i = 0; i < a->via.array.size; ++i) {
        const object& one = a->via.array.ptr[i];
        if (one.type == mtype::NIL) continue;  // keep the tenant's placement
        TG_ASSIGN_OR_RETURN(m.actions[i], ReadAction(one, Index("actions", i)));
      }
      req.body = std::move(m);
      return absl::OkStatus();
    }
  }
  return absl::InternalError("op: unhandled");
}

bool ReferenceAll(mtype::object_type, std::size_t, void*) { return true; }

absl::StatusOr<msgpack::object_handle> Unpack(std::string_view payload, uint64_t max_elements) {
  const uint64_t n = std::min<uint64_t>(payload.size(), max_elements);
  // ext values are unpacked (and then refused by StrictCheck as INVALID_ARGUMENT).
  const msgpack::unpack_limit limit(n, n, payload.size(), payload.size(), payload.size(), 32);
  size_t offset = 0;
  try {
    msgpack::object_handle oh =
        msgpack::unpack(payload.data(), payload.size(), offset, ReferenceAll, nullptr, limit);
    if (offset != payload.size()) {
      return Invalid(kPayloadField, StrCat(payload.size() - offset,
                                           " bytes after the end of the msgpack message"));
    }
    return oh;
  } catch (const msgpack::insufficient_bytes&) {
    return Invalid(kPayloadField, "not msgpack: the message ends in the middle of a value");
  } catch (const msgpack::size_overflow& e) {
    return FieldError(
        absl::StatusCode::kResourceExhausted, kPayloadField,
        StrCat("a msgpack array, map, string or nesting over the limit (", e.what(), ")"));
  } catch (const std::bad_alloc&) {
    return FieldError(absl::StatusCode::kResourceExhausted, kPayloadField, "out of memory");
  } catch (const std::exception& e) {
    return Invalid(kPayloadField, StrCat("not msgpack: ", e.what()));
  }
}

// --- Encoding ----------------------------------------------------------------------------

// msgpack's output stream for Packer: appends to a string that Take() hands over without
// a copy.
struct StringStream {
  std::string bytes;
  void write(const char* data, size_t size) { bytes.append(data, size); }
};

class Packer {
 public:
  Packer() : pk_(buf_) { buf_.bytes.reserve(4096); }

  void Map(size_t n) { pk_.pack_map(static_cast<uint32_t>(n)); }
  void Array(size_t n) { pk_.pack_array(static_cast<uint32_t>(n)); }
  void Str(std::string_view s) {
    pk_.pack_str(static_cast<uint32_t>(s.size()));
    pk_.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
  }
  void Uint(uint64_t v) { pk_.pack_uint64(v); }
  void Int(int64_t v) { pk_.pack_int64(v); }
  // Always a float64 (msgpack-c's pack_double writes integral values as integers, which
  // would turn a reward of 0.0 into the integer 0 for the client).
  void Double(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    char b[9];
    b[0] = static_cast<char>(0xcb);
    for (int i = 0; i < 8; ++i) b[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
    buf_.write(b, sizeof b);
  }
  void Bool(bool b) {
    if (b) {
      pk_.pack_true();
    } else {
      pk_.pack_false();
    }
  }
  void Nil() { pk_.pack_nil(); }
  void OptionalUint(const std::optional<uint64_t>& v) {
    if (v) {
      Uint(*v);
    } else {
      Nil();
    }
  }
  void Ndarray(std::string_view dtype, std::initializer_list<uint64_t> shape, const void* data,
               size_t bytes) {
    NdarrayShaped(dtype, std::vector<uint64_t>(shape), data, bytes);
  }
  // Ndarray with an explicit shape vector.
  void NdarrayShaped(std::string_view dtype, const std::vector<uint64_t>& shape, const void* data,
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
  void Config(const ConfigMap& config) {
    Map(config.size());
    for (const auto& [k, v] : config) {
      Str(k);
      std::visit(
          [&](const auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::string>) {
              Str(x);
            } else if constexpr (std::is_same_v<T, int64_t>) {
              Int(x);
            } else if constexpr (std::is_same_v<T, double>) {
              Double(x);
            } else if constexpr (std::is_same_v<T, bool>) {
              Bool(x);
            } else {
              Array(x.size());
              for (const std::string& item : x) Str(item);
            }
          },
          v.value);
    }
  }
  void Config(const ConfigText& config) {
    Map(config.size());
    for (const auto& [k, v] : config) {
      Str(k);
      Str(v);
    }
  }
  void PlacementMap(const Placement& placement) {
    const bool ranges = !placement.ranges.empty(), fractions = !placement.fractions.empty();
    Map(1 + (ranges ? 1 : 0) + (fractions ? 1 : 0));
    Str("default");
    Str(placement.default_tier);
    if (ranges) {
      Str("ranges");
      Array(placement.ranges.size());
      for (const PlacementRange& r : placement.ranges) {
        Map(3);
        Str("start");
        Uint(r.start);
        Str("end");
        Uint(r.end);
        Str("tier");
        Str(r.tier);
      }
    }
    if (fractions) {
      Str("fractions");
      Map(placement.fractions.size());
      for (const auto& [tier, share] : placement.fractions) {
        Str(tier);
        Double(share);
      }
    }
  }
  void Options(const ResetOptions& options) {
    Map(options.profile ? 1 : 0);
    if (options.profile) {
      Str("profile");
      Str(*options.profile);
    }
  }

  std::string Take() { return std::move(buf_.bytes); }

 private:
  StringStream buf_;
  msgpack::packer<StringStream> pk_;
};

void PackSpace(Packer& p, const Space& s) {
  switch (s.kind) {
    case Space::kBox:
      p.Map(5);
      p.Str("type");
      p.Str("box");
      p.Str("shape");
      p.Array(s.shape.size());
      for (int64_t d : s.shape) p.Int(d);
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
      p.Str("shape");
      p.Array(s.shape.size());
      for (int64_t d : s.shape) p.Int(d);
      p.Str("nvec");
      p.Int(s.n);
      p.Str("dtype");
      p.Str("int64");
      return;
  }
}

void PackSpec(Packer& p, const EnvSpec& spec) {
  p.Map(11);
  p.Str("observation");
  PackSpace(p, spec.observation);
  p.Str("action");
  PackSpace(p, spec.action);
  p.Str("tiers");
  p.Array(spec.tiers.size());
  for (const std::string& t : spec.tiers) p.Str(t);
  p.Str("profiles");
  p.Array(spec.profiles.size());
  for (const std::string& t : spec.profiles) p.Str(t);
  p.Str("num_regions");
  p.Int(spec.num_regions);
  p.Str("obs_region_features");
  p.Int(spec.obs_region_features);
  p.Str("obs_global_offset");
  p.Int(spec.obs_global_offset);
  p.Str("tier_capacity_bytes");
  p.Ndarray("uint64", {spec.tier_capacity_bytes.size()}, spec.tier_capacity_bytes.data(),
            spec.tier_capacity_bytes.size() * sizeof(uint64_t));
  p.Str("tier_migration_gbps");
  p.Ndarray("float64", {spec.tier_migration_gbps.size()}, spec.tier_migration_gbps.data(),
            spec.tier_migration_gbps.size() * sizeof(double));
  p.Str("tier_bandwidth_gbps");
  p.Ndarray("float64", {spec.tier_bandwidth_gbps.size()}, spec.tier_bandwidth_gbps.data(),
            spec.tier_bandwidth_gbps.size() * sizeof(double));
  p.Str("region_bounds");
  p.Ndarray("uint64", {spec.profiles.size(), static_cast<uint64_t>(spec.num_regions), uint64_t{2}},
            spec.region_bounds.data(), spec.region_bounds.size() * sizeof(uint64_t));
}

void PackInfo(Packer& p, const StepInfo& info) {
  p.Map(12);
  p.Str("profile");
  p.Str(info.profile);
  p.Str("step");
  p.Uint(info.step);
  p.Str("interval_ns");
  p.Double(info.interval_ns);
  p.Str("default_interval_ns");
  p.Double(info.default_interval_ns);
  p.Str("migration_ns");
  p.Double(info.migration_ns);
  p.Str("migrated_bytes");
  p.Uint(info.migrated_bytes);
  p.Str("elapsed_ns");
  p.Double(info.elapsed_ns);
  p.Str("default_elapsed_ns");
  p.Double(info.default_elapsed_ns);
  p.Str("default_total_ns");
  p.Double(info.default_total_ns);
  p.Str("tier_used_bytes");
  p.Ndarray("uint64", {info.tier_used_bytes.size()}, info.tier_used_bytes.data(),
            info.tier_used_bytes.size() * sizeof(uint64_t));
  std::vector<int32_t> refused(info.refused_regions.begin(), info.refused_regions.end());
  p.Str("refused_regions");
  p.Ndarray("int32", {refused.size()}, refused.data(), refused.size() * sizeof(int32_t));
  p.Str("action_mask");
  const size_t tiers =
      info.action_mask_columns > 0 ? info.action_mask_columns : info.tier_used_bytes.size();
  // Placement mode: [regions, tiers]; keep mode: [regions, 1 + tiers]; move mode
  // (regions * tiers + 1 actions): [n].
  if (tiers > 1 && info.action_mask.size() % tiers == 0) {
    p.Ndarray("uint8", {info.action_mask.size() / tiers, tiers}, info.action_mask.data(),
              info.action_mask.size());
  } else {
    p.Ndarray("uint8", {info.action_mask.size()}, info.action_mask.data(), info.action_mask.size());
  }
}

// Column-wise infos of a batch. REQUIRES: every info has the same tier count and mask size.
void PackInfoColumns(Packer& p, const std::vector<const StepInfo*>& infos) {
  const size_t n = infos.size();
  const size_t tiers = n == 0 ? 0 : infos[0]->tier_used_bytes.size();
  const size_t mask = n == 0 ? 0 : infos[0]->action_mask.size();
  p.Map(12);
  p.Str("profile");
  p.Array(n);
  for (const StepInfo* i : infos) p.Str(i->profile);
  std::vector<uint64_t> u(n);
  std::vector<double> d(n);
  auto uints = [&](std::string_view key, uint64_t StepInfo::*member) {
    for (size_t k = 0; k < n; ++k) u[k] = infos[k]->*member;
    p.Str(key);
    p.Ndarray("uint64", {n}, u.data(), n * sizeof(uint64_t));
  };
  auto doubles = [&](std::string_view key, double StepInfo::*member) {
    for (size_t k = 0; k < n; ++k) d[k] = infos[k]->*member;
    p.Str(key);
    p.Ndarray("float64", {n}, d.data(), n * sizeof(double));
  };
  uints("step", &StepInfo::step);
  doubles("interval_ns", &StepInfo::interval_ns);
  doubles("default_interval_ns", &StepInfo::default_interval_ns);
  doubles("migration_ns", &StepInfo::migration_ns);
  uints("migrated_bytes", &StepInfo::migrated_bytes);
  doubles("elapsed_ns", &StepInfo::elapsed_ns);
  doubles("default_elapsed_ns", &StepInfo::default_elapsed_ns);
  doubles("default_total_ns", &StepInfo::default_total_ns);
  std::vector<uint64_t> used;
  used.reserve(n * tiers);
  for (const StepInfo* i : infos)
    used.insert(used.end(), i->tier_used_bytes.begin(), i->tier_used_bytes.end());
  p.Str("tier_used_bytes");
  p.Ndarray("uint64", {n, tiers}, used.data(), used.size() * sizeof(uint64_t));
  p.Str("refused_regions");
  p.Array(n);
  for (const StepInfo* i : infos) {
    std::vector<int32_t> refused(i->refused_regions.begin(), i->refused_regions.end());
    p.Ndarray("int32", {refused.size()}, refused.data(), refused.size() * sizeof(int32_t));
  }
  std::vector<uint8_t> masks;
  masks.reserve(n * mask);
  for (const StepInfo* i : infos)
    masks.insert(masks.end(), i->action_mask.begin(), i->action_mask.end());
  p.Str("action_mask");
  // Placement mode: [regions, tiers]; keep mode: [regions, 1 + tiers]; move mode: [n].
  const size_t columns =
      n == 0 || infos[0]->action_mask_columns == 0 ? tiers : infos[0]->action_mask_columns;
  if (columns > 1 && mask % columns == 0) {
    p.Ndarray("uint8", {n, mask / columns, columns}, masks.data(), masks.size());
  } else {
    p.Ndarray("uint8", {n, mask}, masks.data(), masks.size());
  }
}

void PackObservations(Packer& p, const std::vector<const StepResult*>& results) {
  const size_t n = results.size();
  const size_t width = n == 0 ? 0 : results[0]->observation.size();
  std::vector<float> obs;
  obs.reserve(n * width);
  for (const StepResult* r : results)
    obs.insert(obs.end(), r->observation.begin(), r->observation.end());
  p.Ndarray("float32", {n, width}, obs.data(), obs.size() * sizeof(float));
}

struct ReplyPacker {
  Packer& p;
  const std::optional<uint64_t>& id;

  // The map header of a reply with `own` entries besides v, id and ok, and those three.
  void Head(size_t own, bool ok = true) {
    p.Map(3 + own);
    p.Str("v");
    p.Uint(kVersion);
    p.Str("id");
    p.OptionalUint(id);
    p.Str("ok");
    p.Bool(ok);
  }

  void operator()(const Error& e) {
    Head(1, false);
    p.Str("error");
    p.Map(3);
    p.Str("code");
    p.Str(CodeName(e.code));
    p.Str("field");
    p.Str(e.field);
    p.Str("message");
    p.Str(e.message);
  }
  void operator()(const HelloReply& r) {
    Head(4);
    p.Str("protocol");
    p.Uint(r.protocol);
    p.Str("server");
    p.Str(r.server);
    p.Str("envs");
    p.Array(r.envs.size());
    for (const std::string& e : r.envs) p.Str(e);
    p.Str("limits");
    const bool requests = r.limits.max_shm_bytes > 0 && r.limits.max_shm_request_threads > 0;
    p.Map(8 + (r.limits.max_shm_bytes > 0 ? 1 : 0) + (requests ? 1 : 0));
    p.Str("max_sessions");
    p.Uint(r.limits.max_sessions);
    p.Str("max_sessions_per_connection");
    p.Uint(r.limits.max_sessions_per_connection);
    p.Str("max_pending_per_connection");
    p.Uint(r.limits.max_pending_per_connection);
    p.Str("max_asset_bytes");
    p.Uint(r.limits.max_asset_bytes);
    p.Str("max_message_bytes");
    p.Uint(r.limits.max_message_bytes);
    p.Str("max_batch");
    p.Uint(r.limits.max_batch);
    p.Str("idle_timeout_s");
    p.Double(r.limits.idle_timeout_s);
    p.Str("threads");
    p.Uint(r.limits.threads);
    if (r.limits.max_shm_bytes > 0) {
      p.Str("max_shm_bytes");
      p.Uint(r.limits.max_shm_bytes);
    }
    if (requests) {
      p.Str("max_shm_request_threads");
      p.Uint(r.limits.max_shm_request_threads);
    }
  }
  void operator()(const ListReply& r) {
    Head(1);
    p.Str("envs");
    p.Array(r.envs.size());
    for (const EnvDescription& e : r.envs) {
      p.Map(4);
      p.Str("id");
      p.Str(e.id);
      p.Str("description");
      p.Str(e.description);
      p.Str("op");
      p.Str(e.op);
      p.Str("config_keys");
      p.Array(e.config_keys.size());
      for (const ConfigKey& k : e.config_keys) {
        p.Map(3);
        p.Str("name");
        p.Str(k.name);
        p.Str("default");
        p.Str(k.default_value);
        p.Str("help");
        p.Str(k.help);
      }
    }
  }
  void operator()(const MakeReply& r) {
    Head(3);
    p.Str("session");
    p.Str(r.session);
    p.Str("spec");
    PackSpec(p, r.spec);
    p.Str("config");
    p.Config(r.config);
  }
  void operator()(const ResetReply& r) {
    Head(2);
    p.Str("obs");
    p.Ndarray("float32", {r.result.observation.size()}, r.result.observation.data(),
              r.result.observation.size() * sizeof(float));
    p.Str("info");
    PackInfo(p, r.result.info);
  }
  void operator()(const CoschedMakeReply& r) {
    Head(4);
    p.Str("session");
    p.Str(r.session);
    p.Str("spec");
    PackSpec(p, r.spec);
    p.Str("tenants");
    p.Array(r.tenants.size());
    for (const std::string& t : r.tenants) p.Str(t);
    p.Str("config");
    p.Config(r.config);
  }
  void Doubles(std::string_view key, const std::vector<double>& v) {
    p.Str(key);
    p.Ndarray("float64", {v.size()}, v.data(), v.size() * sizeof(double));
  }
  void operator()(const CoschedStepReply& r) {
    Head(7);
    p.Str("tenants");
    p.Array(r.tenants.size());
    for (const CoschedTenant& t : r.tenants) {
      p.Map(10);
      p.Str("obs");
      p.Ndarray("float32", {t.result.observation.size()}, t.result.observation.data(),
                t.result.observation.size() * sizeof(float));
      p.Str("reward");
      p.Double(t.result.reward);
      p.Str("terminated");
      p.Bool(t.result.terminated);
      p.Str("active");
      p.Bool(t.active);
      p.Str("waiting");
      p.Bool(t.waiting);
      p.Str("info");
      PackInfo(p, t.result.info);
      p.Str("solo_interval_ns");
      p.Double(t.solo_interval_ns);
      Doubles("slowdown", t.slowdown);
      Doubles("bandwidth_gbps", t.bandwidth_gbps);
      Doubles("interference_gbps", t.interference_gbps);
    }
    p.Str("step");
    p.Uint(r.step);
    p.Str("step_ns");
    p.Double(r.step_ns);
    p.Str("elapsed_ns");
    p.Double(r.elapsed_ns);
    p.Str("tier_used_bytes");
    p.Ndarray("uint64", {r.tier_used_bytes.size()}, r.tier_used_bytes.data(),
              r.tier_used_bytes.size() * sizeof(uint64_t));
    Doubles("tier_bandwidth_gbps", r.tier_bandwidth_gbps);
    p.Str("done");
    p.Bool(r.done);
  }
  void operator()(const StepReply& r) {
    Head(5);
    p.Str("obs");
    p.Ndarray("float32", {r.result.observation.size()}, r.result.observation.data(),
              r.result.observation.size() * sizeof(float));
    p.Str("reward");
    p.Double(r.result.reward);
    p.Str("terminated");
    p.Bool(r.result.terminated);
    p.Str("truncated");
    p.Bool(r.result.truncated);
    p.Str("info");
    PackInfo(p, r.result.info);
  }
  void Shm(const ShmReply& s) {
    const bool made = !s.name.empty();
    p.Str("shm");
    p.Map(4 + (made ? 3 + (s.signal ? 1 : 0) + (s.requests ? 1 : 0) : 0));
    p.Str("segment");
    p.Str(s.segment);
    p.Str("seq");
    p.Uint(s.seq);
    p.Str("rows");
    p.Uint(s.rows);
    p.Str("final");
    p.Bool(s.has_final);
    if (!made) return;
    p.Str("name");
    p.Str(s.name);
    p.Str("bytes");
    p.Uint(s.bytes);
    p.Str("layout");
    p.Array(s.layout.size());
    for (const ShmArray& a : s.layout) {
      p.Map(4);
      p.Str("name");
      p.Str(a.name);
      p.Str("dtype");
      p.Str(a.dtype);
      p.Str("shape");
      p.Array(a.shape.size());
      for (uint64_t d : a.shape) p.Uint(d);
      p.Str("offset");
      p.Uint(a.offset);
    }
    if (s.signal) {
      p.Str("signal");
      p.Bool(true);
    }
    if (s.requests) {
      p.Str("requests");
      p.Bool(true);
    }
  }
  void operator()(const StepBatchReply& r) {
    const size_t n = r.results.size();
    if (r.shm && n == 0) {  // the results are in the segment
      Head(1);
      Shm(*r.shm);
      return;
    }
    const bool finals = !r.finals.empty();
    Head(6 + (finals ? 2 : 0) + (r.shm ? 1 : 0));
    if (r.shm) Shm(*r.shm);
    std::vector<const StepResult*> results(n);
    std::vector<const StepInfo*> infos(n);
    for (size_t i = 0; i < n; ++i) {
      results[i] = &r.results[i];
      infos[i] = &r.results[i].info;
    }
    p.Str("obs");
    PackObservations(p, results);
    std::vector<double> reward(n);
    std::vector<uint8_t> terminated(n), truncated(n);
    for (size_t i = 0; i < n; ++i) {
      reward[i] = r.results[i].reward;
      terminated[i] = r.results[i].terminated ? 1 : 0;
      truncated[i] = r.results[i].truncated ? 1 : 0;
    }
    p.Str("reward");
    p.Ndarray("float64", {n}, reward.data(), n * sizeof(double));
    p.Str("terminated");
    p.Ndarray("bool", {n}, terminated.data(), n);
    p.Str("truncated");
    p.Ndarray("bool", {n}, truncated.data(), n);
    p.Str("reset");
    p.Ndarray("bool", {r.was_reset.size()}, r.was_reset.data(), r.was_reset.size());
    p.Str("info");
    PackInfoColumns(p, infos);
    if (finals) {
      for (size_t i = 0; i < n; ++i) {
        results[i] = &r.finals[i];
        infos[i] = &r.finals[i].info;
      }
      p.Str("final_obs");
      PackObservations(p, results);
      p.Str("final_info");
      PackInfoColumns(p, infos);
    }
  }
  void operator()(const EstimateReply& r) {
    Head(3);
    p.Str("runtime_ns");
    p.Double(r.runtime_ns);
    p.Str("default_runtime_ns");
    p.Double(r.default_runtime_ns);
    p.Str("speedup");
    p.Double(r.speedup);
  }
  void operator()(const CloseReply&) { Head(0); }
  void operator()(const StatsReply& r) {
    Head(16);
    const std::pair<std::string_view, uint64_t> counters[] = {
        {"sessions", r.sessions},
        {"sessions_made", r.sessions_made},
        {"sessions_closed", r.sessions_closed},
        {"sessions_reclaimed", r.sessions_reclaimed},
        {"asset_sets", r.asset_sets},
        {"asset_bytes", r.asset_bytes},
        {"requests", r.requests},
        {"errors", r.errors},
        {"replies_dropped", r.replies_dropped},
        {"threads", r.threads},
        {"rss_bytes", r.rss_bytes},
        {"shm_segments", r.shm_segments},
        {"shm_bytes", r.shm_bytes},
        {"shm_request_threads", r.shm_request_threads},
    };
    for (const auto& [k, v] : counters) {
      p.Str(k);
      p.Uint(v);
    }
    p.Str("uptime_s");
    p.Double(r.uptime_s);
    p.Str("ops");
    p.Map(r.ops.size());
    for (const auto& [k, v] : r.ops) {
      p.Str(k);
      p.Uint(v);
    }
  }
};

// --- Reply decoding (clients) -------------------------------------------------------------

// Reply decoding is lenient about keys it does not know (newer servers may add some).
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

template <typename T>
absl::StatusOr<std::vector<T>> NumbersOf(const NdarrayView& a, std::string_view dtype,
                                         std::string_view field) {
  if (a.dtype->name != dtype) {
    return Invalid(field, StrCat("expected dtype ", dtype, ", got ", a.dtype->name));
  }
  std::vector<T> out(a.size);
  if (a.size > 0) std::memcpy(out.data(), a.data.data(), a.size * sizeof(T));
  return out;
}

template <typename T>
absl::StatusOr<std::vector<T>> ReadTyped(const object& map, std::string_view key,
                                         std::string_view dtype, std::string_view path,
                                         std::vector<uint64_t>* shape = nullptr) {
  TG_ASSIGN_OR_RETURN(const object* o, Need(map, key, path));
  TG_ASSIGN_OR_RETURN(NdarrayView a, ReadNdarray(*o, Member(path, key)));
  if (shape != nullptr) *shape = a.shape;
  return NumbersOf<T>(a, dtype, Member(path, key));
}

absl::StatusOr<double> NeedDouble(const object& map, std::string_view key, std::string_view path) {
  TG_ASSIGN_OR_RETURN(const object* o, Need(map, key, path));
  return ReadDouble(*o, Member(path, key));
}
absl::StatusOr<uint64_t> NeedUint(const object& map, std::string_view key, std::string_view path) {
  TG_ASSIGN_OR_RETURN(const object* o, Need(map, key, path));
  return ReadUint(*o, Member(path, key));
}
absl::StatusOr<std::string> NeedString(const object& map, std::string_view key,
                                       std::string_view path) {
  TG_ASSIGN_OR_RETURN(const object* o, Need(map, key, path));
  return ReadString(*o, Member(path, key));
}
absl::StatusOr<std::vector<std::string>> NeedStrings(const object& map, std::string_view key,
                                                     std::string_view path) {
  TG_ASSIGN_OR_RETURN(const object* o, Need(map, key, path));
  if (o->type != mtype::ARRAY) return Expected(Member(path, key), "an array", *o);
  std::vector<std::string> out;
  for (uint32_t i = 0; i < o->via.array.size; ++i) {
    TG_ASSIGN_OR_RETURN(std::string s,
                        ReadString(o->via.array.ptr[i], Index(Member(path, key), i)));
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<Space> DecodeSpace(const object& o, std::string_view path) {
  Space s;
  TG_ASSIGN_OR_RETURN(std::string type, NeedString(o, "type", path));
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
    TG_ASSIGN_OR_RETURN(double low, NeedDouble(o, "low", path));
    TG_ASSIGN_OR_RETURN(double high, NeedDouble(o, "high", path));
    s.low = static_cast<float>(low);
    s.high = static_cast<float>(high);
  } else if (type == "discrete") {
    s.kind = Space::kDiscrete;
    TG_ASSIGN_OR_RETURN(s.n, NeedUint(o, "n", path));
  } else if (type == "multi_discrete") {
    s.kind = Space::kMultiDiscrete;
    TG_RETURN_IF_ERROR(shape());
    TG_ASSIGN_OR_RETURN(s.n, NeedUint(o, "nvec", path));
  } else {
    return Invalid(Member(path, "type"), StrCat("unknown space type \"", type, "\""));
  }
  return s;
}

absl::StatusOr<EnvSpec> DecodeSpec(const object& o) {
  EnvSpec spec;
  TG_ASSIGN_OR_RETURN(const object* obs, Need(o, "observation", "spec"));
  TG_ASSIGN_OR_RETURN(spec.observation, DecodeSpace(*obs, "spec.observation"));
  TG_ASSIGN_OR_RETURN(const object* act, Need(o, "action", "spec"));
  TG_ASSIGN_OR_RETURN(spec.action, DecodeSpace(*act, "spec.action"));
  TG_ASSIGN_OR_RETURN(spec.tiers, NeedStrings(o, "tiers", "spec"));
  TG_ASSIGN_OR_RETURN(spec.profiles, NeedStrings(o, "profiles", "spec"));
  TG_ASSIGN_OR_RETURN(uint64_t regions, NeedUint(o, "num_regions", "spec"));
  TG_ASSIGN_OR_RETURN(uint64_t features, NeedUint(o, "obs_region_features", "spec"));
  TG_ASSIGN_OR_RETURN(uint64_t offset, NeedUint(o, "obs_global_offset", "spec"));
  spec.num_regions = static_cast<int>(regions);
  spec.obs_region_features = static_cast<int>(features);
  spec.obs_global_offset = static_cast<int>(offset);
  TG_ASSIGN_OR_RETURN(spec.tier_capacity_bytes,
                      ReadTyped<uint64_t>(o, "tier_capacity_bytes", "uint64", "spec"));
  TG_ASSIGN_OR_RETURN(spec.tier_migration_gbps,
                      ReadTyped<double>(o, "tier_migration_gbps", "float64", "spec"));
  TG_ASSIGN_OR_RETURN(spec.tier_bandwidth_gbps,
                      ReadTyped<double>(o, "tier_bandwidth_gbps", "float64", "spec"));
  std::vector<uint64_t> shape;
  TG_ASSIGN_OR_RETURN(spec.region_bounds,
                      ReadTyped<uint64_t>(o, "region_bounds", "uint64", "spec", &shape));
  if (shape != std::vector<uint64_t>{spec.profiles.size(), regions, 2}) {
    return Invalid("spec.region_bounds.shape", "expected [profiles, num_regions, 2]");
  }
  return spec;
}

absl::StatusOr<ConfigText> DecodeConfigStrings(const object& o, std::string_view path) {
  if (o.type != mtype::MAP) return Expected(path, "a map", o);
  ConfigText out;
  for (uint32_t i = 0; i < o.via.map.size; ++i) {
    TG_ASSIGN_OR_RETURN(std::string k, ReadString(o.via.map.ptr[i].key, path));
    TG_ASSIGN_OR_RETURN(std::string v, ReadString(o.via.map.ptr[i].val, Member(path, k)));
    out[k] = std::move(v);
  }
  return out;
}

absl::StatusOr<StepInfo> DecodeInfo(const object& o, std::string_view path) {
  StepInfo info;
  TG_ASSIGN_OR_RETURN(info.profile, NeedString(o, "profile", path));
  TG_ASSIGN_OR_RETURN(info.step, NeedUint(o, "step", path));
  TG_ASSIGN_OR_RETURN(info.interval_ns, NeedDouble(o, "interval_ns", path));
  TG_ASSIGN_OR_RETURN(info.default_interval_ns, NeedDouble(o, "default_interval_ns", path));
  TG_ASSIGN_OR_RETURN(info.migration_ns, NeedDouble(o, "migration_ns", path));
  TG_ASSIGN_OR_RETURN(info.migrated_bytes, NeedUint(o, "migrated_bytes", path));
  TG_ASSIGN_OR_RETURN(info.elapsed_ns, NeedDouble(o, "elapsed_ns", path));
  TG_ASSIGN_OR_RETURN(info.default_elapsed_ns, NeedDouble(o, "default_elapsed_ns", path));
  TG_ASSIGN_OR_RETURN(info.default_total_ns, NeedDouble(o, "default_total_ns", path));
  TG_ASSIGN_OR_RETURN(info.tier_used_bytes,
                      ReadTyped<uint64_t>(o, "tier_used_bytes", "uint64", path));
  TG_ASSIGN_OR_RETURN(std::vector<int32_t> refused,
                      ReadTyped<int32_t>(o, "refused_regions", "int32", path));
  info.refused_regions.assign(refused.begin(), refused.end());
  TG_ASSIGN_OR_RETURN(info.action_mask, ReadTyped<uint8_t>(o, "action_mask", "uint8", path));
  return info;
}

absl::StatusOr<std::vector<float>> DecodeObservation(const object& o, std::string_view key) {
  return ReadTyped<float>(o, key, "float32", "");
}

// Column-wise infos back into one StepInfo per row.
absl::Status DecodeInfoColumns(const object& o, std::string_view path,
                               std::vector<StepResult>& rows) {
  const size_t n = rows.size();
  TG_ASSIGN_OR_RETURN(std::vector<std::string> profiles, NeedStrings(o, "profile", path));
  if (profiles.size() != n) return Invalid(Member(path, "profile"), "wrong number of rows");
  auto column = [&](std::string_view key, auto member, std::string_view dtype) -> absl::Status {
    using T = std::remove_reference_t<decltype(rows[0].info.*member)>;
    TG_ASSIGN_OR_RETURN(std::vector<T> v, ReadTyped<T>(o, key, dtype, path));
    if (v.size() != n) return Invalid(Member(path, key), "wrong number of rows");
    for (size_t i = 0; i < n; ++i) rows[i].info.*member = v[i];
    return absl::OkStatus();
  };
  for (size_t i = 0; i < n; ++i) rows[i].info.profile = profiles[i];
  TG_RETURN_IF_ERROR(column("step", &StepInfo::step, "uint64"));
  TG_RETURN_IF_ERROR(column("interval_ns", &StepInfo::interval_ns, "float64"));
  TG_RETURN_IF_ERROR(column("default_interval_ns", &StepInfo::default_interval_ns, "float64"));
  TG_RETURN_IF_ERROR(column("migration_ns", &StepInfo::migration_ns, "float64"));
  TG_RETURN_IF_ERROR(column("migrated_bytes", &StepInfo::migrated_bytes, "uint64"));
  TG_RETURN_IF_ERROR(column("elapsed_ns", &StepInfo::elapsed_ns, "float64"));
  TG_RETURN_IF_ERROR(column("default_elapsed_ns", &StepInfo::default_elapsed_ns, "float64"));
  TG_RETURN_IF_ERROR(column("default_total_ns", &StepInfo::default_total_ns, "float64"));
  auto rows_of = [&](std::string_view key, auto dtype_tag, std::string_view dtype,
                     auto assign) -> absl::Status {
    using T = decltype(dtype_tag);
    std::vector<uint64_t> shape;
    TG_ASSIGN_OR_RETURN(std::vector<T> v, ReadTyped<T>(o, key, dtype, path, &shape));
    if (shape.empty() || shape[0] != n) return Invalid(Member(path, key), "wrong number of rows");
    const size_t width = n == 0 ? 0 : v.size() / n;
    for (size_t i = 0; i < n; ++i)
      assign(rows[i].info, v.begin() + i * width, v.begin() + (i + 1) * width);
    return absl::OkStatus();
  };
  TG_RETURN_IF_ERROR(
      rows_of("tier_used_bytes", uint64_t{}, "uint64",
              [](StepInfo& info, auto b, auto e) { info.tier_used_bytes.assign(b, e); }));
  TG_RETURN_IF_ERROR(rows_of("action_mask", uint8_t{}, "uint8", [](StepInfo& info, auto b, auto e) {
    info.action_mask.assign(b, e);
  }));
  TG_ASSIGN_OR_RETURN(const object* refused, Need(o, "refused_regions", path));
  if (refused->type != mtype::ARRAY || refused->via.array.size != n) {
    return Invalid(Member(path, "refused_regions"), "expected one array per row");
  }
  for (size_t i = 0; i < n; ++i) {
    TG_ASSIGN_OR_RETURN(NdarrayView a,
                        ReadNdarray(refused->via.array.ptr[i], Member(path, "refused_regions")));
    TG_ASSIGN_OR_RETURN(std::vector<int32_t> v,
                        NumbersOf<int32_t>(a, "int32", Member(path, "refused_regions")));
    rows[i].info.refused_regions.assign(v.begin(), v.end());
  }
  return absl::OkStatus();
}

absl::Status DecodeObservationRows(const object& o, std::string_view key,
                                   std::vector<StepResult>& rows) {
  std::vector<uint64_t> shape;
  TG_ASSIGN_OR_RETURN(std::vector<float> obs, ReadTyped<float>(o, key, "float32", "", &shape));
  if (shape.size() != 2) return Invalid(key, "expected 2 dimensions");
  rows.resize(shape[0]);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto row = static_cast<std::ptrdiff_t>(i * shape[1]);
    rows[i].observation.assign(obs.begin() + row,
                               obs.begin() + row + static_cast<std::ptrdiff_t>(shape[1]));
  }
  return absl::OkStatus();
}

absl::StatusOr<ShmReply> DecodeShm(const object& o) {
  ShmReply s;
  TG_ASSIGN_OR_RETURN(s.segment, NeedString(o, "segment", "shm"));
  TG_ASSIGN_OR_RETURN(s.seq, NeedUint(o, "seq", "shm"));
  TG_ASSIGN_OR_RETURN(s.rows, NeedUint(o, "rows", "shm"));
  TG_ASSIGN_OR_RETURN(const object* has_final, Need(o, "final", "shm"));
  TG_ASSIGN_OR_RETURN(s.has_final, ReadBool(*has_final, "shm.final"));
  if (Get(o, "name") == nullptr) return s;
  TG_ASSIGN_OR_RETURN(s.name, NeedString(o, "name", "shm"));
  TG_ASSIGN_OR_RETURN(s.bytes, NeedUint(o, "bytes", "shm"));
  if (const object* signal = Get(o, "signal")) {
    TG_ASSIGN_OR_RETURN(s.signal, ReadBool(*signal, "shm.signal"));
  }
  if (const object* requests = Get(o, "requests")) {
    TG_ASSIGN_OR_RETURN(s.requests, ReadBool(*requests, "shm.requests"));
  }
  TG_ASSIGN_OR_RETURN(const object* layout, Need(o, "layout", "shm"));
  if (layout->type != mtype::ARRAY) return Expected("shm.layout", "an array", *layout);
  for (uint32_t i = 0; i < layout->via.array.size; ++i) {
    const object& a = layout->via.array.ptr[i];
    const std::string path = Index("shm.layout", i);
    ShmArray array;
    TG_ASSIGN_OR_RETURN(array.name, NeedString(a, "name", path));
    TG_ASSIGN_OR_RETURN(array.dtype, NeedString(a, "dtype", path));
    TG_ASSIGN_OR_RETURN(array.offset, NeedUint(a, "offset", path));
    TG_ASSIGN_OR_RETURN(const object* shape, Need(a, "shape", path));
    if (shape->type != mtype::ARRAY) return Expected(Member(path, "shape"), "an array", *shape);
    for (uint32_t j = 0; j < shape->via.array.size; ++j) {
      TG_ASSIGN_OR_RETURN(uint64_t d,
                          ReadUint(shape->via.array.ptr[j], Index(Member(path, "shape"), j)));
      array.shape.push_back(d);
    }
    s.layout.push_back(std::move(array));
  }
  return s;
}

absl::StatusOr<ReplyBody> DecodeOk(const object& o, Op op) {
  switch (op) {
    case Op::kHello: {
      HelloReply r;
      TG_ASSIGN_OR_RETURN(r.protocol, NeedUint(o, "protocol", ""));
      TG_ASSIGN_OR_RETURN(r.server, NeedString(o, "server", ""));
      TG_ASSIGN_OR_RETURN(r.envs, NeedStrings(o, "envs", ""));
      TG_ASSIGN_OR_RETURN(const object* l, Need(o, "limits", ""));
      TG_ASSIGN_OR_RETURN(r.limits.max_sessions, NeedUint(*l, "max_sessions", "limits"));
      TG_ASSIGN_OR_RETURN(r.limits.max_sessions_per_connection,
                          NeedUint(*l, "max_sessions_per_connection", "limits"));
      TG_ASSIGN_OR_RETURN(r.limits.max_pending_per_connection,
                          NeedUint(*l, "max_pending_per_connection", "limits"));
      TG_ASSIGN_OR_RETURN(r.limits.max_asset_bytes, NeedUint(*l, "max_asset_bytes", "limits"));
      TG_ASSIGN_OR_RETURN(r.limits.max_message_bytes, NeedUint(*l, "max_message_bytes", "limits"));
      TG_ASSIGN_OR_RETURN(r.limits.max_batch, NeedUint(*l, "max_batch", "limits"));
      TG_ASSIGN_OR_RETURN(r.limits.idle_timeout_s, NeedDouble(*l, "idle_timeout_s", "limits"));
      TG_ASSIGN_OR_RETURN(r.limits.threads, NeedUint(*l, "threads", "limits"));
      if (Get(*l, "max_shm_bytes") != nullptr) {
        TG_ASSIGN_OR_RETURN(r.limits.max_shm_bytes, NeedUint(*l, "max_shm_bytes", "limits"));
      }
      if (Get(*l, "max_shm_request_threads") != nullptr) {
        TG_ASSIGN_OR_RETURN(r.limits.max_shm_request_threads,
                            NeedUint(*l, "max_shm_request_threads", "limits"));
      }
      return r;
    }
    case Op::kList: {
      ListReply r;
      TG_ASSIGN_OR_RETURN(const object* envs, Need(o, "envs", ""));
      if (envs->type != mtype::ARRAY) return Expected("envs", "an array", *envs);
      for (uint32_t i = 0; i < envs->via.array.size; ++i) {
        const object& e = envs->via.array.ptr[i];
        const std::string path = Index("envs", i);
        EnvDescription d;
        TG_ASSIGN_OR_RETURN(d.id, NeedString(e, "id", path));
        TG_ASSIGN_OR_RETURN(d.description, NeedString(e, "description", path));
        // Servers older than the co-scheduling nodes list only `make`'s environment, without
        // the key.
        if (const object* op = Get(e, "op")) {
          TG_ASSIGN_OR_RETURN(d.op, ReadString(*op, Member(path, "op")));
        }
        TG_ASSIGN_OR_RETURN(const object* keys, Need(e, "config_keys", path));
        if (keys->type != mtype::ARRAY)
          return Expected(Member(path, "config_keys"), "an array", *keys);
        for (uint32_t j = 0; j < keys->via.array.size; ++j) {
          const object& k = keys->via.array.ptr[j];
          const std::string kp = Index(Member(path, "config_keys"), j);
          ConfigKey key;
          TG_ASSIGN_OR_RETURN(key.name, NeedString(k, "name", kp));
          TG_ASSIGN_OR_RETURN(key.default_value, NeedString(k, "default", kp));
          TG_ASSIGN_OR_RETURN(key.help, NeedString(k, "help", kp));
          d.config_keys.push_back(std::move(key));
        }
        r.envs.push_back(std::move(d));
      }
      return r;
    }
    case Op::kMake: {
      MakeReply r;
      TG_ASSIGN_OR_RETURN(r.session, NeedString(o, "session", ""));
      TG_ASSIGN_OR_RETURN(const object* spec, Need(o, "spec", ""));
      TG_ASSIGN_OR_RETURN(r.spec, DecodeSpec(*spec));
      TG_ASSIGN_OR_RETURN(const object* config, Need(o, "config", ""));
      TG_ASSIGN_OR_RETURN(r.config, DecodeConfigStrings(*config, "config"));
      return r;
    }
    case Op::kCoschedMake: {
      CoschedMakeReply r;
      TG_ASSIGN_OR_RETURN(r.session, NeedString(o, "session", ""));
      TG_ASSIGN_OR_RETURN(const object* spec, Need(o, "spec", ""));
      TG_ASSIGN_OR_RETURN(r.spec, DecodeSpec(*spec));
      TG_ASSIGN_OR_RETURN(r.tenants, NeedStrings(o, "tenants", ""));
      TG_ASSIGN_OR_RETURN(const object* config, Need(o, "config", ""));
      TG_ASSIGN_OR_RETURN(r.config, DecodeConfigStrings(*config, "config"));
      return r;
    }
    case Op::kCoschedReset:
    case Op::kCoschedStep: {
      CoschedStepReply r;
      TG_ASSIGN_OR_RETURN(const object* tenants, Need(o, "tenants", ""));
      if (tenants->type != mtype::ARRAY) return Expected("tenants", "an array", *tenants);
      for (uint32_t i = 0; i < tenants->via.array.size; ++i) {
        const object& t = tenants->via.array.ptr[i];
        const std::string path = Index("tenants", i);
        CoschedTenant tenant;
        TG_ASSIGN_OR_RETURN(tenant.result.observation, ReadTyped<float>(t, "obs", "float32", path));
        TG_ASSIGN_OR_RETURN(tenant.result.reward, NeedDouble(t, "reward", path));
        TG_ASSIGN_OR_RETURN(const object* term, Need(t, "terminated", path));
        TG_ASSIGN_OR_RETURN(tenant.result.terminated, ReadBool(*term, Member(path, "terminated")));
        TG_ASSIGN_OR_RETURN(const object* active, Need(t, "active", path));
        TG_ASSIGN_OR_RETURN(tenant.active, ReadBool(*active, Member(path, "active")));
        TG_ASSIGN_OR_RETURN(const object* waiting, Need(t, "waiting", path));
        TG_ASSIGN_OR_RETURN(tenant.waiting, ReadBool(*waiting, Member(path, "waiting")));
        TG_ASSIGN_OR_RETURN(const object* info, Need(t, "info", path));
        TG_ASSIGN_OR_RETURN(tenant.result.info, DecodeInfo(*info, Member(path, "info")));
        TG_ASSIGN_OR_RETURN(tenant.solo_interval_ns, NeedDouble(t, "solo_interval_ns", path));
        TG_ASSIGN_OR_RETURN(tenant.slowdown, ReadTyped<double>(t, "slowdown", "float64", path));
        TG_ASSIGN_OR_RETURN(tenant.bandwidth_gbps,
                            ReadTyped<double>(t, "bandwidth_gbps", "float64", path));
        TG_ASSIGN_OR_RETURN(tenant.interference_gbps,
                            ReadTyped<double>(t, "interference_gbps", "float64", path));
        r.tenants.push_back(std::move(tenant));
      }
      TG_ASSIGN_OR_RETURN(r.step, NeedUint(o, "step", ""));
      TG_ASSIGN_OR_RETURN(r.step_ns, NeedDouble(o, "step_ns", ""));
      TG_ASSIGN_OR_RETURN(r.elapsed_ns, NeedDouble(o, "elapsed_ns", ""));
      TG_ASSIGN_OR_RETURN(r.tier_used_bytes,
                          ReadTyped<uint64_t>(o, "tier_used_bytes", "uint64", ""));
      TG_ASSIGN_OR_RETURN(r.tier_bandwidth_gbps,
                          ReadTyped<double>(o, "tier_bandwidth_gbps", "float64", ""));
      TG_ASSIGN_OR_RETURN(const object* done, Need(o, "done", ""));
      TG_ASSIGN_OR_RETURN(r.done, ReadBool(*done, "done"));
      return r;
    }
    case Op::kReset:
    case Op::kStep: {
      StepResult result;
      TG_ASSIGN_OR_RETURN(result.observation, DecodeObservation(o, "obs"));
      TG_ASSIGN_OR_RETURN(const object* info, Need(o, "info", ""));
      TG_ASSIGN_OR_RETURN(result.info, DecodeInfo(*info, "info"));
      if (op == Op::kReset) return ResetReply{std::move(result)};
      TG_ASSIGN_OR_RETURN(result.reward, NeedDouble(o, "reward", ""));
      TG_ASSIGN_OR_RETURN(const object* t, Need(o, "terminated", ""));
      TG_ASSIGN_OR_RETURN(result.terminated, ReadBool(*t, "terminated"));
      TG_ASSIGN_OR_RETURN(const object* u, Need(o, "truncated", ""));
      TG_ASSIGN_OR_RETURN(result.truncated, ReadBool(*u, "truncated"));
      return StepReply{std::move(result)};
    }
    case Op::kStepBatch: {
      StepBatchReply r;
      if (const object* shm = Get(o, "shm")) {
        TG_ASSIGN_OR_RETURN(r.shm, DecodeShm(*shm));
        if (Get(o, "obs") == nullptr) return r;  // the results are in the segment
      }
      TG_RETURN_IF_ERROR(DecodeObservationRows(o, "obs", r.results));
      const size_t n = r.results.size();
      TG_ASSIGN_OR_RETURN(std::vector<double> reward,
                          ReadTyped<double>(o, "reward", "float64", ""));
      TG_ASSIGN_OR_RETURN(std::vector<uint8_t> terminated,
                          ReadTyped<uint8_t>(o, "terminated", "bool", ""));
      TG_ASSIGN_OR_RETURN(std::vector<uint8_t> truncated,
                          ReadTyped<uint8_t>(o, "truncated", "bool", ""));
      TG_ASSIGN_OR_RETURN(r.was_reset, ReadTyped<uint8_t>(o, "reset", "bool", ""));
      if (reward.size() != n || terminated.size() != n || truncated.size() != n ||
          r.was_reset.size() != n) {
        return Invalid(kPayloadField, "batch columns of different lengths");
      }
      for (size_t i = 0; i < n; ++i) {
        r.results[i].reward = reward[i];
        r.results[i].terminated = terminated[i] != 0;
        r.results[i].truncated = truncated[i] != 0;
      }
      TG_ASSIGN_OR_RETURN(const object* info, Need(o, "info", ""));
      TG_RETURN_IF_ERROR(DecodeInfoColumns(*info, "info", r.results));
      if (Get(o, "final_obs") != nullptr) {
        TG_RETURN_IF_ERROR(DecodeObservationRows(o, "final_obs", r.finals));
        if (r.finals.size() != n) return Invalid("final_obs", "wrong number of rows");
        TG_ASSIGN_OR_RETURN(const object* finfo, Need(o, "final_info", ""));
        TG_RETURN_IF_ERROR(DecodeInfoColumns(*finfo, "final_info", r.finals));
      }
      return r;
    }
    case Op::kEstimate: {
      EstimateReply r;
      TG_ASSIGN_OR_RETURN(r.runtime_ns, NeedDouble(o, "runtime_ns", ""));
      TG_ASSIGN_OR_RETURN(r.default_runtime_ns, NeedDouble(o, "default_runtime_ns", ""));
      TG_ASSIGN_OR_RETURN(r.speedup, NeedDouble(o, "speedup", ""));
      return r;
    }
    case Op::kClose:
      return CloseReply{};
    case Op::kStats: {
      StatsReply r;
      const std::pair<std::string_view, uint64_t StatsReply::*> counters[] = {
          {"sessions", &StatsReply::sessions},
          {"sessions_made", &StatsReply::sessions_made},
          {"sessions_closed", &StatsReply::sessions_closed},
          {"sessions_reclaimed", &StatsReply::sessions_reclaimed},
          {"asset_sets", &StatsReply::asset_sets},
          {"asset_bytes", &StatsReply::asset_bytes},
          {"requests", &StatsReply::requests},
          {"errors", &StatsReply::errors},
          {"replies_dropped", &StatsReply::replies_dropped},
          {"threads", &StatsReply::threads},
          {"rss_bytes", &StatsReply::rss_bytes},
          {"shm_segments", &StatsReply::shm_segments},
          {"shm_bytes", &StatsReply::shm_bytes},
      };
      for (const auto& [key, member] : counters) {
        TG_ASSIGN_OR_RETURN(r.*member, NeedUint(o, key, ""));
      }
      if (Get(o, "shm_request_threads") != nullptr) {  // servers before it had none
        TG_ASSIGN_OR_RETURN(r.shm_request_threads, NeedUint(o, "shm_request_threads", ""));
      }
      TG_ASSIGN_OR_RETURN(r.uptime_s, NeedDouble(o, "uptime_s", ""));
      TG_ASSIGN_OR_RETURN(const object* ops, Need(o, "ops", ""));
      if (ops->type != mtype::MAP) return Expected("ops", "a map", *ops);
      for (uint32_t i = 0; i < ops->via.map.size; ++i) {
        TG_ASSIGN_OR_RETURN(std::string k, ReadString(ops->via.map.ptr[i].key, "ops"));
        TG_ASSIGN_OR_RETURN(uint64_t v, ReadUint(ops->via.map.ptr[i].val, Member("ops", k)));
        r.ops[k] = v;
      }
      return r;
    }
  }
  return absl::InternalError("unhandled op");
}

}  // namespace

std::string_view OpName(Op op) { return kOpNames[static_cast<int>(op)]; }

std::optional<Op> ParseOp(std::string_view name) {
  for (int i = 0; i < kNumOps; ++i) {
    if (kOpNames[i] == name) return static_cast<Op>(i);
  }
  return std::nullopt;
}

Error MakeError(absl::StatusCode code, std::string field, std::string_view detail) {
  Error e;
  e.code = code;
  // Kept as is: "FIELD: ..." and messages about a part of the field ("FIELD[3]: ...",
  // "FIELD.key: ..."); anything else ("placement:1:13: ...") gets the prefix.
  const std::string_view rest = detail.substr(std::min(detail.size(), field.size()));
  const bool prefixed =
      detail.substr(0, field.size()) == field &&
      (rest.substr(0, 2) == ": " || (!rest.empty() && (rest[0] == '[' || rest[0] == '.')));
  e.message = prefixed ? std::string(detail) : StrCat(field, ": ", detail);
  e.field = std::move(field);
  return e;
}

Error ErrorFromStatus(const absl::Status& status, std::string field) {
  return MakeError(status.code(), ErrorField(status).value_or(std::move(field)),
                   std::string_view(status.message().data(), status.message().size()));
}

absl::Status ToStatus(const Error& error) { return {error.code, error.message}; }

std::string CodeName(absl::StatusCode code) { return absl::StatusCodeToString(code); }

absl::StatusCode ParseCodeName(std::string_view name) {
  for (int c = 0; c <= 16; ++c) {
    if (absl::StatusCodeToString(static_cast<absl::StatusCode>(c)) == name) {
      return static_cast<absl::StatusCode>(c);
    }
  }
  return absl::StatusCode::kUnknown;
}

DecodedRequest DecodeRequest(std::string_view payload, const DecodeLimits& limits) {
  DecodedRequest out;
  auto fail = [&](const absl::Status& s) {
    out.error = ErrorFromFieldStatus(s);
    return out;
  };
  try {
    absl::StatusOr<msgpack::object_handle> oh = Unpack(payload, limits.max_array_elements);
    if (!oh.ok()) return fail(oh.status());
    const object& root = oh->get();
    MapReader r(root, "");
    if (absl::Status s = r.Check(); !s.ok()) return fail(s);
    if (const object* id = r.Find("id")) {
      absl::StatusOr<uint64_t> v = ReadUint(*id, "id");
      if (!v.ok()) return fail(v.status());
      out.request.id = *v;
    }
    if (absl::Status s = StrictCheck(root, ""); !s.ok()) {
      // A repeated id is not trusted for the reply.
      if (ErrorField(s) == "id") out.request.id.reset();
      return fail(s);
    }
    absl::StatusOr<uint64_t> version = r.RequiredUint("v");
    if (!version.ok()) return fail(version.status());
    out.request.version = *version;
    absl::StatusOr<std::string> op = r.RequiredString("op");
    if (!op.ok()) return fail(op.status());
    std::optional<Op> parsed = ParseOp(*op);
    if (!parsed) {
      const std::string names = absl::StrJoin(kOpNames, ", ", AppendView);
      return fail(FieldError(absl::StatusCode::kUnimplemented, "op",
                             StrCat("unknown op \"", Printable(*op), "\" (known: ", names, ")")));
    }
    out.request.op = *parsed;
    if (absl::Status s = DecodeBody(r, out.request, limits); !s.ok()) return fail(s);
    if (absl::Status s = r.NoOtherKeys(); !s.ok()) return fail(s);
    return out;
  } catch (const std::bad_alloc&) {
    return fail(FieldError(absl::StatusCode::kResourceExhausted, kPayloadField, "out of memory"));
  } catch (const std::exception& e) {
    return fail(Invalid(kPayloadField, StrCat("unreadable message: ", e.what())));
  }
}

std::string EncodeRequest(const Request& request) {
  Packer p;
  const size_t header = 2 + (request.id ? 1 : 0);
  auto head = [&](size_t fields) {
    p.Map(header + fields);
    p.Str("v");
    p.Uint(request.version);
    p.Str("op");
    p.Str(OpName(request.op));
    if (request.id) {
      p.Str("id");
      p.Uint(*request.id);
    }
  };
  auto action = [&](const Action& a) {
    p.Ndarray("int64", {a.values.size()}, a.values.data(), a.values.size() * sizeof(int64_t));
  };
  std::visit(
      [&](const auto& body) {
        using T = std::decay_t<decltype(body)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          head(0);
        } else if constexpr (std::is_same_v<T, MakeRequest>) {
          head(2);
          p.Str("env");
          p.Str(body.env);
          p.Str("config");
          p.Config(body.config);
        } else if constexpr (std::is_same_v<T, ResetRequest>) {
          head(1 + (body.seed ? 1 : 0) + (body.options.profile ? 1 : 0));
          p.Str("session");
          p.Str(body.session);
          if (body.seed) {
            p.Str("seed");
            p.Uint(*body.seed);
          }
          if (body.options.profile) {
            p.Str("options");
            p.Options(body.options);
          }
        } else if constexpr (std::is_same_v<T, StepRequest>) {
          head(2);
          p.Str("session");
          p.Str(body.session);
          p.Str("action");
          action(body.action);
        } else if constexpr (std::is_same_v<T, StepBatchRequest>) {
          const size_t n = body.sessions.size();
          const bool shm = body.shm_new || !body.shm_segment.empty();
          const bool signal = body.shm_signal && !body.shm_segment.empty();
          const bool requests = body.shm_requests && body.shm_new;
          head(3 + (body.reset.empty() ? 0 : 1) + (body.seeds.empty() ? 0 : 1) +
               (body.options.empty() ? 0 : 1) + (shm ? 1 : 0) + (signal ? 1 : 0) +
               (requests ? 1 : 0));
          p.Str("sessions");
          p.Array(n);
          for (const SessionId& s : body.sessions) p.Str(s);
          p.Str("actions");
          const size_t width = body.actions.empty() ? 0 : body.actions[0].values.size();
          bool rectangular = body.actions.size() == n;
          for (const Action& a : body.actions)
            rectangular = rectangular && a.values.size() == width;
          if (rectangular) {
            std::vector<int64_t> flat;
            flat.reserve(n * width);
            for (const Action& a : body.actions)
              flat.insert(flat.end(), a.values.begin(), a.values.end());
            p.Ndarray("int64", {n, width}, flat.data(), flat.size() * sizeof(int64_t));
          } else {
            p.Array(body.actions.size());
            for (const Action& a : body.actions) action(a);
          }
          if (!body.reset.empty()) {
            p.Str("reset");
            p.Ndarray("bool", {body.reset.size()}, body.reset.data(), body.reset.size());
          }
          if (!body.seeds.empty()) {
            p.Str("seeds");
            p.Array(body.seeds.size());
            for (const auto& s : body.seeds) p.OptionalUint(s);
          }
          if (!body.options.empty()) {
            p.Str("options");
            p.Array(body.options.size());
            for (const ResetOptions& o : body.options) p.Options(o);
          }
          p.Str("autoreset");
          p.Str(body.autoreset == Autoreset::kSameStep ? "same_step" : "none");
          if (shm) {
            p.Str("shm");
            if (body.shm_new) {
              p.Bool(true);
            } else {
              p.Str(body.shm_segment);
            }
          }
          if (signal) {
            p.Str("shm_signal");
            p.Bool(true);
          }
          if (requests) {
            p.Str("shm_requests");
            p.Bool(true);
          }
        } else if constexpr (std::is_same_v<T, EstimateRequest>) {
          head(2 + (!body.session.empty() ? 1 : 0) + (body.config ? 1 : 0));
          if (!body.session.empty()) {
            p.Str("session");
            p.Str(body.session);
          }
          if (body.config) {
            p.Str("config");
            p.Config(*body.config);
          }
          p.Str("profile");
          p.Str(body.profile);
          p.Str("placement");
          if (body.placement) {
            p.PlacementMap(*body.placement);
          } else {
            p.Str(body.placement_json);
          }
        } else if constexpr (std::is_same_v<T, CloseRequest>) {
          head(1);
          p.Str("session");
          p.Str(body.session);
        } else if constexpr (std::is_same_v<T, CoschedMakeRequest>) {
          head(1);
          p.Str("config");
          p.Config(body.config);
        } else if constexpr (std::is_same_v<T, CoschedResetRequest>) {
          head(1 + (body.seed ? 1 : 0));
          p.Str("session");
          p.Str(body.session);
          if (body.seed) {
            p.Str("seed");
            p.Uint(*body.seed);
          }
        } else if constexpr (std::is_same_v<T, CoschedStepRequest>) {
          head(2);
          p.Str("session");
          p.Str(body.session);
          p.Str("actions");
          p.Array(body.actions.size());
          for (const Action& a : body.actions) {
            if (a.values.empty()) {
              p.Nil();
            } else {
              action(a);
            }
          }
        }
      },
      request.body);
  return p.Take();
}

std::string EncodeReply(const Reply& reply) {
  Packer p;
  std::visit(ReplyPacker{p, reply.id}, reply.body);
  return p.Take();
}

absl::StatusOr<Reply> DecodeReply(std::string_view payload, Op op) {
  try {
    TG_ASSIGN_OR_RETURN(msgpack::object_handle oh, Unpack(payload, 1ull << 32));
    const object& root = oh.get();
    if (root.type != mtype::MAP) return Expected(kPayloadField, "a map", root);
    Reply reply;
    if (const object* id = Get(root, "id"); id != nullptr && id->type != mtype::NIL) {
      TG_ASSIGN_OR_RETURN(reply.id, ReadUint(*id, "id"));
    }
    TG_ASSIGN_OR_RETURN(uint64_t version, NeedUint(root, "v", ""));
    if (version != kVersion) {
      return Invalid(
          "v", StrCat("reply of protocol version ", version, "; this client speaks ", kVersion));
    }
    TG_ASSIGN_OR_RETURN(const object* ok, Need(root, "ok", ""));
    TG_ASSIGN_OR_RETURN(bool is_ok, ReadBool(*ok, "ok"));
    if (!is_ok) {
      TG_ASSIGN_OR_RETURN(const object* e, Need(root, "error", ""));
      Error error;
      TG_ASSIGN_OR_RETURN(std::string code, NeedString(*e, "code", "error"));
      error.code = ParseCodeName(code);
      TG_ASSIGN_OR_RETURN(error.field, NeedString(*e, "field", "error"));
      TG_ASSIGN_OR_RETURN(error.message, NeedString(*e, "message", "error"));
      reply.body = std::move(error);
      return reply;
    }
    TG_ASSIGN_OR_RETURN(reply.body, DecodeOk(root, op));
    return reply;
  } catch (const std::exception& e) {
    return Invalid(kPayloadField, StrCat("unreadable reply: ", e.what()));
  }
}

std::optional<uint64_t> PeekReplyId(std::string_view payload) {
  try {
    absl::StatusOr<msgpack::object_handle> oh = Unpack(payload, 1ull << 32);
    if (!oh.ok()) return std::nullopt;
    const object* id = Get(oh->get(), "id");
    if (id == nullptr || id->type != mtype::POSITIVE_INTEGER) return std::nullopt;
    return id->via.u64;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<Op> PeekRequestOp(std::string_view payload) {
  try {
    absl::StatusOr<msgpack::object_handle> oh = Unpack(payload, 1 << 16);
    if (!oh.ok()) return std::nullopt;
    const object* op = Get(oh->get(), "op");
    if (op == nullptr || op->type != mtype::STR) return std::nullopt;
    return ParseOp(AsView(*op));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace tiergym::env::protocol
