#include "env/server/service.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_join.h"
#include "env/spec/action_check.h"
#include "traces/base/field_status.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"
#include "traces/placement.h"

namespace tiergym::env {

using protocol::Error;
using protocol::MakeError;
using protocol::ReplyBody;

namespace {

// A provider's error about the configuration, on its field (env_provider.h).
Error ConfigError(const absl::Status& status) {
  return protocol::ErrorFromStatus(ConfigFieldError(status), "config");
}

Error FieldOf(const absl::Status& status, const std::string& field) {
  return protocol::ErrorFromStatus(status, field);
}

// Where an environment's step error belongs: the part of the action it names ("action[3]"
// becomes action_field + "[3]"), else the action (InvalidArgument) or the session.
Error StepError(const absl::Status& status, const std::string& session_field,
                const std::string& action_field) {
  const std::optional<std::string> field = ErrorField(status);
  if (field && field->rfind("action", 0) == 0) {
    return protocol::ErrorFromStatus(WithField(status, action_field + field->substr(6)), "");
  }
  return protocol::ErrorFromStatus(
      status, status.code() == absl::StatusCode::kInvalidArgument ? action_field : session_field);
}

Error NoEpisode(const std::string& field) {
  return MakeError(absl::StatusCode::kFailedPrecondition, field,
                   "the session has no episode running: call reset first (the last episode "
                   "ended, or none began)");
}

uint64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

bool SameShape(const EnvSpec& a, const EnvSpec& b) {
  return a.observation.shape == b.observation.shape && a.action.kind == b.action.kind &&
         a.action.shape == b.action.shape && a.action.n == b.action.n &&
         a.tiers.size() == b.tiers.size() && a.num_regions == b.num_regions;
}

// "3" -> the profile at index 3 when there is one; anything else unchanged.
std::string ProfileName(const std::string& profile, const EnvSpec& spec) {
  if (profile.empty() || !std::all_of(profile.begin(), profile.end(), ::isdigit)) return profile;
  const size_t i = std::stoull(profile.size() > 9 ? "999999999" : profile);
  return i < spec.profiles.size() ? spec.profiles[i] : profile;
}

protocol::CoschedStepReply NodeReply(NodeStep&& step) {
  protocol::CoschedStepReply r;
  r.tenants.reserve(step.tenants.size());
  for (TenantStep& t : step.tenants) {
    protocol::CoschedTenant tenant;
    tenant.result.observation = std::move(t.observation);
    tenant.result.reward = t.reward;
    tenant.result.terminated = t.terminated;
    tenant.result.info = std::move(t.info);
    tenant.active = t.active;
    tenant.waiting = t.waiting;
    tenant.solo_interval_ns = t.solo_interval_ns;
    tenant.slowdown = std::move(t.slowdown);
    tenant.bandwidth_gbps = std::move(t.bandwidth_gbps);
    tenant.interference_gbps = std::move(t.interference_gbps);
    r.tenants.push_back(std::move(tenant));
  }
  r.step = step.step;
  r.step_ns = step.step_ns;
  r.elapsed_ns = step.elapsed_ns;
  r.tier_used_bytes = std::move(step.tier_used_bytes);
  r.tier_bandwidth_gbps = std::move(step.tier_bandwidth_gbps);
  r.done = step.done;
  return r;
}

}  // namespace

Service::Service(ServiceOptions options, std::shared_ptr<EnvProvider> provider, ThreadPool* pool)
    : options_(std::move(options)),
      provider_(std::move(provider)),
      pool_(pool),
      start_(options_.clock ? options_.clock() : std::chrono::steady_clock::now()),
      sessions_(SessionTableOptions{options_.max_sessions, options_.max_sessions_per_connection,
                                    options_.idle_timeout_s, options_.clock}),
      stepper_(pool),
      shm_(ShmTransportOptions{options_.max_shm_bytes, options_.max_shm_segments_per_connection,
                               options_.max_shm_request_threads},
           provider_.get(), pool,
           [this](const protocol::StepBatchRequest& r, const std::string& owner, size_t max_helpers,
                  const std::vector<size_t>* lock_order) {
             return StepBatch(r, owner, max_helpers, lock_order);
           }) {
  sessions_.OnErased(
      [this](const std::vector<protocol::SessionId>& ids) { shm_.SessionsErased(ids); });
}

Service::~Service() = default;

std::chrono::steady_clock::time_point Service::Now() const {
  return options_.clock ? options_.clock() : std::chrono::steady_clock::now();
}

std::string Service::Handle(std::string_view payload, std::string_view owner_view) {
  const std::string owner(owner_view);
  requests_.fetch_add(1, std::memory_order_relaxed);
  protocol::Reply reply;
  try {
    if (payload.size() > options_.max_message_bytes) {
      reply.body = MakeError(absl::StatusCode::kResourceExhausted, protocol::kPayloadField,
                             StrCat("message of ", payload.size(), " bytes, over the limit of ",
                                    options_.max_message_bytes, " (--max-message-bytes)"));
    } else {
      protocol::DecodeLimits limits;
      limits.max_batch = options_.max_batch;
      protocol::DecodedRequest d = protocol::DecodeRequest(payload, limits);
      reply.id = d.request.id;
      if (d.error) {
        reply.body = std::move(*d.error);
      } else {
        ops_[static_cast<int>(d.request.op)].fetch_add(1, std::memory_order_relaxed);
        if (d.request.version != protocol::kVersion && d.request.op != protocol::Op::kHello) {
          reply.body =
              MakeError(absl::StatusCode::kFailedPrecondition, "v",
                        StrCat("protocol version ", d.request.version,
                               " is not supported; this server speaks ", protocol::kVersion));
        } else {
          reply.body = Dispatch(d.request, owner);
        }
      }
    }
  } catch (const std::bad_alloc&) {
    reply.body = MakeError(absl::StatusCode::kResourceExhausted, protocol::kPayloadField,
                           "the server ran out of memory serving this request");
  } catch (const std::exception& e) {
    reply.body = MakeError(absl::StatusCode::kInternal, protocol::kPayloadField,
                           StrCat("unexpected exception: ", e.what()));
  }
  if (std::holds_alternative<Error>(reply.body)) errors_.fetch_add(1, std::memory_order_relaxed);
  if (const auto* batch = std::get_if<protocol::StepBatchReply>(&reply.body);
      batch != nullptr && batch->quiet) {
    return {};  // the segment's seq word told the client (shm_signal)
  }
  try {
    return protocol::EncodeReply(reply);
  } catch (const std::exception& e) {
    return protocol::EncodeReply(protocol::Reply{
        reply.id, MakeError(absl::StatusCode::kResourceExhausted, protocol::kPayloadField,
                            StrCat("the reply could not be encoded: ", e.what()))});
  }
}

ReplyBody Service::Dispatch(const protocol::Request& request, const std::string& owner) {
  using protocol::Op;
  switch (request.op) {
    case Op::kHello:
      return Hello();
    case Op::kList:
      return List();
    case Op::kMake:
      return Make(std::get<protocol::MakeRequest>(request.body), owner);
    case Op::kReset:
      return Reset(std::get<protocol::ResetRequest>(request.body), owner);
    case Op::kStep:
      return Step(std::get<protocol::StepRequest>(request.body), owner);
    case Op::kStepBatch:
      return StepBatch(std::get<protocol::StepBatchRequest>(request.body), owner);
    case Op::kEstimate:
      return Estimate(std::get<protocol::EstimateRequest>(request.body), owner);
    case Op::kClose:
      return Close(std::get<protocol::CloseRequest>(request.body), owner);
    case Op::kStats:
      return Stats();
    case Op::kCoschedMake:
      return CoschedMake(std::get<protocol::CoschedMakeRequest>(request.body), owner);
    case Op::kCoschedReset: {  // the older spelling of reset on a node
      const auto& r = std::get<protocol::CoschedResetRequest>(request.body);
      return Reset(protocol::ResetRequest{r.session, r.seed, {}}, owner, Kind::kNode);
    }
    case Op::kCoschedStep: {  // the older spelling of step with actions
      const auto& r = std::get<protocol::CoschedStepRequest>(request.body);
      return Step(protocol::StepRequest{r.session, {}, r.actions}, owner, Kind::kNode);
    }
    case Op::kFork:
      return Fork(std::get<protocol::ForkRequest>(request.body), owner);
  }
  return MakeError(absl::StatusCode::kInternal, "op", "unhandled op");
}

ReplyBody Service::Hello() const {
  protocol::HelloReply r;
  r.server = options_.server_name;
  r.envs = {protocol::kEnvId};
  if (options_.cosched != nullptr) r.envs.emplace_back(protocol::kCoschedEnvId);
  r.limits.max_sessions = options_.max_sessions;
  r.limits.max_sessions_per_connection = options_.max_sessions_per_connection;
  r.limits.max_pending_per_connection = options_.max_pending_per_connection;
  r.limits.max_asset_bytes = options_.max_asset_bytes;
  r.limits.max_message_bytes = options_.max_message_bytes;
  r.limits.max_batch = options_.max_batch;
  r.limits.idle_timeout_s = options_.idle_timeout_s;
  r.limits.threads = pool_ == nullptr ? 1 : pool_->size();
  r.limits.max_shm_bytes = options_.max_shm_bytes;
  r.limits.max_shm_request_threads = options_.max_shm_request_threads;
  return r;
}

ReplyBody Service::List() const {
  protocol::ListReply r{{protocol::EnvDescription{protocol::kEnvId, provider_->Description(),
                                                  provider_->ConfigKeys(), "make"}}};
  if (options_.cosched != nullptr) {
    r.envs.push_back(protocol::EnvDescription{protocol::kCoschedEnvId,
                                              options_.cosched->Description(),
                                              options_.cosched->ConfigKeys(), "make"});
  }
  return r;
}

EnvProvider* Service::ProviderOf(std::string_view env) const {
  if (env == protocol::kEnvId) return provider_.get();
  if (env == protocol::kCoschedEnvId) return options_.cosched.get();
  return nullptr;
}

absl::StatusOr<Service::Lease> Service::Acquire(const protocol::SessionId& id,
                                                const std::string& owner, std::string_view field,
                                                Kind kind) const {
  TG_ASSIGN_OR_RETURN(Lease lease, sessions_.Acquire(id, owner, field));
  const bool node = !lease->env->tenants().empty();
  if (kind == Kind::kNode && !node) {
    return absl::FailedPreconditionError(
        StrCat(field,
               ": not a co-scheduling node's session (made by make of tiergym/TierPlacement-v0: "
               "drive it with reset, step and step_batch)"));
  }
  if (kind == Kind::kSingle && node) {
    return absl::FailedPreconditionError(
        StrCat(field,
               ": a co-scheduling node's session (drive it with reset, and step with actions, one "
               "per tenant)"));
  }
  return lease;
}

absl::StatusOr<std::shared_ptr<SessionTable::Session>> Service::MakeSession(
    EnvProvider& provider, const protocol::ConfigMap& config, const std::string& owner) {
  TG_RETURN_IF_ERROR(CheckKnownConfigKeys(config, provider.ConfigKeys()));
  if (absl::Status s = sessions_.Reserve(owner); !s.ok()) return WithField(s, "op");
  absl::StatusOr<std::unique_ptr<SessionEnv>> env = provider.Make(config);
  if (!env.ok()) {
    sessions_.Unreserve();
    return ConfigFieldError(env.status());
  }
  std::map<std::string, std::string> in_force =
      ConfigInForce(provider.ConfigKeys(), config, (*env)->spec());
  return sessions_.Add(owner, *std::move(env), std::move(in_force));
}

ReplyBody Service::Make(const protocol::MakeRequest& r, const std::string& owner) {
  EnvProvider* provider = ProviderOf(r.env);
  if (provider == nullptr) {
    return MakeError(
        absl::StatusCode::kNotFound, "env",
        StrCat("unknown environment \"", protocol::Printable(r.env),
               "\" (served: ", protocol::kEnvId,
               options_.cosched != nullptr ? StrCat(", ", protocol::kCoschedEnvId) : "", ")"));
  }
  absl::StatusOr<std::shared_ptr<SessionTable::Session>> made =
      MakeSession(*provider, r.config, owner);
  if (!made.ok()) return FieldOf(made.status(), "config");
  const SessionTable::Session& s = **made;
  return protocol::MakeReply{s.id, s.env->spec(), s.config, s.env->tenants()};
}

ReplyBody Service::CoschedMake(const protocol::CoschedMakeRequest& r, const std::string& owner) {
  if (options_.cosched == nullptr) {
    return MakeError(absl::StatusCode::kUnimplemented, "op",
                     "this server serves no co-scheduling nodes");
  }
  absl::StatusOr<std::shared_ptr<SessionTable::Session>> made =
      MakeSession(*options_.cosched, r.config, owner);
  if (!made.ok()) return FieldOf(made.status(), "config");
  const SessionTable::Session& s = **made;
  return protocol::CoschedMakeReply{s.id, s.env->spec(), s.env->tenants(), s.config};
}

ReplyBody Service::Reset(const protocol::ResetRequest& r, const std::string& owner, Kind kind) {
  absl::StatusOr<Lease> lease = Acquire(r.session, owner, "session", kind);
  if (!lease.ok()) return FieldOf(lease.status(), "session");
  SessionTable::Session& s = **lease;
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.env->tenants().empty()) {  // a node
    absl::StatusOr<NodeStep> result = s.env->ResetNode(r.seed);
    if (!result.ok()) {
      s.in_episode = false;
      return FieldOf(result.status(), "session");
    }
    s.in_episode = !result->done;
    return NodeReply(*std::move(result));
  }
  absl::StatusOr<StepResult> result = s.env->Reset(r.seed, r.options);
  if (!result.ok()) {
    s.in_episode = false;
    return FieldOf(result.status(), r.options.profile ? "options.profile" : "session");
  }
  s.in_episode = !(result->terminated || result->truncated);
  return protocol::ResetReply{std::move(*result)};
}

ReplyBody Service::Step(const protocol::StepRequest& r, const std::string& owner, Kind kind) {
  absl::StatusOr<Lease> lease = Acquire(r.session, owner, "session", kind);
  if (!lease.ok()) return FieldOf(lease.status(), "session");
  SessionTable::Session& s = **lease;
  const bool node = !s.env->tenants().empty();
  // A node's step gives the tenants' actions (cosched_step: whatever it gives).
  if (node != (kind == Kind::kNode || !r.actions.empty())) {
    return node ? MakeError(absl::StatusCode::kFailedPrecondition, "action",
                            "a co-scheduling node's session takes actions, one per tenant")
                : MakeError(absl::StatusCode::kFailedPrecondition, "actions",
                            "a single environment's session takes action, not actions");
  }
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.in_episode) return NoEpisode("session");
  if (node) {
    // The node checks every action (count, ranges) before anything moves.
    absl::StatusOr<NodeStep> result = s.env->StepNode(r.actions);
    if (!result.ok()) {
      return FieldOf(result.status(), result.status().code() == absl::StatusCode::kInvalidArgument
                                          ? "actions"
                                          : "session");
    }
    if (result->done) s.in_episode = false;
    return NodeReply(*std::move(result));
  }
  // The environment checks the action (env/spec/action_check.h) before anything moves.
  absl::StatusOr<StepResult> result = s.env->Step(r.action);
  if (!result.ok()) return StepError(result.status(), "session", "action");
  if (result->terminated || result->truncated) s.in_episode = false;
  return protocol::StepReply{std::move(*result)};
}

absl::StatusOr<std::vector<Service::Lease>> Service::LeaseBatch(const protocol::StepBatchRequest& r,
                                                                const std::string& owner,
                                                                bool distinct) const {
  const size_t n = r.sessions.size();
  std::vector<Lease> leases;
  leases.reserve(n);
  std::unordered_map<std::string_view, size_t> seen;
  if (!distinct) seen.reserve(n);
  // The field an error names is spelled out only on an error (Acquire and CheckAction change
  // nothing when they fail: called again, they fail the same way, with its name).
  for (size_t i = 0; i < n; ++i) {
    auto [it, inserted] = distinct ? std::pair{seen.end(), true} : seen.emplace(r.sessions[i], i);
    if (!inserted) {
      return InvalidFieldError(StrCat("sessions[", i, "]"),
                               StrCat("the same session as sessions[", it->second, "]"));
    }
    absl::StatusOr<Lease> lease = Acquire(r.sessions[i], owner, {}, Kind::kSingle);
    if (!lease.ok()) {
      const std::string field = StrCat("sessions[", i, "]");
      return WithField(Acquire(r.sessions[i], owner, field, Kind::kSingle).status(), field);
    }
    leases.push_back(std::move(*lease));
  }
  return leases;
}

absl::Status Service::CheckBatch(const std::vector<Lease>& leases) const {
  const EnvSpec& spec0 = leases[0]->env->spec();
  for (size_t i = 1; i < leases.size(); ++i) {
    if (!SameShape(leases[i]->env->spec(), spec0)) {
      return InvalidFieldError(StrCat("sessions[", i, "]"),
                               "its spaces differ from those of sessions[0]; a batch holds "
                               "sessions of one configuration");
    }
  }
  return absl::OkStatus();
}

ReplyBody Service::StepBatch(const protocol::StepBatchRequest& r, const std::string& owner,
                             size_t max_helpers, const std::vector<size_t>* lock_order) {
  // 1. The sessions, each once (known when the lock order is given: a segment's), of one
  // shape (the reply's arrays are rectangular).
  absl::StatusOr<std::vector<Lease>> leases = LeaseBatch(r, owner, lock_order != nullptr);
  if (!leases.ok()) return FieldOf(leases.status(), "sessions");
  if (absl::Status s = CheckBatch(*leases); !s.ok()) return FieldOf(s, "sessions");
  // 2. Lock every session, in id order (so that concurrent batches cannot deadlock).
  std::vector<size_t> sorted;
  if (lock_order == nullptr) {
    sorted.resize(r.sessions.size());
    for (size_t i = 0; i < sorted.size(); ++i) sorted[i] = i;
    std::sort(sorted.begin(), sorted.end(),
              [&](size_t a, size_t b) { return r.sessions[a] < r.sessions[b]; });
    lock_order = &sorted;
  }
  std::vector<std::unique_lock<std::mutex>> locks;
  locks.reserve(sorted.size() + r.sessions.size());
  for (size_t i : *lock_order) locks.emplace_back((*leases)[i]->mu);
  // 3. Check every entry before anything moves.
  const EnvSpec& spec0 = (*leases)[0]->env->spec();
  for (size_t i = 0; i < r.sessions.size(); ++i) {
    if (!r.reset.empty() && r.reset[i] != 0) continue;
    if (!(*leases)[i]->in_episode) return NoEpisode(StrCat("sessions[", i, "]"));
    if (!CheckAction(spec0, r.actions[i], {}).ok()) {
      const std::string field = StrCat("actions[", i, "]");
      return FieldOf(CheckAction(spec0, r.actions[i], field), field);
    }
  }
  // 4. Step, into the reply or a segment.
  return RunBatch(r, owner, *leases, max_helpers);
}

ReplyBody Service::RunBatch(const protocol::StepBatchRequest& r, const std::string& owner,
                            std::vector<Lease>& leases, size_t max_helpers) {
  const size_t n = leases.size();
  std::vector<BatchStepper::Entry> entries(n);
  std::vector<const EnvSpec*> specs(n);
  for (size_t i = 0; i < n; ++i) {
    entries[i] = {leases[i]->env.get(), &leases[i]->in_episode};
    specs[i] = &leases[i]->env->spec();
  }
  // The shared-memory segment the results go to, if asked for: before anything moves, so
  // that a refusal moves nothing.
  std::shared_ptr<ShmTransport::Segment> segment;
  const bool made = r.shm_new;
  if (r.shm_new || !r.shm_segment.empty()) {
    absl::StatusOr<std::shared_ptr<ShmTransport::Segment>> got =
        made ? shm_.Make(
                   r.sessions, owner, *specs[0], r.shm_requests,
                   [&](const protocol::SessionId& id) { return sessions_.Contains(id, owner); })
             : shm_.Find(r.shm_segment, owner, *specs[0], n);
    if (!got.ok()) return FieldOf(got.status(), "shm");
    segment = *std::move(got);
  }
  std::optional<ReplySink> reply;
  if (segment == nullptr || made) reply.emplace(n);
  std::unique_lock<std::mutex> segment_lock;
  std::unique_ptr<ResultSink> segment_sink;
  if (segment != nullptr) {
    segment_lock = shm_.Lock(*segment);
    segment_sink = shm_.Sink(*segment, reply ? &*reply : nullptr, std::move(specs));
  }
  ResultSink& sink = segment_sink ? *segment_sink : static_cast<ResultSink&>(*reply);
  const std::vector<absl::Status> errors = stepper_.Run(r, entries, sink, max_helpers);
  for (size_t i = 0; i < n; ++i) {
    if (errors[i].ok()) continue;
    if (!r.reset.empty() && r.reset[i] != 0) return FieldOf(errors[i], StrCat("sessions[", i, "]"));
    return StepError(errors[i], StrCat("sessions[", i, "]"), StrCat("actions[", i, "]"));
  }
  protocol::StepBatchReply out = reply ? reply->Take() : protocol::StepBatchReply{};
  if (segment == nullptr) return out;
  return shm_.Publish(*segment, *segment_sink, made, r.shm_signal, std::move(out));
}

ReplyBody Service::Estimate(const protocol::EstimateRequest& r, const std::string& owner) {
  absl::StatusOr<Placement> placement;
  if (r.placement) {
    placement = *r.placement;
    if (absl::Status s = CheckPlacement(*placement); !s.ok()) {
      return FieldOf(NestField(s, "placement"), "placement");
    }
  } else {
    placement = ParsePlacement(r.placement_json, "placement");
    if (!placement.ok()) return FieldOf(placement.status(), "placement");
  }

  // provider_ made every single environment (a session's or this request's): an index the
  // estimate builds is charged to its memory budget.
  auto estimate = [&](const SessionEnv& env) -> ReplyBody {
    const std::string profile = ProfileName(r.profile, env.spec());
    absl::StatusOr<double> runtime = env.EstimatePlacementNs(profile, *placement, provider_.get());
    if (!runtime.ok()) {
      return FieldOf(runtime.status(), runtime.status().code() == absl::StatusCode::kNotFound
                                           ? "profile"
                                           : "placement");
    }
    Placement all_default;
    all_default.default_tier = env.spec().tiers.empty() ? "" : env.spec().tiers[0];
    absl::StatusOr<double> base = env.EstimatePlacementNs(profile, all_default, provider_.get());
    if (!base.ok()) return FieldOf(base.status(), "profile");
    return protocol::EstimateReply{*runtime, *base, *base > 0 ? 1 - *runtime / *base : 0};
  };

  if (!r.session.empty()) {
    absl::StatusOr<Lease> lease = Acquire(r.session, owner, "session", Kind::kSingle);
    if (!lease.ok()) return FieldOf(lease.status(), "session");
    std::lock_guard<std::mutex> lock((*lease)->mu);
    return estimate(*(*lease)->env);
  }
  const protocol::ConfigMap config = r.config.value_or(protocol::ConfigMap{});
  if (absl::Status s = CheckKnownConfigKeys(config, provider_->ConfigKeys()); !s.ok()) {
    return protocol::ErrorFromStatus(s, "config");
  }
  absl::StatusOr<std::unique_ptr<SessionEnv>> env = provider_->Make(config);
  if (!env.ok()) return ConfigError(env.status());
  return estimate(**env);
}

ReplyBody Service::Close(const protocol::CloseRequest& r, const std::string& owner) {
  if (absl::Status s = sessions_.Close(r.session, owner); !s.ok()) return FieldOf(s, "session");
  return protocol::CloseReply{};
}

ReplyBody Service::Fork(const protocol::ForkRequest& r, const std::string& owner) {
  absl::StatusOr<Lease> lease = Acquire(r.session, owner, "session", Kind::kSingle);
  if (!lease.ok()) {
    if (lease.status().code() == absl::StatusCode::kFailedPrecondition) {  // a node
      return MakeError(absl::StatusCode::kUnimplemented, "session",
                       "a co-scheduling node cannot be forked (sessions made by make of "
                       "tiergym/TierPlacement-v0, and their forks, can)");
    }
    return FieldOf(lease.status(), "session");
  }
  if (absl::Status s = sessions_.Reserve(owner, "fork"); !s.ok()) return FieldOf(s, "op");
  const SessionTable::Session& from = **lease;
  absl::StatusOr<std::unique_ptr<SessionEnv>> env;
  bool in_episode = false;
  {
    std::lock_guard<std::mutex> lock((*lease)->mu);
    env = from.env->Fork(provider_.get());  // charged to the budget as a session
    in_episode = from.in_episode;
  }
  if (!env.ok()) {
    sessions_.Unreserve();
    if (env.status().code() == absl::StatusCode::kResourceExhausted) {
      return MakeError(absl::StatusCode::kResourceExhausted, "op",
                       StrCat("fork refused: ", env.status().message()));
    }
    return FieldOf(env.status(), "session");
  }
  const std::shared_ptr<SessionTable::Session> made =
      sessions_.Add(owner, *std::move(env), from.config);
  {
    std::lock_guard<std::mutex> lock(made->mu);
    made->in_episode = in_episode;
  }
  return protocol::ForkReply{made->id};
}

size_t Service::CloseSessionsOf(std::string_view owner) { return sessions_.CloseOwnedBy(owner); }

size_t Service::ReclaimIdle() {
  const size_t reclaimed = sessions_.ReclaimIdle();
  provider_->Trim();  // assets the reclaimed sessions held may be unused now
  if (options_.cosched != nullptr) options_.cosched->Trim();
  return reclaimed;
}

protocol::StatsReply Service::Stats() const {
  protocol::StatsReply r;
  r.sessions = sessions_.size();
  r.shm_segments = shm_.segments();
  r.sessions_made = sessions_.made();
  r.sessions_closed = sessions_.closed();
  r.sessions_reclaimed = sessions_.reclaimed();
  const EnvProvider::Stats ps = provider_->GetStats();
  r.asset_sets = ps.asset_sets;
  r.asset_bytes = ps.asset_bytes;
  // Requests through segments are step_batch requests.
  r.requests = requests_.load() + shm_.requests();
  r.errors = errors_.load() + shm_.errors();
  r.replies_dropped = replies_dropped_.load();
  r.shm_bytes = shm_.bytes();
  r.shm_request_threads = shm_.request_threads();
  r.threads = pool_ == nullptr ? 1 : pool_->size();
  r.uptime_s = std::chrono::duration<double>(Now() - start_).count();
  r.rss_bytes = ResidentBytes();
  for (int i = 0; i < protocol::kNumOps; ++i) {
    uint64_t count = ops_[i].load();
    if (static_cast<protocol::Op>(i) == protocol::Op::kStepBatch) count += shm_.requests();
    r.ops[std::string(protocol::OpName(static_cast<protocol::Op>(i)))] = count;
  }
  return r;
}

}  // namespace tiergym::env
