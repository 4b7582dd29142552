#include "env/server/service.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <random>
#include <thread>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_join.h"
#include "env/server/random_id.h"
#include "env/server/shm_batch.h"
#include "env/spec/action_check.h"
#include "traces/base/cpu_relax.h"
#include "traces/base/field_status.h"
#include "traces/base/strings.h"
#include "traces/placement.h"

namespace tiergym::env {

using protocol::Error;
using protocol::MakeError;
using protocol::ReplyBody;

struct Service::Session {
  protocol::SessionId id;
  std::string owner;
  std::unique_ptr<SessionEnv> env;            // a make session, or
  std::unique_ptr<CoschedNode> node;          // a cosched_make session
  std::map<std::string, std::string> config;  // every key's value in force, as text
  std::mutex mu;
  bool in_episode = false;  // guarded by mu
  std::atomic<int> users{0};
  std::atomic<int64_t> last_used_ns{0};
  std::vector<std::string> segments;  // handles of segments made with it (guarded by mu_)
};

namespace {

// One of two ways of doing something, chosen by the time each took lately (moving
// averages): the faster, and the other after kTryOtherAfter uses, then after twice as many
// each time it stays slower (at most kTryOtherMax), so that a change of load is seen without
// paying often for a way that stays slower.
class TwoWays {
 public:
  static constexpr uint64_t kTryOtherAfter = 32, kTryOtherMax = 1024;
  // The way to take now: 0 or 1 (each once first).
  int Choose() {
    if (ns_[0] == 0) return 0;
    if (ns_[1] == 0) return 1;
    trying_other_ = ++uses_ >= try_other_after_;
    return trying_other_ ? 1 - Faster() : Faster();
  }
  // The time the way chosen took.
  void Took(int way, double ns) {
    ns_[way] = ns_[way] == 0 ? std::max(ns, 1.0) : 0.875 * ns_[way] + 0.125 * std::max(ns, 1.0);
    if (!trying_other_) return;
    trying_other_ = false;
    uses_ = 0;
    try_other_after_ =
        Faster() == way ? kTryOtherAfter : std::min(2 * try_other_after_, kTryOtherMax);
  }

 private:
  [[nodiscard]] int Faster() const { return ns_[1] < ns_[0] ? 1 : 0; }
  double ns_[2] = {0, 0};
  uint64_t uses_ = 0, try_other_after_ = kTryOtherAfter;
  bool trying_other_ = false;
};

}  // namespace

struct Service::Segment {
  std::string handle;
  std::string owner;
  std::unique_ptr<ShmBatch> batch;
  std::mutex mu;                  // one batch writes at a time
  uint64_t seq = 0;               // guarded by mu
  std::function<void()> release;  // gives its bytes back
  // A segment taking requests: the sessions of the batch that made it (row i is
  // sessions[i]), and whether it is freed (its thread then ends).
  std::vector<protocol::SessionId> sessions;
  std::atomic<bool> closing{false};
  // The request thread's scratch: the area's copy and the batch built from it (their
  // capacity reused from one request to the next).
  ShmRequest copy;
  protocol::StepBatchRequest batch_request;
  std::vector<size_t> lock_order;  // of `sessions` (distinct: the making batch was checked)
  // Its thread's choices (ServeSegment, ServeRequest): a batch stepped alone (0) or with
  // the pool's threads (1); the next request waited for by sleeping at once (0) or by
  // watching the request word for up to kRequestSpinNs first (1).
  TwoWays stepping, waiting;
  Segment() = default;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment() {
    batch.reset();
    if (release) release();
  }
};

struct Service::Waiter {
  std::thread thread;
  std::atomic<bool> done{false};
};

// A session marked in use: ReclaimIdle leaves it alone until the lease ends, which also
// stamps its last use.
class Service::Lease {
 public:
  Lease(std::shared_ptr<Session> session, const Service* service)
      : session_(std::move(session)), service_(service) {}
  Lease(Lease&& other) noexcept : session_(std::move(other.session_)), service_(other.service_) {}
  Lease& operator=(Lease&&) = delete;
  ~Lease() {
    if (session_ == nullptr) return;
    session_->last_used_ns.store(service_->Now().time_since_epoch().count());
    session_->users.fetch_sub(1);
  }
  Session* operator->() const { return session_.get(); }
  Session& operator*() const { return *session_; }

 private:
  std::shared_ptr<Session> session_;
  const Service* service_;
};

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

// The order in which a batch's sessions are locked: by id, so that concurrent batches
// cannot deadlock.
std::vector<size_t> LockOrder(const std::vector<protocol::SessionId>& sessions) {
  std::vector<size_t> order(sessions.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return sessions[a] < sessions[b]; });
  return order;
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

}  // namespace

Service::Service(ServiceOptions options, std::shared_ptr<EnvProvider> provider, ThreadPool* pool)
    : options_(std::move(options)),
      provider_(std::move(provider)),
      pool_(pool),
      start_(options_.clock ? options_.clock() : std::chrono::steady_clock::now()) {}

Service::~Service() { ReapWaiters(/*all=*/true); }

void Service::ReapWaiters(bool all) {
  if (all) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [handle, segment] : segments_) {
      segment->closing.store(true);
      if (segment->batch->requests()) segment->batch->WakeRequestWaiter();
    }
  }
  std::vector<std::unique_ptr<Waiter>> ended;
  {
    std::lock_guard<std::mutex> lock(waiters_mu_);
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (all || (*it)->done.load()) {
        ended.push_back(std::move(*it));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& w : ended) w->thread.join();  // each ends within one poll (100 ms)
}

namespace {
constexpr int kRequestPollMs = 100;  // how often a request thread looks for its closing
// How long a segment's thread watches the request word before it sleeps, when that way of
// waiting was faster lately (idle cores: a sleeping thread's wake-up costs tens of us
// there; busy ones: the watching takes the core the client needs, and is not chosen).
constexpr int64_t kRequestSpinNs = 100'000;

double NsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

void Service::ServeSegment(const std::shared_ptr<Segment>& segment) {
  ShmBatch& batch = *segment->batch;
  uint32_t served = 0;  // the number the segment was made with
  // Since the last batch was published, and how the next request is waited for (-1: not
  // waiting for one since a batch).
  auto published = std::chrono::steady_clock::now();
  int way = -1;
  bool watch = false;
  while (!segment->closing.load()) {
    // Never read a shrunk file (a fault); the segment is freed instead.
    if (!batch.Intact()) {
      std::lock_guard<std::mutex> lock(mu_);
      EraseSegmentLocked(segment->handle);
      break;
    }
    uint32_t now = batch.RequestWord();
    if (now == served && watch) {
      watch = false;
      const auto until = published + std::chrono::nanoseconds(kRequestSpinNs);
      // The file's size checked between reads, as before every read (a shrunk file is
      // freed below, never read on).
      while (now == served && std::chrono::steady_clock::now() < until && batch.Intact()) {
        for (int i = 0; i < 64 && now == served; ++i) {
          CpuRelax();
          now = batch.RequestWord();
        }
      }
    }
    if (now == served) {
      batch.WaitForRequest(now, kRequestPollMs);
      continue;
    }
    // The client's turn took this long (a client that paused tells nothing of the waits).
    if (const double ns = NsSince(published); way >= 0 && ns < 10e6) {
      segment->waiting.Took(way, ns);
    }
    served = now;
    ServeRequest(*segment);
    published = std::chrono::steady_clock::now();
    way = segment->waiting.Choose();
    watch = way == 1;
  }
}

void Service::ServeRequest(Segment& segment) {
  requests_.fetch_add(1, std::memory_order_relaxed);
  ops_[static_cast<int>(protocol::Op::kStepBatch)].fetch_add(1, std::memory_order_relaxed);
  // A copy: what the client writes from now on changes nothing here.
  ShmRequest& req = segment.copy;
  segment.batch->ReadRequest(req);
  const size_t n = segment.sessions.size();
  std::optional<Error> error;
  if (req.autoreset > 1) {
    error = MakeError(absl::StatusCode::kInvalidArgument, "request_autoreset",
                      StrCat("expected 0 (none) or 1 (same_step), got ", int{req.autoreset}));
  }
  for (size_t i = 0; i < n && !error; ++i) {
    if (req.reset[i] > 1) {
      error = MakeError(absl::StatusCode::kInvalidArgument, StrCat("request_reset[", i, "]"),
                        StrCat("expected 0 (step) or 1 (reset), got ", int{req.reset[i]}));
    }
  }
  if (!error) {
    protocol::StepBatchRequest& r = segment.batch_request;
    if (r.sessions.empty()) r.sessions = segment.sessions;
    r.reset.assign(req.reset.begin(), req.reset.begin() + static_cast<std::ptrdiff_t>(n));
    r.autoreset = req.autoreset == 1 ? protocol::Autoreset::kSameStep : protocol::Autoreset::kNone;
    // The copy's actions, one per entry (the two vectors trade places: each keeps its
    // rows' capacity for the request after next).
    r.actions.swap(req.actions);
    r.actions.resize(n);
    r.shm_segment = segment.handle;
    r.shm_signal = true;  // success: published and woken in WriteToSegment
    ReplyBody body;
    try {
      // This thread alone, or with size() - 1 of the pool's (the server's --threads): the
      // way that took less time lately (TwoWays).
      const size_t helpers = pool_ == nullptr ? 0 : static_cast<size_t>(pool_->size() - 1);
      const int way = helpers > 0 ? segment.stepping.Choose() : 0;
      const auto start = std::chrono::steady_clock::now();
      body = StepBatch(r, segment.owner, way == 1 ? helpers : 0, &segment.lock_order);
      // A refused batch (checked, nothing stepped) says nothing of the steps' time.
      if (helpers > 0 && !std::holds_alternative<Error>(body)) {
        segment.stepping.Took(way, NsSince(start));
      }
    } catch (const std::exception& e) {
      body = MakeError(absl::StatusCode::kInternal, "request",
                       StrCat("unexpected exception: ", e.what()));
    }
    if (auto* e = std::get_if<Error>(&body)) {
      error = std::move(*e);
      // The segment's arrays by their names: actions[i] is request_actions[i].
      if (error->field.rfind("actions", 0) == 0) error->field = "request_" + error->field;
      if (error->message.rfind("actions", 0) == 0) error->message = "request_" + error->message;
    }
  }
  if (!error) return;
  errors_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(segment.mu);
  if (!segment.batch->Intact()) return;  // freed by the loop (never written: a fault)
  segment.batch->SetError(protocol::CodeName(error->code), error->field, error->message);
  segment.batch->Publish(++segment.seq, false);
  segment.batch->Wake();
}

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
    case Op::kCoschedReset:
      return CoschedReset(std::get<protocol::CoschedResetRequest>(request.body), owner);
    case Op::kCoschedStep:
      return CoschedStep(std::get<protocol::CoschedStepRequest>(request.body), owner);
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
    r.envs.push_back(protocol::EnvDescription{
        protocol::kCoschedEnvId,
        "co-scheduling nodes: K tenants sharing one node's tiers (cosched_make, then "
        "cosched_reset and cosched_step)",
        options_.cosched->ConfigKeys(), "cosched_make"});
  }
  return r;
}

absl::Status Service::CheckConfigKeys(const protocol::ConfigMap& config) const {
  return CheckKnownConfigKeys(config, provider_->ConfigKeys());
}

absl::StatusOr<Service::Lease> Service::Acquire(const protocol::SessionId& id,
                                                const std::string& owner, std::string_view field,
                                                bool node) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(id);
  // Another connection's session is not found either: the same answer, the same work.
  if (it == sessions_.end() || it->second->owner != owner) {
    return absl::NotFoundError(StrCat(
        field, ": no such session on this connection (never made here, closed, or reclaimed after ",
        options_.idle_timeout_s, " s idle or when the connection that made it closed)"));
  }
  if ((it->second->node != nullptr) != node) {
    return absl::FailedPreconditionError(
        node ? StrCat(field,
                      ": not a co-scheduling session (made by make: drive it with reset, step "
                      "and step_batch)")
             : StrCat(field,
                      ": a co-scheduling session (made by cosched_make: drive it with "
                      "cosched_reset and cosched_step)"));
  }
  it->second->users.fetch_add(1);
  return Lease(it->second, this);
}

void Service::EraseLocked(
    std::unordered_map<protocol::SessionId, std::shared_ptr<Session>>::iterator it) {
  auto owner = sessions_of_.find(it->second->owner);
  if (owner != sessions_of_.end()) {
    owner->second.erase(it->first);
    if (owner->second.empty()) sessions_of_.erase(owner);
  }
  for (const std::string& handle : it->second->segments) EraseSegmentLocked(handle);
  sessions_.erase(it);
}

void Service::EraseSegmentLocked(const std::string& handle) {
  auto it = segments_.find(handle);
  if (it == segments_.end()) return;  // freed with another of its sessions
  auto owner = segments_of_.find(it->second->owner);
  if (owner != segments_of_.end() && --owner->second == 0) segments_of_.erase(owner);
  // Its request thread (if any) ends; it holds the segment until then.
  it->second->closing.store(true);
  if (it->second->batch->requests()) it->second->batch->WakeRequestWaiter();
  segments_.erase(it);  // unmapped and unlinked when no batch uses it any more
}

absl::StatusOr<std::shared_ptr<Service::Segment>> Service::NewSegment(
    const std::vector<protocol::SessionId>& sessions, const std::string& owner, const EnvSpec& spec,
    bool requests) {
  if (options_.max_shm_bytes == 0) {
    return absl::FailedPreconditionError(
        "shm: this server offers no shared memory (--max-shm-mib 0); leave out shm");
  }
  const ShmBatchShape shape = ShapeOf(spec, sessions.size());
  if (requests) ReapWaiters(/*all=*/false);
  uint64_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t& mine = segments_of_[owner];
    if (mine >= options_.max_shm_segments_per_connection) {
      return absl::ResourceExhaustedError(
          StrCat("shm: this connection holds ", mine,
                 " shared-memory segments, the server's limit per connection; name one of "
                 "them (shm: its handle) instead of asking for another, or close sessions"));
    }
    // A thread for its requests if one is left; else a segment for results only (its
    // making reply does not say `requests`).
    requests = requests && request_threads_.load() < options_.max_shm_request_threads;
    bytes = ShmBatch::BytesFor(shape, requests);
    if (shm_bytes_.load() + bytes > options_.max_shm_bytes) {
      if (mine == 0) segments_of_.erase(owner);
      return absl::ResourceExhaustedError(
          StrCat("shm: a segment of ", bytes, " bytes; with ", shm_bytes_.load(),
                 " held, that is over the server's shared memory of ", options_.max_shm_bytes,
                 " bytes (--max-shm-mib); leave out shm (results in the reply)"));
    }
    ++mine;
    shm_bytes_.fetch_add(bytes);
    if (requests) request_threads_.fetch_add(1);
  }
  auto undo_count = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = segments_of_.find(owner);
    if (it != segments_of_.end() && --it->second == 0) segments_of_.erase(it);
    if (requests) request_threads_.fetch_sub(1);
  };
  if (absl::Status s = provider_->Charge(bytes); !s.ok()) {
    undo_count();
    shm_bytes_.fetch_sub(bytes);
    return absl::Status(s.code(), StrCat("shm: a shared-memory segment of ", s.message()));
  }
  auto segment = std::make_shared<Segment>();
  segment->owner = owner;
  segment->release = [this, bytes] {
    shm_bytes_.fetch_sub(bytes);
    provider_->Uncharge(bytes);
  };
  absl::StatusOr<std::unique_ptr<ShmBatch>> batch = ShmBatch::Create(shape, requests);
  if (!batch.ok()) {
    undo_count();
    return absl::Status(batch.status().code(), StrCat("shm: ", batch.status().message()));
  }
  segment->batch = *std::move(batch);
  {
    std::lock_guard<std::mutex> lock(mu_);
    do {
      segment->handle = RandomHex128();
    } while (segments_.count(segment->handle) != 0);
    for (const protocol::SessionId& id : sessions) {
      auto it = sessions_.find(id);
      if (it != sessions_.end()) it->second->segments.push_back(segment->handle);
    }
    segments_.emplace(segment->handle, segment);
  }
  if (requests) {
    segment->sessions = sessions;
    segment->lock_order = LockOrder(sessions);
    auto waiter = std::make_unique<Waiter>();
    Waiter* w = waiter.get();
    std::lock_guard<std::mutex> lock(waiters_mu_);
    w->thread = std::thread([this, segment, w] {
      ServeSegment(segment);
      request_threads_.fetch_sub(1);
      w->done.store(true);
    });
    waiters_.push_back(std::move(waiter));
  }
  return segment;
}

absl::StatusOr<std::shared_ptr<Service::Segment>> Service::FindSegment(const std::string& handle,
                                                                       const std::string& owner,
                                                                       const EnvSpec& spec,
                                                                       size_t rows) {
  std::shared_ptr<Segment> segment;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = segments_.find(handle);
    // Another connection's segment is not found either: the same answer.
    if (it == segments_.end() || it->second->owner != owner) {
      return absl::NotFoundError(
          "shm: no such shared-memory segment on this connection (never made here, or freed "
          "when one of the sessions it was made with closed); ask for a new one (shm: true)");
    }
    segment = it->second;
  }
  ShmBatchShape want = ShapeOf(spec, rows);
  const ShmBatchShape& have = segment->batch->shape();
  want.rows = have.rows;
  if (rows > have.rows || !(want == have)) {
    return absl::InvalidArgumentError(StrCat(
        "shm: the segment holds ", have.rows, " rows of ", have.obs, " observation values and ",
        have.tiers, " tiers; this batch has ", rows, " entries of ", want.obs, " and ", want.tiers,
        " (a segment serves batches of the spaces it was made for)"));
  }
  if (!segment->batch->Intact()) {
    std::lock_guard<std::mutex> lock(mu_);
    EraseSegmentLocked(handle);
    return absl::FailedPreconditionError(
        "shm: the segment's file was truncated (by a process of the server's user); it is "
        "freed: ask for a new one (shm: true)");
  }
  return segment;
}

ReplyBody Service::Make(const protocol::MakeRequest& r, const std::string& owner) {
  if (r.env == protocol::kCoschedEnvId && options_.cosched != nullptr) {
    return MakeError(absl::StatusCode::kInvalidArgument, "env",
                     StrCat(protocol::kCoschedEnvId,
                            " is made by the op cosched_make, not make (PROTOCOL.md, "
                            "Co-scheduling)"));
  }
  if (r.env != protocol::kEnvId) {
    return MakeError(absl::StatusCode::kNotFound, "env",
                     StrCat("unknown environment \"", protocol::Printable(r.env),
                            "\" (served: ", protocol::kEnvId, ")"));
  }
  if (absl::Status s = CheckConfigKeys(r.config); !s.ok()) {
    return protocol::ErrorFromStatus(s, "config");
  }
  if (std::optional<Error> refused = ReserveMake(owner)) return *std::move(refused);
  absl::StatusOr<std::unique_ptr<SessionEnv>> env = provider_->Make(r.config);
  std::lock_guard<std::mutex> lock(mu_);
  --pending_makes_;
  if (!env.ok()) return ConfigError(env.status());

  auto session = std::make_shared<Session>();
  session->owner = owner;
  session->env = std::move(*env);
  protocol::MakeReply reply;
  reply.spec = session->env->spec();
  reply.config = ConfigInForce(provider_->ConfigKeys(), r.config, reply.spec);
  session->config = reply.config;
  AddSessionLocked(session);
  reply.session = session->id;
  return reply;
}

std::optional<Error> Service::ReserveMake(const std::string& owner, std::string_view op) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sessions_.size() + pending_makes_ >= options_.max_sessions) {
    return MakeError(absl::StatusCode::kResourceExhausted, "op",
                     StrCat(op, " refused: ", sessions_.size(),
                            " sessions open, the server's limit (--max-sessions); close "
                            "sessions you no longer use"));
  }
  auto mine = sessions_of_.find(owner);
  if (mine != sessions_of_.end() && mine->second.size() >= options_.max_sessions_per_connection) {
    return MakeError(absl::StatusCode::kResourceExhausted, "op",
                     StrCat(op, " refused: this connection has ", mine->second.size(),
                            " sessions open, the server's limit per connection "
                            "(--max-sessions-per-connection); close sessions you no "
                            "longer use"));
  }
  ++pending_makes_;
  return std::nullopt;
}

void Service::AddSessionLocked(std::shared_ptr<Session> session) {
  do {
    session->id = RandomHex128();
  } while (sessions_.count(session->id) != 0);
  session->last_used_ns.store(Now().time_since_epoch().count());
  sessions_of_[session->owner].insert(session->id);
  sessions_.emplace(session->id, std::move(session));
  sessions_made_.fetch_add(1, std::memory_order_relaxed);
}

namespace {

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

ReplyBody Service::CoschedMake(const protocol::CoschedMakeRequest& r, const std::string& owner) {
  if (options_.cosched == nullptr) {
    return MakeError(absl::StatusCode::kUnimplemented, "op",
                     "this server serves no co-scheduling nodes");
  }
  if (absl::Status s = CheckKnownConfigKeys(r.config, options_.cosched->ConfigKeys()); !s.ok()) {
    return protocol::ErrorFromStatus(s, "config");
  }
  if (std::optional<Error> refused = ReserveMake(owner)) return *std::move(refused);
  absl::StatusOr<std::unique_ptr<CoschedNode>> node = options_.cosched->Make(r.config);
  std::lock_guard<std::mutex> lock(mu_);
  --pending_makes_;
  if (!node.ok()) {
    absl::Status status = node.status();
    // A tenant not found carries its key already; anything else without one is the
    // configuration's.
    return protocol::ErrorFromStatus(NestField(std::move(status), "config"), "config");
  }
  auto session = std::make_shared<Session>();
  session->owner = owner;
  session->node = *std::move(node);
  protocol::CoschedMakeReply reply;
  reply.spec = session->node->assets().tenant_spec();
  // The distinct profiles with their region bounds (a profile may run as several tenants).
  reply.spec.profiles = session->node->assets().env_assets().spec().profiles;
  reply.spec.region_bounds = session->node->assets().env_assets().spec().region_bounds;
  reply.tenants = session->node->assets().tenant_names();
  reply.config = ConfigInForce(options_.cosched->ConfigKeys(), r.config, reply.spec);
  session->config = reply.config;
  AddSessionLocked(session);
  reply.session = session->id;
  return reply;
}

ReplyBody Service::CoschedReset(const protocol::CoschedResetRequest& r, const std::string& owner) {
  absl::StatusOr<Lease> lease = Acquire(r.session, owner, "session", /*node=*/true);
  if (!lease.ok()) return FieldOf(lease.status(), "session");
  Session& s = **lease;
  std::lock_guard<std::mutex> lock(s.mu);
  absl::StatusOr<NodeStep> result = s.node->env().Reset(r.seed);
  if (!result.ok()) {
    s.in_episode = false;
    return FieldOf(result.status(), "session");
  }
  s.in_episode = !result->done;
  return NodeReply(*std::move(result));
}

ReplyBody Service::CoschedStep(const protocol::CoschedStepRequest& r, const std::string& owner) {
  absl::StatusOr<Lease> lease = Acquire(r.session, owner, "session", /*node=*/true);
  if (!lease.ok()) return FieldOf(lease.status(), "session");
  Session& s = **lease;
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.in_episode) return NoEpisode("session");
  // The node checks every action (count, ranges) before anything moves.
  absl::StatusOr<NodeStep> result = s.node->env().Step(r.actions);
  if (!result.ok()) {
    return FieldOf(result.status(), result.status().code() == absl::StatusCode::kInvalidArgument
                                        ? "actions"
                                        : "session");
  }
  if (result->done) s.in_episode = false;
  return NodeReply(*std::move(result));
}

ReplyBody Service::Reset(const protocol::ResetRequest& r, const std::string& owner) {
  absl::StatusOr<Lease> lease = Acquire(r.session, owner, "session");
  if (!lease.ok()) return FieldOf(lease.status(), "session");
  Session& s = **lease;
  std::lock_guard<std::mutex> lock(s.mu);
  absl::StatusOr<StepResult> result = s.env->Reset(r.seed, r.options);
  if (!result.ok()) {
    s.in_episode = false;
    return FieldOf(result.status(), r.options.profile ? "options.profile" : "session");
  }
  s.in_episode = !(result->terminated || result->truncated);
  return protocol::ResetReply{std::move(*result)};
}

ReplyBody Service::Step(const protocol::StepRequest& r, const std::string& owner) {
  absl::StatusOr<Lease> lease = Acquire(r.session, owner, "session");
  if (!lease.ok()) return FieldOf(lease.status(), "session");
  Session& s = **lease;
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.in_episode) return NoEpisode("session");
  // The environment checks the action (env/spec/action_check.h) before anything moves.
  absl::StatusOr<StepResult> result = s.env->Step(r.action);
  if (!result.ok()) return StepError(result.status(), "session", "action");
  if (result->terminated || result->truncated) s.in_episode = false;
  return protocol::StepReply{std::move(*result)};
}

ReplyBody Service::StepBatch(const protocol::StepBatchRequest& r, const std::string& owner,
                             size_t max_helpers, const std::vector<size_t>* lock_order) {
  const size_t n = r.sessions.size();
  // 1. The sessions, each once (known when the lock order is given: a segment's).
  std::vector<Lease> leases;
  leases.reserve(n);
  {
    std::unordered_map<std::string_view, size_t> seen;
    if (lock_order == nullptr) seen.reserve(n);
    // The field an error names is spelled out only on an error (Acquire and CheckAction
    // change nothing when they fail: called again, they fail the same way, with its name).
    for (size_t i = 0; i < n; ++i) {
      auto [it, inserted] =
          lock_order == nullptr ? seen.emplace(r.sessions[i], i) : std::pair{seen.end(), true};
      if (!inserted) {
        return MakeError(absl::StatusCode::kInvalidArgument, StrCat("sessions[", i, "]"),
                         StrCat("the same session as sessions[", it->second, "]"));
      }
      absl::StatusOr<Lease> lease = Acquire(r.sessions[i], owner, {});
      if (!lease.ok()) {
        const std::string field = StrCat("sessions[", i, "]");
        absl::StatusOr<Lease> again = Acquire(r.sessions[i], owner, field);
        if (!again.ok()) return FieldOf(again.status(), field);
        leases.push_back(std::move(*again));
        continue;
      }
      leases.push_back(std::move(*lease));
    }
  }
  // 2. One configuration shape for all (the reply's arrays are rectangular).
  const EnvSpec& spec0 = leases[0]->env->spec();
  for (size_t i = 1; i < n; ++i) {
    if (!SameShape(leases[i]->env->spec(), spec0)) {
      return MakeError(absl::StatusCode::kInvalidArgument, StrCat("sessions[", i, "]"),
                       "its spaces differ from those of sessions[0]; a batch holds sessions of "
                       "one configuration");
    }
  }
  // 3. Lock every session, in id order (so that concurrent batches cannot deadlock).
  std::vector<size_t> sorted;
  if (lock_order == nullptr) {
    sorted = LockOrder(r.sessions);
    lock_order = &sorted;
  }
  std::vector<std::unique_lock<std::mutex>> locks;
  locks.reserve(n);
  for (size_t i : *lock_order) locks.emplace_back(leases[i]->mu);

  // 4. Check everything before anything moves.
  auto resetting = [&](size_t i) { return !r.reset.empty() && r.reset[i] != 0; };
  for (size_t i = 0; i < n; ++i) {
    if (resetting(i)) continue;
    if (!leases[i]->in_episode) return NoEpisode(StrCat("sessions[", i, "]"));
    if (!CheckAction(spec0, r.actions[i], {}).ok()) {
      const std::string field = StrCat("actions[", i, "]");
      return FieldOf(CheckAction(spec0, r.actions[i], field), field);
    }
  }

  // 5. The shared-memory segment the results go to, if asked for: before anything moves,
  // so that a refusal moves nothing.
  std::shared_ptr<Segment> segment;
  bool made = false;
  if (r.shm_new || !r.shm_segment.empty()) {
    absl::StatusOr<std::shared_ptr<Segment>> got =
        r.shm_new ? NewSegment(r.sessions, owner, spec0, r.shm_requests)
                  : FindSegment(r.shm_segment, owner, spec0, n);
    if (!got.ok()) return FieldOf(got.status(), "shm");
    segment = *std::move(got);
    made = r.shm_new;
  }
  std::unique_lock<std::mutex> segment_lock;
  if (segment != nullptr) segment_lock = std::unique_lock<std::mutex>(segment->mu);

  // 6. Step (or reset) every entry, in parallel.
  const bool same_step = r.autoreset == protocol::Autoreset::kSameStep;
  protocol::StepBatchReply reply;
  reply.results.resize(n);
  reply.was_reset.assign(n, 0);
  std::vector<StepResult> finals(same_step ? n : 0);  // only same_step writes them
  std::vector<uint8_t> ended(n, 0);
  std::vector<absl::Status> errors(n);
  auto step = [&](size_t i) {
    Session& s = *leases[i];
    if (resetting(i)) {
      absl::StatusOr<StepResult> res =
          s.env->Reset(r.seeds.empty() ? std::nullopt : r.seeds[i],
                       r.options.empty() ? ResetOptions{} : r.options[i]);
      if (!res.ok()) {
        s.in_episode = false;
        errors[i] = res.status();
        return;
      }
      s.in_episode = !(res->terminated || res->truncated);
      reply.results[i] = std::move(*res);
      reply.was_reset[i] = 1;
      return;
    }
    // Checked in 4. (the one check of every action): not checked again.
    absl::StatusOr<StepResult> res = s.env->StepPrechecked(r.actions[i]);
    if (!res.ok()) {
      errors[i] = res.status();
      return;
    }
    if (!(res->terminated || res->truncated)) {
      reply.results[i] = std::move(*res);
      return;
    }
    s.in_episode = false;
    if (!same_step) {
      reply.results[i] = std::move(*res);
      return;
    }
    ended[i] = 1;
    finals[i] = std::move(*res);
    absl::StatusOr<StepResult> again = s.env->Reset(std::nullopt, ResetOptions{});
    if (!again.ok()) {
      errors[i] = again.status();
      return;
    }
    s.in_episode = !(again->terminated || again->truncated);
    // The step's reward and flags, the reset's observation and info.
    reply.results[i] = std::move(*again);
    reply.results[i].reward = finals[i].reward;
    reply.results[i].terminated = finals[i].terminated;
    reply.results[i].truncated = finals[i].truncated;
    reply.was_reset[i] = 1;
  };
  // With a segment, each entry's row is written by the thread that stepped it. When the
  // reply carries no results (a segment that was named, not made), the entry's results are
  // freed as soon as they are written, as the in-process environment does: the next
  // entry's allocations reuse memory still in cache, instead of a batch of frees at the end.
  const bool rows_only = segment != nullptr && !made;
  std::vector<absl::Status> write_errors(segment != nullptr ? n : 0);
  std::atomic<bool> any_refused{false};  // for the segment's summary
  auto body = [&](size_t i) {
    step(i);
    if (segment == nullptr || !errors[i].ok()) return;
    ShmBatch& shm = *segment->batch;
    const EnvSpec& spec = leases[i]->env->spec();
    if (!reply.results[i].info.refused_regions.empty()) {
      any_refused.store(true, std::memory_order_relaxed);
    }
    write_errors[i] = shm.WriteRow(i, reply.results[i], reply.was_reset[i] != 0, spec);
    if (!rows_only) return;
    if (ended[i] != 0) {
      if (write_errors[i].ok()) write_errors[i] = shm.WriteFinal(i, finals[i], spec);
      finals[i] = StepResult{};
    }
    reply.results[i] = StepResult{};
  };
  if (pool_ != nullptr && n > 1) {
    pool_->ParallelFor(n, body, max_helpers);
  } else {
    for (size_t i = 0; i < n; ++i) body(i);
  }
  for (size_t i = 0; i < n; ++i) {
    if (!errors[i].ok()) {
      if (resetting(i)) return FieldOf(errors[i], StrCat("sessions[", i, "]"));
      return StepError(errors[i], StrCat("sessions[", i, "]"), StrCat("actions[", i, "]"));
    }
  }
  const bool any_ended = same_step && std::find(ended.begin(), ended.end(), 1) != ended.end();
  if (any_ended && !rows_only) {
    for (size_t i = 0; i < n; ++i) {
      if (!ended[i]) finals[i] = reply.results[i];
    }
    reply.finals = std::move(finals);
  }
  if (segment != nullptr) {
    return WriteToSegment(*segment, made, r.shm_signal, leases, write_errors, reply,
                          rows_only && any_ended ? &ended : nullptr, any_refused.load());
  }
  return reply;
}

ReplyBody Service::WriteToSegment(Segment& segment, bool made, bool signal,
                                  const std::vector<Lease>& leases,
                                  std::vector<absl::Status>& errors,
                                  protocol::StepBatchReply& reply,
                                  const std::vector<uint8_t>* ended, bool any_refused) {
  ShmBatch& batch = *segment.batch;
  const size_t n = reply.results.size();
  const bool has_final = ended != nullptr || !reply.finals.empty();
  // The rows are written (errors holds how that went); the final rows when an episode
  // ended (rarely: once per episode). With `ended`, the results are gone: the ended rows'
  // finals are written, the others' are their rows, copied within the segment.
  for (size_t i = 0; i < n && has_final; ++i) {
    if (!errors[i].ok()) continue;
    if (ended == nullptr) {
      errors[i] = batch.WriteFinal(i, reply.finals[i], leases[i]->env->spec());
    } else if ((*ended)[i] == 0) {
      batch.CopyRowToFinal(i);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (!errors[i].ok()) {
      return MakeError(absl::StatusCode::kInternal, "shm",
                       StrCat("sessions[", i, "]: ", errors[i].message()));
    }
  }
  // A client that named the segment has mapped it: its name goes before the batch is
  // announced (a signalled client may look for it as soon as it is woken).
  if (!made) batch.Unlink();
  if (batch.requests()) batch.ClearError();
  const bool any_reset =
      std::find(reply.was_reset.begin(), reply.was_reset.end(), 1) != reply.was_reset.end();
  batch.Publish(++segment.seq, has_final,
                static_cast<uint8_t>((any_refused ? ShmBatch::kSummaryRefused : 0) |
                                     (any_reset ? ShmBatch::kSummaryReset : 0)));
  if (signal) {
    // The client waits on the seq word (shm_signal): woken, it reads the batch there.
    batch.Wake();
    reply.quiet = true;
  }
  protocol::ShmReply shm;
  shm.segment = segment.handle;
  shm.seq = segment.seq;
  shm.rows = n;
  shm.has_final = has_final;
  if (made) {
    // The reply that made the segment carries the results too: a client that cannot map
    // it (another machine) loses nothing.
    shm.name = batch.name();
    shm.bytes = batch.bytes();
    shm.layout = batch.layout();
    shm.signal = true;
    shm.requests = batch.requests();
  } else {
    reply.results.clear();
    reply.was_reset.clear();
    reply.finals.clear();
  }
  reply.shm = std::move(shm);
  return std::move(reply);
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

  auto estimate = [&](const SessionEnv& env) -> ReplyBody {
    const std::string profile = ProfileName(r.profile, env.spec());
    absl::StatusOr<double> runtime = env.EstimatePlacementNs(profile, *placement);
    if (!runtime.ok()) {
      return FieldOf(runtime.status(), runtime.status().code() == absl::StatusCode::kNotFound
                                           ? "profile"
                                           : "placement");
    }
    Placement all_default;
    all_default.default_tier = env.spec().tiers.empty() ? "" : env.spec().tiers[0];
    absl::StatusOr<double> base = env.EstimatePlacementNs(profile, all_default);
    if (!base.ok()) return FieldOf(base.status(), "profile");
    return protocol::EstimateReply{*runtime, *base, *base > 0 ? 1 - *runtime / *base : 0};
  };

  if (!r.session.empty()) {
    absl::StatusOr<Lease> lease = Acquire(r.session, owner, "session");
    if (!lease.ok()) return FieldOf(lease.status(), "session");
    std::lock_guard<std::mutex> lock((*lease)->mu);
    return estimate(*(*lease)->env);
  }
  const protocol::ConfigMap config = r.config.value_or(protocol::ConfigMap{});
  if (absl::Status s = CheckConfigKeys(config); !s.ok()) {
    return protocol::ErrorFromStatus(s, "config");
  }
  absl::StatusOr<std::unique_ptr<SessionEnv>> env = provider_->Make(config);
  if (!env.ok()) return ConfigError(env.status());
  return estimate(**env);
}

ReplyBody Service::Close(const protocol::CloseRequest& r, const std::string& owner) {
  std::shared_ptr<Session> doomed;  // destroyed outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sessions_.find(r.session);
    if (it == sessions_.end() || it->second->owner != owner) {
      return MakeError(
          absl::StatusCode::kNotFound, "session",
          StrCat("no such session on this connection (never made here, closed, "
                 "or reclaimed after ",
                 options_.idle_timeout_s, " s idle or when the connection that made it closed)"));
    }
    doomed = it->second;
    EraseLocked(it);
  }
  sessions_closed_.fetch_add(1, std::memory_order_relaxed);
  return protocol::CloseReply{};
}

ReplyBody Service::Fork(const protocol::ForkRequest& r, const std::string& owner) {
  absl::StatusOr<Lease> lease = Acquire(r.session, owner, "session");
  if (!lease.ok()) {
    if (lease.status().code() == absl::StatusCode::kFailedPrecondition) {  // a node
      return MakeError(absl::StatusCode::kUnimplemented, "session",
                       "a co-scheduling node cannot be forked (sessions made by make, and "
                       "their forks, can)");
    }
    return FieldOf(lease.status(), "session");
  }
  if (std::optional<Error> refused = ReserveMake(owner, "fork")) return *std::move(refused);
  Session& from = **lease;
  auto session = std::make_shared<Session>();
  session->owner = owner;
  session->config = from.config;
  absl::StatusOr<std::unique_ptr<SessionEnv>> env;
  {
    std::lock_guard<std::mutex> lock(from.mu);
    env = from.env->Fork(provider_.get());  // charged to the budget as a session
    session->in_episode = from.in_episode;
  }
  std::lock_guard<std::mutex> lock(mu_);
  --pending_makes_;
  if (!env.ok()) {
    if (env.status().code() == absl::StatusCode::kResourceExhausted) {
      return MakeError(absl::StatusCode::kResourceExhausted, "op",
                       StrCat("fork refused: ", env.status().message()));
    }
    return FieldOf(env.status(), "session");
  }
  session->env = *std::move(env);
  AddSessionLocked(session);
  return protocol::ForkReply{session->id};
}

size_t Service::CloseSessionsOf(std::string_view owner) {
  std::vector<std::shared_ptr<Session>> doomed;  // destroyed outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto mine = sessions_of_.find(std::string(owner));
    if (mine == sessions_of_.end()) return 0;
    const std::vector<protocol::SessionId> ids(mine->second.begin(), mine->second.end());
    for (const protocol::SessionId& id : ids) {
      auto it = sessions_.find(id);
      if (it == sessions_.end()) continue;
      doomed.push_back(it->second);
      EraseLocked(it);  // (erases `mine` with its last session)
    }
  }
  sessions_reclaimed_.fetch_add(doomed.size(), std::memory_order_relaxed);
  return doomed.size();
}

size_t Service::ReclaimIdle() {
  std::vector<std::shared_ptr<Session>> doomed;  // destroyed outside the lock
  if (options_.idle_timeout_s > 0) {
    const int64_t now = Now().time_since_epoch().count();
    const int64_t timeout =
        static_cast<int64_t>(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                 std::chrono::duration<double>(options_.idle_timeout_s))
                                 .count());
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      Session& s = *it->second;
      auto next = std::next(it);
      if (s.users.load() == 0 && now - s.last_used_ns.load() > timeout) {
        doomed.push_back(it->second);
        EraseLocked(it);
      }
      it = next;
    }
  }
  const size_t reclaimed = doomed.size();
  sessions_reclaimed_.fetch_add(reclaimed, std::memory_order_relaxed);
  doomed.clear();
  provider_->Trim();  // assets the reclaimed sessions held may be unused now
  return reclaimed;
}

protocol::StatsReply Service::Stats() const {
  protocol::StatsReply r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    r.sessions = sessions_.size();
    r.shm_segments = segments_.size();
  }
  r.sessions_made = sessions_made_.load();
  r.sessions_closed = sessions_closed_.load();
  r.sessions_reclaimed = sessions_reclaimed_.load();
  const EnvProvider::Stats ps = provider_->GetStats();
  r.asset_sets = ps.asset_sets;
  r.asset_bytes = ps.asset_bytes;
  r.requests = requests_.load();
  r.errors = errors_.load();
  r.replies_dropped = replies_dropped_.load();
  r.shm_bytes = shm_bytes_.load();
  r.shm_request_threads = request_threads_.load();
  r.threads = pool_ == nullptr ? 1 : pool_->size();
  r.uptime_s = std::chrono::duration<double>(Now() - start_).count();
  r.rss_bytes = ResidentBytes();
  for (int i = 0; i < protocol::kNumOps; ++i) {
    r.ops[std::string(protocol::OpName(static_cast<protocol::Op>(i)))] = ops_[i].load();
  }
  return r;
}

}  // namespace tiergym::env
