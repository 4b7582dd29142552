// The session manager: answers protocol requests (env/PROTOCOL.md), one payload in, one
// reply payload out, without sockets.
//
// A Service owns the sessions: each holds one environment from the EnvProvider (which
// loads profiles once per distinct configuration and shares them read-only), an episode
// flag, its last-use time and its owner: the connection that made it. A session's handle
// is 128 random bits; a request naming a session of another owner fails exactly as one
// naming no session at all. Sessions are reclaimed after `idle_timeout_s` without a
// request (ReclaimIdle, called periodically by the server loop) and when their owner's
// connection goes away (CloseSessionsOf). Limits on sessions,
// message size and batch size give RESOURCE_EXHAUSTED replies; every malformed or wrong
// request gets an error reply naming the field, and nothing a client sends can disturb
// another session. step_batch runs its entries on the ThreadPool.
//
// Shared memory: a step_batch may ask for its results in a POSIX shared-memory segment
// (shm_batch.h) instead of the reply. A segment belongs to the connection that made it and
// to the sessions of the batch that made it; it is freed when any of them is closed or
// reclaimed (so when its connection goes), and its handle, like a session's, means nothing
// on another connection. Its name is unlinked the first time the client names it (it has
// mapped it by then). Segments are bounded per connection and in bytes over all, and
// charged to the provider's memory budget.
//
// A segment made with shm_requests also takes requests: the client writes a batch's actions
// and resets into it and bumps its request word, and a server thread of that segment (woken
// by a futex, polling every 100 ms for its own closing) steps the batch's sessions on the
// ThreadPool exactly as a step_batch naming the segment with shm_signal, writing an error
// into the segment instead of a reply. Such threads are bounded over all connections
// (max_shm_request_threads; a segment beyond gets none and its making reply says so) and
// per connection by its segments; a thread ends when its segment is freed (its sessions
// closed, its connection gone, its file shrunk) or the Service is destroyed.
//
// Thread-safety: Handle() and ReclaimIdle() may be called from any number of threads.
// Requests on one session are serialised by a per-session lock; requests on different
// sessions run in parallel. Handle() never throws (exceptions from below become INTERNAL
// or RESOURCE_EXHAUSTED replies).
#ifndef TIERGYM_ENV_SERVER_SERVICE_H_
#define TIERGYM_ENV_SERVER_SERVICE_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "env/protocol/protocol.h"
#include "env/provider/cosched_provider.h"
#include "env/provider/env_provider.h"
#include "env/server/thread_pool.h"

namespace tiergym::env {

struct ServiceOptions {
  // Reported by hello. Default "tiergym".
  std::string server_name = "tiergym";
  // Open sessions at most. Default 4096.
  uint64_t max_sessions = 4096;
  // Open sessions of one owner (connection) at most. Default 1024.
  uint64_t max_sessions_per_connection = 1024;
  // Reported by hello: the server's limits on requests outstanding per connection and
  // on asset memory (the server and the provider enforce them). Default 64 and 0.
  uint64_t max_pending_per_connection = 64;
  uint64_t max_asset_bytes = 0;
  // Sessions unused this long are closed; <= 0 never. Default 600 s.
  double idle_timeout_s = 600;
  // Request payloads larger than this are refused. Default 64 MiB.
  uint64_t max_message_bytes = 64ull << 20;
  // Entries per step_batch. Default 65536.
  uint64_t max_batch = 65536;
  // Shared memory for step_batch results (PROTOCOL.md "Shared memory"): bytes of segments
  // held at most over all connections, also charged to the provider's memory budget; 0: no
  // shared memory. Default 256 MiB.
  uint64_t max_shm_bytes = uint64_t{256} << 20;
  // Segments one connection holds at most. Default 16.
  uint64_t max_shm_segments_per_connection = 16;
  // Segments taking requests (one thread each) at most over all connections; 0: not
  // offered. Default 64.
  uint64_t max_shm_request_threads = 64;
  // Co-scheduling nodes (the cosched_* ops); null: those ops are refused (UNIMPLEMENTED).
  // Their sessions count against the same limits as make's. Default null.
  std::shared_ptr<CoschedProvider> cosched;
  // Time source (tests fake it). Default std::chrono::steady_clock::now.
  std::function<std::chrono::steady_clock::time_point()> clock;
};

class Service {
 public:
  // REQUIRES: provider and pool outlive nothing: both are kept (pool by pointer, must
  // outlive the Service).
  Service(ServiceOptions options, std::shared_ptr<EnvProvider> provider, ThreadPool* pool);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // The reply to one request payload from `owner` (the connection it came on; "" for
  // in-process callers). Empty: no reply is to be sent (a step_batch with shm_signal that
  // succeeded: the segment's seq word told the client).
  std::string Handle(std::string_view payload, std::string_view owner = {});

  // Closes every session of `owner` (its connection went away); returns how many.
  size_t CloseSessionsOf(std::string_view owner);

  // Closes sessions idle for longer than idle_timeout_s and not in use; returns how many.
  size_t ReclaimIdle();

  protocol::StatsReply Stats() const;
  // A reply the server could not deliver (the connection did not read its replies).
  void CountDroppedReply() { replies_dropped_.fetch_add(1, std::memory_order_relaxed); }
  const ServiceOptions& options() const { return options_; }
  // Threads serving segments' requests now (tests).
  uint64_t ShmRequestThreads() const { return request_threads_.load(); }

 private:
  struct Session;
  struct Segment;
  struct Waiter;
  class Lease;

  protocol::ReplyBody Dispatch(const protocol::Request& request, const std::string& owner);
  protocol::ReplyBody Hello() const;
  protocol::ReplyBody List() const;
  protocol::ReplyBody Make(const protocol::MakeRequest& r, const std::string& owner);
  protocol::ReplyBody Reset(const protocol::ResetRequest& r, const std::string& owner);
  protocol::ReplyBody Step(const protocol::StepRequest& r, const std::string& owner);
  // max_helpers: pool threads that help step the entries (a segment's request thread, not
  // of the pool, stands for one of them). lock_order: the sessions are known distinct and
  // locked in this order (a segment's, computed once); null: checked and sorted here.
  protocol::ReplyBody StepBatch(const protocol::StepBatchRequest& r, const std::string& owner,
                                size_t max_helpers = SIZE_MAX,
                                const std::vector<size_t>* lock_order = nullptr);
  protocol::ReplyBody Estimate(const protocol::EstimateRequest& r, const std::string& owner);
  protocol::ReplyBody Close(const protocol::CloseRequest& r, const std::string& owner);
  // A new session of `owner` at the state of its session r.session (SessionEnv::Fork),
  // under the session limits and charged to the provider's budget like a made session.
  protocol::ReplyBody Fork(const protocol::ForkRequest& r, const std::string& owner);
  protocol::ReplyBody CoschedMake(const protocol::CoschedMakeRequest& r, const std::string& owner);
  protocol::ReplyBody CoschedReset(const protocol::CoschedResetRequest& r,
                                   const std::string& owner);
  protocol::ReplyBody CoschedStep(const protocol::CoschedStepRequest& r, const std::string& owner);

  // The session `id` of `owner`, marked in use until the lease ends; NotFound naming
  // `field` when there is none (unknown and not the owner's alike); FailedPrecondition
  // when it is a co-scheduling node and `node` is false, or the other way round.
  absl::StatusOr<Lease> Acquire(const protocol::SessionId& id, const std::string& owner,
                                std::string_view field, bool node = false);
  // Counts a make (or a fork: `op`) of `owner` as pending, or the error when the session
  // limits refuse it.
  std::optional<protocol::Error> ReserveMake(const std::string& owner,
                                             std::string_view op = "make");
  // Adds a made session (its id set here), ending its pending make (REQUIRES: mu_ held).
  void AddSessionLocked(std::shared_ptr<Session> session);
  // Removes a session from the table, and the segments made with it (REQUIRES: mu_ held).
  void EraseLocked(std::unordered_map<protocol::SessionId, std::shared_ptr<Session>>::iterator it);
  void EraseSegmentLocked(const std::string& handle);
  // The segment a batch of `sessions` (leased) with spec `spec` writes to: a new one, or
  // the owner's `handle` if its shape fits; errors on the field `shm`.
  // With `requests` (the request's shm_requests), the segment takes later requests when a
  // thread is left for it (max_shm_request_threads).
  absl::StatusOr<std::shared_ptr<Segment>> NewSegment(
      const std::vector<protocol::SessionId>& sessions, const std::string& owner,
      const EnvSpec& spec, bool requests);
  // The thread of a segment that takes requests: waits for them and serves them until the
  // segment is freed.
  void ServeSegment(const std::shared_ptr<Segment>& segment);
  // One request written into `segment`: its batch stepped, or its error written there.
  void ServeRequest(Segment& segment);
  // Joins the request threads that ended (all of them with `all`, after closing them).
  void ReapWaiters(bool all);
  // Completes a batch's results in its segment (the rows are written, `errors` per row;
  // the final rows are written here from reply.finals) and turns `reply` into the reply
  // that says so. With `ended` (same_step, an episode ended, the results already freed),
  // the rows of the entries whose episode ended have their final rows written and the
  // others' final rows are copied from their rows. `any_refused`: a row has refused
  // regions (the segment's summary). With `signal` (the request's
  // shm_signal), the client is woken through the segment and no reply is sent (reply.quiet).
  protocol::ReplyBody WriteToSegment(Segment& segment, bool made, bool signal,
                                     const std::vector<Lease>& leases,
                                     std::vector<absl::Status>& errors,
                                     protocol::StepBatchReply& reply,
                                     const std::vector<uint8_t>* ended, bool any_refused);
  absl::StatusOr<std::shared_ptr<Segment>> FindSegment(const std::string& handle,
                                                       const std::string& owner,
                                                       const EnvSpec& spec, size_t rows);
  // Checks a configuration's keys against the provider's; fills defaults for the reply.
  absl::Status CheckConfigKeys(const protocol::ConfigMap& config) const;
  std::chrono::steady_clock::time_point Now() const;

  ServiceOptions options_;
  std::shared_ptr<EnvProvider> provider_;
  ThreadPool* pool_;
  const std::chrono::steady_clock::time_point start_;

  // guards sessions_, sessions_of_, pending_makes_, segments_, segments_of_ and each
  // session's `segments`
  mutable std::mutex mu_;
  std::unordered_map<protocol::SessionId, std::shared_ptr<Session>> sessions_;
  // Open sessions per owner: a connection that goes costs its own sessions, not a scan of
  // every session (4000 connections leaving 32,000 sessions took seconds of the I/O thread).
  std::unordered_map<std::string, std::unordered_set<protocol::SessionId>> sessions_of_;
  uint64_t pending_makes_ = 0;
  // Shared-memory segments by handle, and how many each owner holds (or is making).
  std::atomic<uint64_t> shm_bytes_{0};  // held and being made (before the segments: they
                                        // give their bytes back when destroyed)
  std::unordered_map<std::string, std::shared_ptr<Segment>> segments_;
  std::unordered_map<std::string, uint64_t> segments_of_;
  // Threads serving segments' requests (guarded by waiters_mu_) and how many run or are
  // reserved (counted under mu_).
  std::mutex waiters_mu_;
  std::vector<std::unique_ptr<Waiter>> waiters_;
  std::atomic<uint64_t> request_threads_{0};

  std::atomic<uint64_t> sessions_made_{0}, sessions_closed_{0}, sessions_reclaimed_{0};
  std::atomic<uint64_t> requests_{0}, errors_{0}, replies_dropped_{0};
  std::array<std::atomic<uint64_t>, protocol::kNumOps> ops_{};
};

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_SERVER_SERVICE_H_
