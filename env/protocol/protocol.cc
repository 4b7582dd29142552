// The protocol's envelope and entry points (protocol.h): requests decoded (the strict pass,
// the version and op, then the op's body by the generated codec) and encoded, replies
// encoded and decoded. The fields themselves are the generated codec's (codec.cc, from
// schema.json) and the semantic readers' (codec_support.cc).
#include "env/protocol/protocol.h"

#include <algorithm>
#include <limits>
#include <new>
#include <utility>

#include "absl/strings/str_join.h"
#include "env/protocol/internal/codec_support.h"
#include "traces/base/field_status.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym::env::protocol {
namespace {

using internal::DecodeRequestBody;
using internal::Expected;
using internal::Invalid;
using internal::MapReader;
using internal::object;
using internal::Packer;
using internal::ReadString;
using internal::ReadUint;
namespace mtype = msgpack::type;
using internal::AsView;
using internal::Index;
using internal::Member;
using internal::TypeName;

// absl::StrJoin's formatter for std::string_view (which this Abseil's AlphaNum does not take).
void AppendView(std::string* out, std::string_view s) { out->append(s); }

// The field travels as the status's payload; a status without one is about the payload.
Error ErrorFromFieldStatus(const absl::Status& status) {
  return MakeError(status.code(), ErrorField(status).value_or(kPayloadField),
                   std::string_view(status.message().data(), status.message().size()));
}

// --- Strict decoding: one pass over the whole message ------------------------------------
//
// What every request must satisfy whatever its op, checked on the unpacked msgpack tree
// before any field is read (a schema-driven codec can run the same pass): map keys are
// strings of at most kMaxKeyBytes, no key appears twice in one map, every string and key
// is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), and there
// are no ext values. Errors are INVALID_ARGUMENT naming the field's path ("config.steps",
// "actions[3]", "options.profile").

constexpr size_t kMaxKeyBytes = 64;

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

// The map header of a reply with `own` entries besides v, id and ok, and those three.
void Head(Packer& p, const std::optional<uint64_t>& id, size_t own, bool ok) {
  p.Map(3 + own);
  p.Str("v");
  p.Uint(kVersion);
  p.Str("id");
  if (id) {
    p.Uint(*id);
  } else {
    p.Nil();
  }
  p.Str("ok");
  p.Bool(ok);
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
    if (absl::Status s = DecodeRequestBody(r, out.request, limits); !s.ok()) return fail(s);
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
  std::visit(
      [&](const auto& body) {
        using T = std::decay_t<decltype(body)>;
        size_t fields = 0;
        if constexpr (!std::is_same_v<T, std::monostate>) fields = internal::CountFields(body);
        p.Map(2 + (request.id ? 1 : 0) + fields);
        p.Str("v");
        p.Uint(request.version);
        p.Str("op");
        p.Str(OpName(request.op));
        if (request.id) {
          p.Str("id");
          p.Uint(*request.id);
        }
        if constexpr (!std::is_same_v<T, std::monostate>) internal::WriteFields(p, body);
      },
      request.body);
  return p.Take();
}

std::string EncodeReply(const Reply& reply) {
  Packer p;
  std::visit(
      [&](const auto& body) {
        using T = std::decay_t<decltype(body)>;
        if constexpr (std::is_same_v<T, Error>) {
          Head(p, reply.id, 1, /*ok=*/false);
          p.Str("error");
          internal::WriteStruct(p, body);
        } else {
          Head(p, reply.id, internal::CountFields(body), /*ok=*/true);
          internal::WriteFields(p, body);
        }
      },
      reply.body);
  return p.Take();
}

absl::StatusOr<Reply> DecodeReply(std::string_view payload, Op op) {
  try {
    TG_ASSIGN_OR_RETURN(msgpack::object_handle oh, Unpack(payload, 1ull << 32));
    const object& root = oh.get();
    if (root.type != mtype::MAP) return Expected(kPayloadField, "a map", root);
    Reply reply;
    if (const object* id = internal::Get(root, "id"); id != nullptr && id->type != mtype::NIL) {
      TG_ASSIGN_OR_RETURN(reply.id, internal::ReadUint(*id, "id"));
    }
    TG_ASSIGN_OR_RETURN(const object* v, internal::Need(root, "v", ""));
    TG_ASSIGN_OR_RETURN(uint64_t version, internal::ReadUint(*v, "v"));
    if (version != kVersion) {
      return Invalid(
          "v", StrCat("reply of protocol version ", version, "; this client speaks ", kVersion));
    }
    TG_ASSIGN_OR_RETURN(const object* ok, internal::Need(root, "ok", ""));
    TG_ASSIGN_OR_RETURN(bool is_ok, internal::ReadBool(*ok, "ok"));
    if (!is_ok) {
      TG_ASSIGN_OR_RETURN(const object* e, internal::Need(root, "error", ""));
      TG_ASSIGN_OR_RETURN(reply.body, internal::DecodeStruct<Error>(*e, "error"));
      return reply;
    }
    TG_ASSIGN_OR_RETURN(reply.body, internal::DecodeOkBody(root, op));
    return reply;
  } catch (const std::exception& e) {
    return Invalid(kPayloadField, StrCat("unreadable reply: ", e.what()));
  }
}

std::optional<uint64_t> PeekReplyId(std::string_view payload) {
  try {
    absl::StatusOr<msgpack::object_handle> oh = Unpack(payload, 1ull << 32);
    if (!oh.ok()) return std::nullopt;
    const object* id = internal::Get(oh->get(), "id");
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
    const object* op = internal::Get(oh->get(), "op");
    if (op == nullptr || op->type != mtype::STR) return std::nullopt;
    return ParseOp(AsView(*op));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace tiergym::env::protocol
