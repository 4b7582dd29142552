// The C++ codec against the protocol's one declaration, env/protocol/schema.json (from which
// env/PROTOCOL.md's field tables are generated; tests/python/test_protocol_schema.py holds
// the Python codec to it). Drift either way fails here: a field the schema declares that the
// decoder does not require or accept, a key the encoder writes that the schema does not
// declare, a type on the wire other than the declared one.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "env/protocol/protocol.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "msgpack.hpp"
#include "tests/env/msgpack_builder.h"
#include "traces/base/field_status.h"
#include "traces/base/json.h"

namespace tiergym::env::protocol {
namespace {

namespace mp = ::tiergym::testing::mp;
using ::testing::StartsWith;

struct Field {
  std::string name;
  std::set<std::string> wire;
  bool required = false;
  bool optional = false;  // replies: may be absent
  const json::Value* example = nullptr;
  std::vector<std::string> one_of = {};  // requests: of these fields, exactly one is given
};

const json::Value& Schema() {
  static const json::Value* schema = [] {
    absl::StatusOr<json::Value> v =
        json::ParseFile(std::string(TIERGYM_SOURCE_DIR) + "/env/protocol/schema.json");
    if (!v.ok()) {
      ADD_FAILURE() << v.status();
      return new json::Value();
    }
    return new json::Value(*std::move(v));
  }();
  return *schema;
}

std::vector<Field> FieldsOf(const json::Value* list) {
  std::vector<Field> out;
  if (list == nullptr) return out;
  for (const json::Value& f : list->array()) {
    Field field;
    field.name = f.Find("name")->string();
    for (const json::Value& w : f.Find("wire")->array()) field.wire.insert(w.string());
    if (const json::Value* r = f.Find("required")) field.required = r->bool_value();
    if (const json::Value* o = f.Find("optional")) field.optional = o->bool_value();
    field.example = f.Find("example");
    if (const json::Value* g = f.Find("one_of")) {
      for (const json::Value& name : g->array()) field.one_of.push_back(name.string());
    }
    out.push_back(std::move(field));
  }
  return out;
}

const json::Value& Operation(std::string_view op) {
  const json::Value* ops = Schema().Find("operations");
  const json::Value* o = ops == nullptr ? nullptr : ops->Find(op);
  if (o == nullptr) {
    ADD_FAILURE() << "schema.json declares no operation " << op;
    static const json::Value kEmpty;
    return kEmpty;
  }
  return *o;
}

// A JSON example as msgpack: integers as integers, other numbers as float64.
std::string Pack(const json::Value& v) {
  switch (v.type()) {
    case json::Value::Type::kNull:
      return mp::Nil();
    case json::Value::Type::kBool:
      return mp::B(v.bool_value());
    case json::Value::Type::kNumber:
      if (v.number() == static_cast<double>(static_cast<int64_t>(v.number()))) {
        return v.number() >= 0 ? mp::U(static_cast<uint64_t>(v.number()))
                               : mp::I(static_cast<int64_t>(v.number()));
      }
      return mp::F(v.number());
    case json::Value::Type::kString:
      return mp::S(v.string());
    case json::Value::Type::kArray: {
      std::vector<std::string> items;
      for (const json::Value& i : v.array()) items.push_back(Pack(i));
      return mp::Arr(items);
    }
    case json::Value::Type::kObject: {
      std::vector<std::pair<std::string, std::string>> members;
      for (const auto& [k, i] : v.object()) members.emplace_back(k, Pack(i));
      return mp::Map(members);
    }
  }
  return mp::Nil();
}

// A value of a msgpack kind the field does not take.
std::string WrongValue(const Field& f) {
  if (f.wire.count("bool") == 0) return mp::B(true);
  return mp::S("wrong");
}

// A request of `op` with its required fields (`add` given instead of the others of its
// one_of group), less `drop`, with `replace`'s value `value`.
std::string Request(std::string_view op, const std::vector<Field>& fields,
                    const std::string& drop = "", const std::string& add = "",
                    const std::string& replace = "", const std::string& value = "") {
  std::vector<std::string> instead;  // the fields `add` stands for
  for (const Field& f : fields) {
    if (f.name != add) continue;
    for (const std::string& other : f.one_of) {
      if (other != add) instead.push_back(other);
    }
  }
  std::vector<std::pair<std::string, std::string>> members;
  for (const Field& f : fields) {
    if (std::find(instead.begin(), instead.end(), f.name) != instead.end()) continue;
    if (f.name == replace) {
      members.emplace_back(f.name, value);
    } else if (f.required && f.name != drop) {
      members.emplace_back(f.name, Pack(*f.example));
    } else if (f.name == add) {
      members.emplace_back(f.name, Pack(*f.example));
    }
  }
  return mp::Req(op, members);
}

TEST(ProtocolSchemaTest, VersionOpsAndDtypesAreTheCodecs) {
  EXPECT_EQ(Schema().Find("version")->number(), static_cast<double>(kVersion));
  EXPECT_EQ(Schema().Find("env_id")->string(), kEnvId);
  const std::vector<json::Value>& ops = Schema().Find("ops")->array();
  ASSERT_EQ(ops.size(), static_cast<size_t>(kNumOps));
  for (int i = 0; i < kNumOps; ++i) {
    EXPECT_EQ(ops[i].string(), OpName(static_cast<Op>(i)));
    EXPECT_TRUE(Schema().Find("operations")->Find(ops[i].string()) != nullptr) << ops[i].string();
  }
  EXPECT_EQ(Schema().Find("operations")->object().size(), static_cast<size_t>(kNumOps));
  // Every declared dtype is one the codec reads, with the declared size: an action in it.
  for (const auto& [dtype, size] : Schema().Find("dtypes")->object()) {
    const std::string data(static_cast<size_t>(size.number()), '\0');
    DecodedRequest d =
        DecodeRequest(mp::Req("step", {{"session", mp::S("s")},
                                       {"action", mp::Map({{"dtype", mp::S(dtype)},
                                                           {"shape", mp::Arr({mp::U(1)})},
                                                           {"data", mp::Bin(data)}})}}));
    const bool integer = dtype.find("float") == std::string::npos;
    EXPECT_EQ(!d.error.has_value(), integer) << dtype << ": " << (d.error ? d.error->message : "");
    if (!integer) {
      EXPECT_EQ(d.error->field, "action.dtype") << dtype;
    }
  }
}

// Each operation's request: the declared required fields decode, each optional one is
// accepted, each required one is missed, each field refuses a type it is not declared with,
// and an undeclared key is refused; all on the field's own path.
TEST(ProtocolSchemaTest, RequestsDecodeAsDeclared) {
  for (int i = 0; i < kNumOps; ++i) {
    const std::string op(OpName(static_cast<Op>(i)));
    SCOPED_TRACE(op);
    const std::vector<Field> fields = FieldsOf(Operation(op).Find("request"));
    DecodedRequest d = DecodeRequest(Request(op, fields));
    ASSERT_FALSE(d.error) << d.error->field << ": " << d.error->message;
    EXPECT_EQ(d.request.op, static_cast<Op>(i));
    for (const Field& f : fields) {
      SCOPED_TRACE(f.name);
      ASSERT_NE(f.example, nullptr) << "schema.json: request fields need an example";
      if (f.required) {
        d = DecodeRequest(Request(op, fields, /*drop=*/f.name));
        ASSERT_TRUE(d.error) << "decoded without the required field";
        EXPECT_EQ(d.error->code, absl::StatusCode::kInvalidArgument);
        EXPECT_EQ(d.error->field, f.name);
        EXPECT_THAT(d.error->message, StartsWith(f.name + ": "));
      } else {
        d = DecodeRequest(Request(op, fields, "", /*add=*/f.name));
        EXPECT_FALSE(d.error) << d.error->field << ": " << d.error->message;
        if (!f.one_of.empty()) {  // with the field it stands for too: refused, on itself
          std::vector<Field> both = fields;
          for (Field& b : both) b.required = b.required || b.name == f.name;
          d = DecodeRequest(Request(op, both));
          ASSERT_TRUE(d.error) << "decoded with every field of its one_of group";
          EXPECT_EQ(d.error->field, f.name);
        }
        if (f.wire.count("nil")) {
          d = DecodeRequest(Request(op, fields, "", "", f.name, mp::Nil()));
          EXPECT_FALSE(d.error) << "nil refused: " << d.error->message;
        }
      }
      d = DecodeRequest(Request(op, fields, "", "", /*replace=*/f.name, WrongValue(f)));
      ASSERT_TRUE(d.error) << "a value of an undeclared type decoded";
      EXPECT_EQ(d.error->code, absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(d.error->field, StartsWith(f.name));
    }
    std::vector<Field> with_unknown = fields;
    with_unknown.push_back(Field{"zz_not_declared", {"uint"}, true, false, nullptr});
    static const json::Value kOne = *json::Parse("1", "one");
    with_unknown.back().example = &kOne;
    d = DecodeRequest(Request(op, with_unknown));
    ASSERT_TRUE(d.error);
    EXPECT_EQ(d.error->field, "zz_not_declared");
  }
  // The envelope: v and op required, id optional.
  for (const Field& f : FieldsOf(Schema().Find("request"))) {
    std::vector<std::pair<std::string, std::string>> members = {{"v", mp::U(kVersion)},
                                                                {"op", mp::S("hello")}};
    std::erase_if(members, [&](const auto& m) { return m.first == f.name; });
    if (!f.required) members.emplace_back(f.name, mp::U(7));
    DecodedRequest d = DecodeRequest(mp::Map(members));
    EXPECT_EQ(d.error.has_value(), f.required) << f.name;
    if (d.error) {
      EXPECT_EQ(d.error->field, f.name);
    }
  }
}

// --- Replies ---------------------------------------------------------------------------

std::string KindOf(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL:
      return "nil";
    case msgpack::type::BOOLEAN:
      return "bool";
    case msgpack::type::POSITIVE_INTEGER:
      return "uint";
    case msgpack::type::NEGATIVE_INTEGER:
      return "int";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      return "float";
    case msgpack::type::STR:
      return "str";
    case msgpack::type::BIN:
      return "bin";
    case msgpack::type::ARRAY:
      return "array";
    case msgpack::type::MAP:
      return "map";
    default:
      return "ext";
  }
}

std::map<std::string, const msgpack::object*> Members(const msgpack::object& o) {
  std::map<std::string, const msgpack::object*> out;
  if (o.type != msgpack::type::MAP) return out;
  for (uint32_t i = 0; i < o.via.map.size; ++i) {
    const msgpack::object_kv& kv = o.via.map.ptr[i];
    out[std::string(kv.key.via.str.ptr, kv.key.via.str.size)] = &kv.val;
  }
  return out;
}

// Whether `o` is a value of one of the `wire` kinds; nested maps are checked against their
// struct.
void ExpectMapMatches(const msgpack::object& o, const std::vector<Field>& fields,
                      const std::string& path);

void ExpectValueMatches(const msgpack::object& o, const Field& f, const std::string& path) {
  const std::string kind = KindOf(o);
  for (const std::string& w : f.wire) {
    if (w == kind) return;
    if (w.rfind("ndarray", 0) == 0 && kind == "map") {
      std::map<std::string, const msgpack::object*> m = Members(o);
      ASSERT_TRUE(m.count("dtype") && m.count("shape") && m.count("data")) << path;
      const std::string dtype(m["dtype"]->via.str.ptr, m["dtype"]->via.str.size);
      if (w == "ndarray" || w == "ndarray:" + dtype) return;
      ADD_FAILURE() << path << ": dtype " << dtype << ", declared " << w;
      return;
    }
    if (w.rfind("map:", 0) == 0 && kind == "map") {
      const json::Value* s = Schema().Find("structs")->Find(w.substr(4));
      ASSERT_NE(s, nullptr) << "schema.json: no struct " << w;
      ExpectMapMatches(o, FieldsOf(s), path);
      return;
    }
  }
  ADD_FAILURE() << path << ": a " << kind << " on the wire, declared as "
                << ::testing::PrintToString(f.wire);
}

void ExpectMapMatches(const msgpack::object& o, const std::vector<Field>& fields,
                      const std::string& path) {
  std::map<std::string, const msgpack::object*> members = Members(o);
  for (const auto& [key, value] : members) {
    auto f =
        std::find_if(fields.begin(), fields.end(), [&](const Field& x) { return x.name == key; });
    if (f == fields.end()) {
      ADD_FAILURE() << path << "." << key
                    << ": written by the encoder, not declared in schema.json";
      continue;
    }
    ExpectValueMatches(*value, *f, path + "." + key);
  }
  for (const Field& f : fields) {
    if (!f.optional && members.count(f.name) == 0) {
      ADD_FAILURE() << path << "." << f.name << ": declared in schema.json, not written";
    }
  }
}

StepResult SampleResult() {
  StepResult r;
  r.observation = {0.5f, 0.25f, 1.0f};
  r.reward = 0.125;
  r.info.profile = "minife";
  r.info.step = 3;
  r.info.tier_used_bytes = {4096, 8192};
  r.info.refused_regions = {1};
  r.info.action_mask = {1, 1, 1, 0};
  return r;
}

std::map<Op, ReplyBody> SampleReplies() {
  EnvSpec spec;
  spec.observation = Space{Space::kBox, {3}, 0, 1, 0};
  spec.action = Space{Space::kMultiDiscrete, {2}, 0, 1, 2};
  spec.tiers = {"ddr", "hbm"};
  spec.profiles = {"minife"};
  spec.num_regions = 2;
  spec.tier_capacity_bytes = {1 << 30, 1 << 20};
  spec.tier_migration_gbps = {2, 3};
  spec.tier_bandwidth_gbps = {90, 400};
  spec.region_bounds = {0, 4096, 4096, 8192};
  StepBatchReply batch{
      {SampleResult(), SampleResult()}, {0, 1}, {SampleResult(), SampleResult()}, std::nullopt};
  StatsReply stats;
  stats.ops = {{"step", 3}};
  CoschedTenant tenant;
  tenant.result = SampleResult();
  tenant.active = true;
  tenant.slowdown = {1, 1.25};
  tenant.bandwidth_gbps = {3, 4};
  tenant.interference_gbps = {0, 5};
  CoschedStepReply node;
  node.tenants = {tenant, tenant};
  node.step = 2;
  node.tier_used_bytes = {4096, 8192};
  node.tier_bandwidth_gbps = {6, 8};
  return {
      {Op::kHello, HelloReply{kVersion, "tiergym test", {kEnvId}, Limits{}}},
      {Op::kList, ListReply{{EnvDescription{kEnvId, "d", {ConfigKey{"steps", "100", "h"}}}}}},
      {Op::kMake, MakeReply{"0123456789abcdef0123456789abcdef", spec, {{"steps", "100"}}}},
      {Op::kReset, ResetReply{SampleResult()}},
      {Op::kStep, StepReply{SampleResult()}},
      {Op::kStepBatch, batch},
      {Op::kEstimate, EstimateReply{750, 1000, 0.25}},
      {Op::kClose, CloseReply{}},
      {Op::kStats, stats},
      {Op::kCoschedMake,
       CoschedMakeReply{
           "0123456789abcdef0123456789abcdef", spec, {"minife", "minife#2"}, {{"steps", "100"}}}},
      {Op::kCoschedReset, node},
      {Op::kCoschedStep, node},
      {Op::kFork, ForkReply{"fedcba9876543210fedcba9876543210"}},
  };
}

TEST(ProtocolSchemaTest, RepliesCarryExactlyTheDeclaredFields) {
  std::vector<Field> envelope = FieldsOf(Schema().Find("reply"));
  ASSERT_EQ(SampleReplies().size(), static_cast<size_t>(kNumOps)) << "a sample reply per op";
  for (const auto& [op, body] : SampleReplies()) {
    SCOPED_TRACE(OpName(op));
    const std::string payload = EncodeReply(Reply{7, body});
    msgpack::object_handle oh = msgpack::unpack(payload.data(), payload.size());
    std::vector<Field> fields = envelope;
    for (Field& f : FieldsOf(Operation(OpName(op)).Find("reply"))) fields.push_back(f);
    ExpectMapMatches(oh.get(), fields, std::string(OpName(op)));
    // A co-scheduling node's tenants: each a map of the declared struct.
    if (op == Op::kCoschedReset || op == Op::kCoschedStep) {
      const msgpack::object* tenants = Members(oh.get())["tenants"];
      ASSERT_NE(tenants, nullptr);
      ASSERT_EQ(tenants->via.array.size, 2u);
      for (uint32_t i = 0; i < tenants->via.array.size; ++i) {
        ExpectMapMatches(tenants->via.array.ptr[i],
                         FieldsOf(Schema().Find("structs")->Find("tenant")),
                         std::string(OpName(op)) + ".tenants[" + std::to_string(i) + "]");
      }
    }
    // What the schema declares, the C++ client reads: without any one of them the reply
    // does not decode.
    absl::StatusOr<Reply> decoded = DecodeReply(payload, op);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    for (const Field& f : fields) {
      if (f.optional || f.name == "id") continue;
      std::vector<std::pair<std::string, std::string>> members;
      for (uint32_t i = 0; i < oh.get().via.map.size; ++i) {
        const msgpack::object_kv& kv = oh.get().via.map.ptr[i];
        const std::string key(kv.key.via.str.ptr, kv.key.via.str.size);
        if (key == f.name) continue;
        msgpack::sbuffer buf;
        msgpack::pack(buf, kv.val);
        members.emplace_back(key, std::string(buf.data(), buf.size()));
      }
      EXPECT_FALSE(DecodeReply(mp::Map(members), op).ok())
          << f.name << ": declared in schema.json but the C++ client does not read it";
    }
  }
  // An error reply: the envelope (ok false) and the error struct.
  const std::string payload =
      EncodeReply(Reply{std::nullopt, MakeError(absl::StatusCode::kNotFound, "session", "gone")});
  msgpack::object_handle oh = msgpack::unpack(payload.data(), payload.size());
  envelope.push_back(Field{"error", {"map:error"}, false, false, nullptr});
  ExpectMapMatches(oh.get(), envelope, "error reply");
}

// The field of an error is the status's payload, whatever its message says.
TEST(ProtocolSchemaTest, AnErrorsFieldIsItsPayloadNotItsText) {
  const absl::Status s =
      WithField(absl::InvalidArgumentError("steps: looks like a field"), "config.num_regions");
  const Error e = ErrorFromStatus(s, "config");
  EXPECT_EQ(e.field, "config.num_regions");
  EXPECT_EQ(e.message, "config.num_regions: steps: looks like a field");
  EXPECT_EQ(ErrorFromStatus(absl::InvalidArgumentError("a: b"), "placement").field, "placement");
  EXPECT_EQ(ErrorField(NestField(InvalidFieldError("steps", "x"), "config")), "config.steps");
  EXPECT_EQ(ErrorField(NestField(InvalidFieldError("[2]", "x"), "actions")), "actions[2]");
}

}  // namespace
}  // namespace tiergym::env::protocol
