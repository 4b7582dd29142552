#include "env/server/shm_transport.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "env/server/random_id.h"
#include "env/server/shm_batch.h"
#include "env/server/two_ways.h"
#include "traces/base/cpu_relax.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym::env {

using protocol::Error;
using protocol::MakeError;

struct ShmTransport::Segment {
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

struct ShmTransport::Waiter {
  std::thread thread;
  std::atomic<bool> done{false};
};

namespace {

constexpr int kRequestPollMs = 100;  // how often a request thread looks for its closing
// How long a segment's thread watches the request word before it sleeps, when that way of
// waiting was faster lately (idle cores: a sleeping thread's wake-up costs tens of us
// there; busy ones: the watching takes the core the client needs, and is not chosen).
constexpr int64_t kRequestSpinNs = 100'000;

double NsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
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

// The rows of a batch into its segment, each by the thread that stepped it. When the reply
// carries no results (a segment that was named, not made), the results are freed as soon as
// they are written, as the in-process environment does: the next entry's allocations reuse
// memory still in cache, instead of a batch of frees at the end.
class SegmentSink : public ResultSink {
 public:
  SegmentSink(ShmBatch& batch, ReplySink* reply, std::vector<const EnvSpec*> specs)
      : batch_(batch),
        reply_(reply),
        specs_(std::move(specs)),
        errors_(specs_.size()),
        ended_(specs_.size(), 0) {}

  void Row(size_t i, StepResult& result, bool was_reset, StepResult* ended) override {
    if (!result.info.refused_regions.empty()) any_refused_.store(true, std::memory_order_relaxed);
    if (was_reset) any_reset_.store(true, std::memory_order_relaxed);
    errors_[i] = batch_.WriteRow(i, result, was_reset, *specs_[i]);
    if (reply_ != nullptr) {
      reply_->Row(i, result, was_reset, ended);
      return;
    }
    if (ended != nullptr) {
      ended_[i] = 1;
      any_ended_.store(true, std::memory_order_relaxed);
      if (errors_[i].ok()) errors_[i] = batch_.WriteFinal(i, *ended, *specs_[i]);
      *ended = StepResult{};
    }
    result = StepResult{};
  }

  ShmBatch& batch_;
  ReplySink* reply_;
  std::vector<const EnvSpec*> specs_;
  std::vector<absl::Status> errors_;
  std::vector<uint8_t> ended_;  // rows whose episode ended (the sink wrote their finals)
  std::atomic<bool> any_refused_{false}, any_reset_{false}, any_ended_{false};
};

}  // namespace

ShmTransport::ShmTransport(ShmTransportOptions options, EnvProvider* budget, ThreadPool* pool,
                           RunBatch run)
    : options_(options), budget_(budget), pool_(pool), run_(std::move(run)) {}

ShmTransport::~ShmTransport() { ReapWaiters(/*all=*/true); }

uint64_t ShmTransport::segments() const {
  std::lock_guard<std::mutex> lock(mu_);
  return segments_.size();
}

void ShmTransport::ReapWaiters(bool all) {
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

void ShmTransport::EraseLocked(const std::string& handle) {
  auto it = segments_.find(handle);
  if (it == segments_.end()) return;  // freed with another of its sessions
  auto owner = of_owner_.find(it->second->owner);
  if (owner != of_owner_.end() && --owner->second == 0) of_owner_.erase(owner);
  // Its request thread (if any) ends; it holds the segment until then.
  it->second->closing.store(true);
  if (it->second->batch->requests()) it->second->batch->WakeRequestWaiter();
  segments_.erase(it);  // unmapped and unlinked when no batch uses it any more
}

void ShmTransport::SessionsErased(const std::vector<protocol::SessionId>& ids) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const protocol::SessionId& id : ids) {
    auto it = of_session_.find(id);
    if (it == of_session_.end()) continue;
    for (const std::string& handle : it->second) EraseLocked(handle);
    of_session_.erase(it);
  }
}

absl::StatusOr<std::pair<uint64_t, bool>> ShmTransport::Reserve(const std::string& owner,
                                                                const EnvSpec& spec, size_t rows,
                                                                bool requests) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t& mine = of_owner_[owner];
  if (mine >= options_.max_shm_segments_per_connection) {
    return absl::ResourceExhaustedError(
        StrCat("shm: this connection holds ", mine,
               " shared-memory segments, the server's limit per connection; name one of "
               "them (shm: its handle) instead of asking for another, or close sessions"));
  }
  // A thread for its requests if one is left; else a segment for results only (its making
  // reply does not say `requests`).
  requests = requests && request_threads_.load() < options_.max_shm_request_threads;
  const uint64_t bytes = ShmBatch::BytesFor(ShapeOf(spec, rows), requests);
  if (bytes_.load() + bytes > options_.max_shm_bytes) {
    if (mine == 0) of_owner_.erase(owner);
    return absl::ResourceExhaustedError(
        StrCat("shm: a segment of ", bytes, " bytes; with ", bytes_.load(),
               " held, that is over the server's shared memory of ", options_.max_shm_bytes,
               " bytes (--max-shm-mib); leave out shm (results in the reply)"));
  }
  ++mine;
  bytes_.fetch_add(bytes);
  if (requests) request_threads_.fetch_add(1);
  return std::make_pair(bytes, requests);
}

void ShmTransport::Unreserve(const std::string& owner, bool requests) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = of_owner_.find(owner);
  if (it != of_owner_.end() && --it->second == 0) of_owner_.erase(it);
  if (requests) request_threads_.fetch_sub(1);
}

absl::StatusOr<std::shared_ptr<ShmTransport::Segment>> ShmTransport::Make(
    const std::vector<protocol::SessionId>& sessions, const std::string& owner, const EnvSpec& spec,
    bool requests, const std::function<bool(const protocol::SessionId&)>& open) {
  if (options_.max_shm_bytes == 0) {
    return absl::FailedPreconditionError(
        "shm: this server offers no shared memory (--max-shm-mib 0); leave out shm");
  }
  if (requests) ReapWaiters(/*all=*/false);
  absl::StatusOr<std::pair<uint64_t, bool>> reserved =
      Reserve(owner, spec, sessions.size(), requests);
  if (!reserved.ok()) return reserved.status();
  const uint64_t bytes = reserved->first;
  const bool takes_requests = reserved->second;
  if (budget_ != nullptr) {
    if (absl::Status s = budget_->Charge(bytes); !s.ok()) {
      Unreserve(owner, takes_requests);
      bytes_.fetch_sub(bytes);
      return absl::Status(s.code(), StrCat("shm: a shared-memory segment of ", s.message()));
    }
  }
  auto segment = std::make_shared<Segment>();
  segment->owner = owner;
  segment->release = [this, bytes = bytes] {
    bytes_.fetch_sub(bytes);
    if (budget_ != nullptr) budget_->Uncharge(bytes);
  };
  absl::StatusOr<std::unique_ptr<ShmBatch>> batch =
      ShmBatch::Create(ShapeOf(spec, sessions.size()), takes_requests);
  if (!batch.ok()) {
    Unreserve(owner, takes_requests);
    return absl::Status(batch.status().code(), StrCat("shm: ", batch.status().message()));
  }
  segment->batch = *std::move(batch);
  {
    std::lock_guard<std::mutex> lock(mu_);
    do {
      segment->handle = RandomHex128();
    } while (segments_.count(segment->handle) != 0);
    for (const protocol::SessionId& id : sessions) {
      if (open(id)) of_session_[id].push_back(segment->handle);
    }
    segments_.emplace(segment->handle, segment);
  }
  if (takes_requests) {
    segment->sessions = sessions;
    segment->lock_order = LockOrder(sessions);
    StartThread(segment);
  }
  return segment;
}

void ShmTransport::StartThread(const std::shared_ptr<Segment>& segment) {
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

absl::StatusOr<std::shared_ptr<ShmTransport::Segment>> ShmTransport::Find(const std::string& handle,
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
    EraseLocked(handle);
    return absl::FailedPreconditionError(
        "shm: the segment's file was truncated (by a process of the server's user); it is "
        "freed: ask for a new one (shm: true)");
  }
  return segment;
}

std::unique_lock<std::mutex> ShmTransport::Lock(Segment& segment) {
  return std::unique_lock<std::mutex>(segment.mu);
}

std::unique_ptr<ResultSink> ShmTransport::Sink(Segment& segment, ReplySink* reply,
                                               std::vector<const EnvSpec*> specs) {
  return std::make_unique<SegmentSink>(*segment.batch, reply, std::move(specs));
}

protocol::ReplyBody ShmTransport::Publish(Segment& segment, ResultSink& result_sink, bool made,
                                          bool signal, protocol::StepBatchReply reply) {
  auto& sink = static_cast<SegmentSink&>(result_sink);
  ShmBatch& batch = *segment.batch;
  const size_t n = sink.errors_.size();
  // The final rows when an episode ended (rarely: once per episode): the made segment's
  // from its reply's finals; a named segment's ended rows are written, the others' are
  // their rows, copied within the segment.
  const bool has_final = made ? !reply.finals.empty() : sink.any_ended_.load();
  for (size_t i = 0; i < n && has_final; ++i) {
    if (!sink.errors_[i].ok()) continue;
    if (made) {
      sink.errors_[i] = batch.WriteFinal(i, reply.finals[i], *sink.specs_[i]);
    } else if (sink.ended_[i] == 0) {
      batch.CopyRowToFinal(i);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (!sink.errors_[i].ok()) {
      return MakeError(absl::StatusCode::kInternal, "shm",
                       StrCat("sessions[", i, "]: ", sink.errors_[i].message()));
    }
  }
  // A client that named the segment has mapped it: its name goes before the batch is
  // announced (a signalled client may look for it as soon as it is woken).
  if (!made) batch.Unlink();
  if (batch.requests()) batch.ClearError();
  batch.Publish(++segment.seq, has_final,
                static_cast<uint8_t>((sink.any_refused_.load() ? ShmBatch::kSummaryRefused : 0) |
                                     (sink.any_reset_.load() ? ShmBatch::kSummaryReset : 0)));
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
  return reply;
}

void ShmTransport::ServeSegment(const std::shared_ptr<Segment>& segment) {
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
      EraseLocked(segment->handle);
      break;
    }
    uint32_t now = batch.RequestWord();
    if (now == served && watch) {
      watch = false;
      const auto until = published + std::chrono::nanoseconds(kRequestSpinNs);
      // The file's size checked between reads, as before every read (a shrunk file is
      // freed above, never read on).
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

namespace {

// The request copied out of a segment, checked: its autoreset and reset values; the error
// on the segment's array otherwise.
std::optional<Error> CheckRequest(const ShmRequest& req, size_t n) {
  if (req.autoreset > 1) {
    return MakeError(absl::StatusCode::kInvalidArgument, "request_autoreset",
                     StrCat("expected 0 (none) or 1 (same_step), got ", int{req.autoreset}));
  }
  for (size_t i = 0; i < n; ++i) {
    if (req.reset[i] > 1) {
      return MakeError(absl::StatusCode::kInvalidArgument, StrCat("request_reset[", i, "]"),
                       StrCat("expected 0 (step) or 1 (reset), got ", int{req.reset[i]}));
    }
  }
  return std::nullopt;
}

}  // namespace

void ShmTransport::ServeRequest(Segment& segment) {
  requests_.fetch_add(1, std::memory_order_relaxed);
  // A copy: what the client writes from now on changes nothing here.
  ShmRequest& req = segment.copy;
  segment.batch->ReadRequest(req);
  const size_t n = segment.sessions.size();
  std::optional<Error> error = CheckRequest(req, n);
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
    r.shm_signal = true;  // success: published and woken in Publish
    protocol::ReplyBody body;
    try {
      // This thread alone, or with size() - 1 of the pool's (the server's --threads): the
      // way that took less time lately (TwoWays).
      const size_t helpers = pool_ == nullptr ? 0 : static_cast<size_t>(pool_->size() - 1);
      const int way = helpers > 0 ? segment.stepping.Choose() : 0;
      const auto start = std::chrono::steady_clock::now();
      body = run_(r, segment.owner, way == 1 ? helpers : 0, &segment.lock_order);
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

}  // namespace tiergym::env
