// What the protocol's codec is made of (internal to env/protocol): the msgpack primitives,
// the readers and writers of plain values, and the semantic ones that schema.json names in a
// field's `cpp` entry (actions, configurations, placements, spaces, a batch's columns). The
// generated codec (codec.cc, from schema.json by gen_protocol.py) calls them field by field;
// protocol.cc defines them and the envelope.
//
// Readers never throw: a value of the wrong kind is an InvalidArgument status on the field's
// path, its message starting with the path. Writers append to a Packer.
#ifndef TIERGYM_ENV_PROTOCOL_INTERNAL_CODEC_SUPPORT_H_
#define TIERGYM_ENV_PROTOCOL_INTERNAL_CODEC_SUPPORT_H_

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "env/protocol/protocol.h"
#include "msgpack.hpp"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym::env::protocol::internal {

using msgpack::object;
namespace mtype = msgpack::type;

// --- Errors and paths ------------------------------------------------------------------------

absl::Status Invalid(std::string_view field, std::string_view detail);
// "FIELD: expected WHAT, got KIND".
absl::Status Expected(std::string_view field, std::string_view what, const object& o);
std::string_view TypeName(const object& o);
inline std::string_view AsView(const object& o) { return {o.via.str.ptr, o.via.str.size}; }
inline std::string Member(std::string_view path, std::string_view key) {
  return MemberPath(path, key);
}
inline std::string Index(std::string_view path, size_t i) { return StrCat(path, "[", i, "]"); }

// Names (environment, profile) and configuration values: their longest. A list value's
// items are values each; the list as a whole holds at most kMaxListBytes (a pool of
// profile directories: a few thousand paths; tiergym.datasets' splits are hundreds).
inline constexpr size_t kMaxNameBytes = 256;
inline constexpr size_t kMaxValueBytes = 4096;
inline constexpr size_t kMaxListBytes = 256 * 1024;

// --- Plain values --------------------------------------------------------------------------

absl::StatusOr<uint64_t> ReadUint(const object& o, std::string_view field);
absl::StatusOr<int64_t> ReadInt64(const object& o, std::string_view field);
// An unsigned integer held as an int (spec's counts).
absl::StatusOr<int> ReadIntFromUint(const object& o, std::string_view field);
absl::StatusOr<double> ReadDouble(const object& o, std::string_view field);
absl::StatusOr<bool> ReadBool(const object& o, std::string_view field);
absl::StatusOr<std::string> ReadString(const object& o, std::string_view field);
// A string of at most kMaxNameBytes.
absl::StatusOr<std::string> ReadName(const object& o, std::string_view field);
// A session handle: a non-empty string of at most kMaxSessionIdBytes.
absl::StatusOr<SessionId> ReadSession(const object& o, std::string_view field);
absl::StatusOr<std::vector<std::string>> ReadStrings(const object& o, std::string_view field);
absl::StatusOr<std::vector<uint64_t>> ReadUints(const object& o, std::string_view field);
absl::StatusOr<ConfigText> ReadTextMap(const object& o, std::string_view field);
absl::StatusOr<std::map<std::string, uint64_t>> ReadCountMap(const object& o,
                                                             std::string_view field);
absl::StatusOr<absl::StatusCode> ReadCodeName(const object& o, std::string_view field);

// The members of one map (a request), looked up by key, with unknown keys refused at the end.
class MapReader {
 public:
  // `path` is the map's field path ("" for the message itself).
  MapReader(const object& o, std::string path) : o_(o), path_(std::move(path)) {}
  // A map whose keys are strings.
  absl::Status Check() const;
  // The member or nullptr (nil counts as absent). Marks the key as known.
  const object* Find(std::string_view key);
  // Whether the member is there and not nil (the key not marked).
  [[nodiscard]] bool Has(std::string_view key) const;
  // The member; InvalidArgument "PATH.KEY: required field is missing" when absent or nil.
  absl::StatusOr<const object*> Required(std::string_view key);
  [[nodiscard]] std::string Field(std::string_view key) const { return Member(path_, key); }
  absl::StatusOr<uint64_t> RequiredUint(std::string_view key);
  absl::StatusOr<std::string> RequiredString(std::string_view key);
  // Refuses the first key no Find() asked for.
  absl::Status NoOtherKeys() const;

 private:
  const object& o_;
  std::string path_;
  std::vector<std::string_view> known_;
};

// Replies: lenient about keys they do not know (newer servers may add some).
const object* Get(const object& map, std::string_view key);
// InvalidArgument "PATH.KEY: missing in the reply" when absent.
absl::StatusOr<const object*> Need(const object& map, std::string_view key, std::string_view path);

// One field of a map, read with `read` ((o, field) -> StatusOr of its value) into `into`:
// NeedMember when a reply must have it, OptionalMember when it may not (nil is read as a
// value), RequestMember for a request (absent or nil: nothing, or "required field is
// missing" when `required`). The *Into forms take a `read` that fills the struct itself
// ((o, field) -> Status). The field's path is Member(path, key) / r.Field(key).
template <typename Read, typename T>
absl::Status NeedMember(const object& o, std::string_view key, std::string_view path, Read read,
                        T& into) {
  TG_ASSIGN_OR_RETURN(const object* x, Need(o, key, path));
  TG_ASSIGN_OR_RETURN(into, read(*x, Member(path, key)));
  return absl::OkStatus();
}
template <typename Read, typename T>
absl::Status OptionalMember(const object& o, std::string_view key, std::string_view path, Read read,
                            T& into) {
  const object* x = Get(o, key);
  if (x == nullptr) return absl::OkStatus();
  TG_ASSIGN_OR_RETURN(into, read(*x, Member(path, key)));
  return absl::OkStatus();
}
template <typename Read>
absl::Status NeedMemberInto(const object& o, std::string_view key, std::string_view path,
                            Read read) {
  TG_ASSIGN_OR_RETURN(const object* x, Need(o, key, path));
  return read(*x, Member(path, key));
}
template <typename Read>
absl::Status OptionalMemberInto(const object& o, std::string_view key, std::string_view path,
                                Read read) {
  const object* x = Get(o, key);
  return x == nullptr ? absl::OkStatus() : read(*x, Member(path, key));
}
template <typename Read, typename T>
absl::Status RequestMember(MapReader& r, std::string_view key, bool required, Read read, T& into) {
  const object* x = r.Find(key);
  if (x == nullptr) {
    return required ? Invalid(r.Field(key), "required field is missing") : absl::OkStatus();
  }
  TG_ASSIGN_OR_RETURN(into, read(*x, r.Field(key)));
  return absl::OkStatus();
}
template <typename Read>
absl::Status RequestMemberInto(MapReader& r, std::string_view key, bool required, Read read) {
  const object* x = r.Find(key);
  if (x == nullptr) {
    return required ? Invalid(r.Field(key), "required field is missing") : absl::OkStatus();
  }
  return read(*x, r.Field(key));
}

// An array map {"dtype", "shape", "data"} as it arrived (data points into the payload).
struct DtypeInfo {
  std::string_view name;
  size_t itemsize;
  bool is_integer;
  bool is_signed;
};
struct NdarrayView {
  const DtypeInfo* dtype = nullptr;
  std::vector<uint64_t> shape;
  uint64_t size = 0;  // elements
  std::string_view data;
};
absl::StatusOr<NdarrayView> ReadNdarray(const object& o, std::string_view field);
// The elements of an integer (or bool) array as int64; errors name the element.
absl::StatusOr<std::vector<int64_t>> IntegersOf(const NdarrayView& a, std::string_view field);

// The elements of an array of `dtype` (another dtype is an error on `field`).
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
// An array map of `dtype` as a vector; `shape` (when given) gets its shape.
template <typename T>
absl::StatusOr<std::vector<T>> ReadArrayOf(const object& o, std::string_view field,
                                           std::string_view dtype,
                                           std::vector<uint64_t>* shape = nullptr) {
  TG_ASSIGN_OR_RETURN(NdarrayView a, ReadNdarray(o, field));
  if (shape != nullptr) *shape = a.shape;
  return NumbersOf<T>(a, dtype, field);
}
// A msgpack array of maps, each decoded by `decode` on its path ("field[i]").
template <typename T, typename Decode>
absl::StatusOr<std::vector<T>> ReadList(const object& o, std::string_view field, Decode decode) {
  if (o.type != mtype::ARRAY) return Expected(field, "an array", o);
  std::vector<T> out;
  out.reserve(o.via.array.size);
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    TG_ASSIGN_OR_RETURN(T item, decode(o.via.array.ptr[i], Index(field, i)));
    out.push_back(std::move(item));
  }
  return out;
}

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
  void Double(double v);
  void Bool(bool b) {
    if (b) {
      pk_.pack_true();
    } else {
      pk_.pack_false();
    }
  }
  void Nil() { pk_.pack_nil(); }
  // An array map of `dtype` and `shape` over `bytes` bytes at `data`.
  void Ndarray(std::string_view dtype, const std::vector<uint64_t>& shape, const void* data,
               size_t bytes);
  std::string Take() { return std::move(buf_.bytes); }

 private:
  StringStream buf_;
  msgpack::packer<StringStream> pk_;
};

inline void WriteStrings(Packer& p, const std::vector<std::string>& v) {
  p.Array(v.size());
  for (const std::string& s : v) p.Str(s);
}
inline void WriteUints(Packer& p, const std::vector<uint64_t>& v) {
  p.Array(v.size());
  for (uint64_t d : v) p.Uint(d);
}
void WriteTextMap(Packer& p, const ConfigText& v);
void WriteCountMap(Packer& p, const std::map<std::string, uint64_t>& v);
void WriteCodeName(Packer& p, absl::StatusCode code);
// A 1-dimensional array map of `dtype` holding `v`.
template <typename T>
void WriteArray(Packer& p, std::string_view dtype, const std::vector<T>& v) {
  p.Ndarray(dtype, {v.size()}, v.data(), v.size() * sizeof(T));
}

// --- Batch columns (step_batch replies): one value, or one row, per entry -----------------

// [n] values of `dtype`, get(info) each.
template <typename T, typename Get>
void WriteColumn(Packer& p, std::string_view dtype, const std::vector<const StepInfo*>& infos,
                 Get get) {
  std::vector<T> column(infos.size());
  for (size_t i = 0; i < infos.size(); ++i) column[i] = static_cast<T>(get(*infos[i]));
  p.Ndarray(dtype, {column.size()}, column.data(), column.size() * sizeof(T));
}
// [n, width] values of `dtype`, a row get(info) each.
template <typename T, typename Get>
void WriteRowsColumn(Packer& p, std::string_view dtype, const std::vector<const StepInfo*>& infos,
                     size_t width, Get get) {
  std::vector<T> column;
  column.reserve(infos.size() * width);
  for (const StepInfo* i : infos) {
    const auto& row = get(*i);
    column.insert(column.end(), row.begin(), row.end());
  }
  p.Ndarray(dtype, {infos.size(), width}, column.data(), column.size() * sizeof(T));
}
// The column `key` of the map `o` at `path`: one value per row into get(rows[i].info).
template <typename T, typename Get>
absl::Status ReadColumn(const object& o, std::string_view key, std::string_view dtype,
                        std::string_view path, std::vector<StepResult>& rows, Get get) {
  TG_ASSIGN_OR_RETURN(const object* x, Need(o, key, path));
  TG_ASSIGN_OR_RETURN(std::vector<T> v, ReadArrayOf<T>(*x, Member(path, key), dtype));
  if (v.size() != rows.size()) return Invalid(Member(path, key), "wrong number of rows");
  for (size_t i = 0; i < rows.size(); ++i) get(rows[i].info) = v[i];
  return absl::OkStatus();
}
// The same for a column of rows ([n, width]) into the vectors get(rows[i].info).
template <typename T, typename Get>
absl::Status ReadRowsColumn(const object& o, std::string_view key, std::string_view dtype,
                            std::string_view path, std::vector<StepResult>& rows, Get get) {
  TG_ASSIGN_OR_RETURN(const object* x, Need(o, key, path));
  std::vector<uint64_t> shape;
  TG_ASSIGN_OR_RETURN(std::vector<T> v, ReadArrayOf<T>(*x, Member(path, key), dtype, &shape));
  const size_t n = rows.size();
  if (shape.empty() || shape[0] != n) return Invalid(Member(path, key), "wrong number of rows");
  const size_t width = n == 0 ? 0 : v.size() / n;
  for (size_t i = 0; i < n; ++i) {
    get(rows[i].info)
        .assign(v.begin() + static_cast<std::ptrdiff_t>(i * width),
                v.begin() + static_cast<std::ptrdiff_t>((i + 1) * width));
  }
  return absl::OkStatus();
}
// A column of strings (a msgpack array) into get(rows[i].info).
template <typename Get>
absl::Status ReadStringColumn(const object& o, std::string_view key, std::string_view path,
                              std::vector<StepResult>& rows, Get get) {
  TG_ASSIGN_OR_RETURN(const object* x, Need(o, key, path));
  TG_ASSIGN_OR_RETURN(std::vector<std::string> v, ReadStrings(*x, Member(path, key)));
  if (v.size() != rows.size()) return Invalid(Member(path, key), "wrong number of rows");
  for (size_t i = 0; i < rows.size(); ++i) get(rows[i].info) = std::move(v[i]);
  return absl::OkStatus();
}

// --- Semantic readers and writers (schema.json names them) ---------------------------------

// Requests.
absl::StatusOr<ConfigMap> ReadConfig(const object& o, std::string_view field);
void WriteConfig(Packer& p, const ConfigMap& config);
absl::StatusOr<ResetOptions> ReadResetOptions(const object& o, std::string_view field);
void WriteResetOptions(Packer& p, const ResetOptions& options);
bool HasResetOptions(const ResetRequest& r);
// An action: an integer, an array of integers or a 0-/1-dimensional integer array.
absl::StatusOr<Action> ReadAction(const object& o, std::string_view field);
void WriteAction(Packer& p, const Action& action);
// A profile by name (at most kMaxNameBytes) or index (as its text).
absl::StatusOr<std::string> ReadProfileRef(const object& o, std::string_view field);
absl::Status ReadBatchSessions(const object& o, std::string_view field, StepBatchRequest& into,
                               const DecodeLimits& limits);
absl::Status ReadBatchActions(const object& o, std::string_view field, StepBatchRequest& into,
                              const DecodeLimits& limits);
void WriteBatchActions(Packer& p, const std::vector<Action>& actions);
absl::Status ReadBatchReset(const object& o, std::string_view field, StepBatchRequest& into,
                            const DecodeLimits& limits);
void WriteBoolArray(Packer& p, const std::vector<uint8_t>& v);
absl::Status ReadBatchSeeds(const object& o, std::string_view field, StepBatchRequest& into,
                            const DecodeLimits& limits);
void WriteBatchSeeds(Packer& p, const std::vector<std::optional<uint64_t>>& seeds);
absl::Status ReadBatchOptions(const object& o, std::string_view field, StepBatchRequest& into,
                              const DecodeLimits& limits);
void WriteBatchOptions(Packer& p, const std::vector<ResetOptions>& options);
absl::StatusOr<Autoreset> ReadAutoreset(const object& o, std::string_view field);
void WriteAutoreset(Packer& p, Autoreset mode);
absl::Status ReadShmTarget(const object& o, std::string_view field, StepBatchRequest& into,
                           const DecodeLimits& limits);
void WriteShmTarget(Packer& p, const StepBatchRequest& r);
bool HasShmTarget(const StepBatchRequest& r);
absl::Status ReadShmSignal(const object& o, std::string_view field, StepBatchRequest& into,
                           const DecodeLimits& limits);
bool HasShmSignal(const StepBatchRequest& r);
absl::Status ReadShmRequests(const object& o, std::string_view field, StepBatchRequest& into,
                             const DecodeLimits& limits);
bool HasShmRequests(const StepBatchRequest& r);
absl::Status ReadEstimateConfig(const object& o, std::string_view field, EstimateRequest& into,
                                const DecodeLimits& limits);
absl::Status ReadPlacementArg(const object& o, std::string_view field, EstimateRequest& into,
                              const DecodeLimits& limits);
void WritePlacementArg(Packer& p, const EstimateRequest& r);
absl::Status ReadTenantActions(const object& o, std::string_view field, CoschedStepRequest& into,
                               const DecodeLimits& limits);
absl::Status ReadTenantActions(const object& o, std::string_view field, StepRequest& into,
                               const DecodeLimits& limits);
// A step request's `action` is written unless it gives the tenants' `actions`.
bool HasSingleAction(const StepRequest& r);
void WriteTenantActions(Packer& p, const std::vector<Action>& actions);

// Replies.
absl::StatusOr<Space> ReadSpace(const object& o, std::string_view path);
void WriteSpace(Packer& p, const Space& s);
absl::Status ReadRegionBounds(const object& o, std::string_view field, EnvSpec& into);
void WriteRegionBounds(Packer& p, const EnvSpec& spec);
absl::StatusOr<std::vector<int>> ReadRefusedRegions(const object& o, std::string_view field);
void WriteRefusedRegions(Packer& p, const std::vector<int>& regions);
// The mask shaped as the protocol shapes it: [regions, columns] or flat.
void WriteActionMask(Packer& p, const StepInfo& info);
void PackRefusedColumn(Packer& p, const std::vector<const StepInfo*>& infos);
absl::Status ReadRefusedColumn(const object& o, std::string_view path,
                               std::vector<StepResult>& rows);
void PackMaskColumn(Packer& p, const std::vector<const StepInfo*>& infos);
absl::Status ReadMaskColumn(const object& o, std::string_view path, std::vector<StepResult>& rows);
// Requests through shared memory are offered only beside shared memory.
bool ShmRequestsOffered(const Limits& l);
bool ShmMade(const ShmReply& s);
bool ShmSignalled(const ShmReply& s);
bool ShmTakesRequests(const ShmReply& s);
bool HasBatchArrays(const StepBatchReply& r);
bool HasBatchFinals(const StepBatchReply& r);
void WriteBatchObs(Packer& p, const StepBatchReply& r);
void WriteBatchRewards(Packer& p, const StepBatchReply& r);
void WriteBatchTerminated(Packer& p, const StepBatchReply& r);
void WriteBatchTruncated(Packer& p, const StepBatchReply& r);
void WriteBatchWasReset(Packer& p, const StepBatchReply& r);
void WriteBatchInfo(Packer& p, const StepBatchReply& r);
void WriteBatchFinalObs(Packer& p, const StepBatchReply& r);
void WriteBatchFinalInfo(Packer& p, const StepBatchReply& r);

// --- What the generated codec defines (codec.cc) --------------------------------------------

// A reply's struct from its map at `path` ("" for the reply itself). StepBatchReply's
// decoder is hand-written (its columns).
template <typename T>
absl::StatusOr<T> DecodeStruct(const object& o, std::string_view path);
// The body of a request of `req.op` from the message's map (its fields found through `r`).
absl::Status DecodeRequestBody(MapReader& r, Request& req, const DecodeLimits& limits);
// A request's body of type T, decoded by `decode`, into req.body.
template <typename T>
absl::Status DecodeBodyAs(MapReader& r, Request& req, const DecodeLimits& limits,
                          absl::Status (*decode)(MapReader&, T&, const DecodeLimits&)) {
  T body;
  TG_RETURN_IF_ERROR(decode(r, body, limits));
  req.body = std::move(body);
  return absl::OkStatus();
}
// A reply's body of type T, from the reply's map.
template <typename T>
absl::StatusOr<ReplyBody> DecodeReplyAs(const object& o) {
  TG_ASSIGN_OR_RETURN(T body, DecodeStruct<T>(o, ""));
  return ReplyBody(std::move(body));
}
// The body of an ok reply to `op`.
absl::StatusOr<ReplyBody> DecodeOkBody(const object& o, Op op);
// The step infos of a batch column-wise (a step_batch reply's `info`), and back.
void WriteInfoColumns(Packer& p, const std::vector<const StepInfo*>& infos);
absl::Status ReadInfoColumns(const object& o, std::string_view path, std::vector<StepResult>& rows);

}  // namespace tiergym::env::protocol::internal

// CountFields(v) and WriteFields(p, v) of every struct (generated), and WriteStruct.
#include "env/protocol/internal/codec_fields.h"

#endif  // TIERGYM_ENV_PROTOCOL_INTERNAL_CODEC_SUPPORT_H_
