// The session manager: answers protocol requests (env/PROTOCOL.md), one payload in, one
// reply payload out, without sockets. It dispatches; three parts do the work:
//   - the session table (session_table.h): sessions, their owners and leases, the limits on
//     them, idle reclamation;
//   - the batch stepper (batch_stepper.h): a step_batch's leased sessions stepped in
//     parallel on the ThreadPool, each row into a result sink;
//   - the shared-memory transport (shm_transport.h): one such sink, owning its segments
//     and the threads serving requests written into them.
// Environments come from providers (env/provider/env_provider.h), by environment id: the
// placement environments (`provider`, tiergym/TierPlacement-v0) and, when served, the
// co-scheduling nodes (ServiceOptions::cosched, tiergym/CoschedNode-v0), a kind of
// environment whose sessions step all their tenants at once: `make`, `reset` and `step`
// (with `actions`, one per tenant) drive them; `cosched_make`, `cosched_reset` and
// `cosched_step`, their older spelling, still work in this protocol version.
//
// Every malformed or wrong request gets an error reply naming the field, and nothing a
// client sends can disturb another session; a session's handle means nothing on another
// connection. Limits on sessions, message size and batch size give RESOURCE_EXHAUSTED.
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
#include <vector>

#include "env/protocol/protocol.h"
#include "env/provider/env_provider.h"
#include "env/server/batch_stepper.h"
#include "env/server/session_table.h"
#include "env/server/shm_transport.h"
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
  // Co-scheduling nodes (env/provider/cosched_provider.h), made with the id kCoschedEnvId;
  // null: not served (make names it unknown, the cosched_* ops are UNIMPLEMENTED). Their
  // sessions count against the same limits as make's. Default null.
  std::shared_ptr<EnvProvider> cosched;
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
  uint64_t ShmRequestThreads() const { return shm_.request_threads(); }

 private:
  using Lease = SessionTable::Lease;
  // Which sessions a request may drive.
  enum class Kind { kSingle, kNode, kAny };

  protocol::ReplyBody Dispatch(const protocol::Request& request, const std::string& owner);
  protocol::ReplyBody Hello() const;
  protocol::ReplyBody List() const;
  protocol::ReplyBody Make(const protocol::MakeRequest& r, const std::string& owner);
  protocol::ReplyBody Reset(const protocol::ResetRequest& r, const std::string& owner,
                            Kind kind = Kind::kAny);
  protocol::ReplyBody Step(const protocol::StepRequest& r, const std::string& owner,
                           Kind kind = Kind::kAny);
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

  // The provider of environment `env`, or null.
  EnvProvider* ProviderOf(std::string_view env) const;
  // A new session of `provider` from `config` (its keys checked, the limits reserved).
  absl::StatusOr<std::shared_ptr<SessionTable::Session>> MakeSession(
      EnvProvider& provider, const protocol::ConfigMap& config, const std::string& owner);
  // The session `id` of `owner`, leased; NotFound naming `field` when there is none,
  // FailedPrecondition when it is not of `kind`.
  absl::StatusOr<Lease> Acquire(const protocol::SessionId& id, const std::string& owner,
                                std::string_view field, Kind kind) const;
  // A step_batch's parts (StepBatch): its sessions leased (each once, single
  // environments), of one shape, locked in id order and checked before anything moves.
  absl::StatusOr<std::vector<Lease>> LeaseBatch(const protocol::StepBatchRequest& r,
                                                const std::string& owner, bool distinct) const;
  absl::Status CheckBatch(const std::vector<Lease>& leases) const;
  protocol::ReplyBody RunBatch(const protocol::StepBatchRequest& r, const std::string& owner,
                               std::vector<Lease>& leases, size_t max_helpers);
  std::chrono::steady_clock::time_point Now() const;

  ServiceOptions options_;
  std::shared_ptr<EnvProvider> provider_;
  ThreadPool* pool_;
  const std::chrono::steady_clock::time_point start_;
  SessionTable sessions_;
  BatchStepper stepper_;
  ShmTransport shm_;  // after sessions_: its segments go before the sessions they belong to

  std::atomic<uint64_t> requests_{0}, errors_{0}, replies_dropped_{0};
  std::array<std::atomic<uint64_t>, protocol::kNumOps> ops_{};
};

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_SERVER_SERVICE_H_
