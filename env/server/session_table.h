// The server's sessions (the first of the service's three parts, service.h): each holds one
// environment from a provider (env/provider/env_provider.h), an episode flag, its last-use
// time and its owner, the connection that made it. A session's handle is 128 random bits;
// a session of another owner is found exactly as a session that does not exist (NotFound,
// the same message). Limits on sessions, over all owners and per owner, refuse a make with
// ResourceExhausted before the environment is made (Reserve). A session in use is leased
// (Acquire): idle reclamation leaves it alone until the lease ends, which stamps its last
// use. Sessions go when closed, when their owner goes (CloseOwnedBy) or after idle_timeout_s
// without a request (ReclaimIdle); whoever listens (OnErased: the shared-memory transport,
// whose segments belong to their sessions) hears which went. Environments are destroyed
// outside the table's lock.
//
// Thread-safe. A session's environment is driven by one thread at a time: the holder of its
// `mu`.
#ifndef TIERGYM_ENV_SERVER_SESSION_TABLE_H_
#define TIERGYM_ENV_SERVER_SESSION_TABLE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "env/protocol/types.h"
#include "env/provider/env_provider.h"

namespace tiergym::env {

struct SessionTableOptions {
  // Open sessions at most, and of one owner at most. Defaults 4096 and 1024.
  uint64_t max_sessions = 4096;
  uint64_t max_sessions_per_owner = 1024;
  // Sessions unused this long are reclaimed; <= 0 never. Default 600 s.
  double idle_timeout_s = 600;
  // Time source (tests fake it). Default std::chrono::steady_clock::now.
  std::function<std::chrono::steady_clock::time_point()> clock;
};

class SessionTable {
 public:
  struct Session {
    protocol::SessionId id;
    std::string owner;
    std::unique_ptr<SessionEnv> env;
    std::map<std::string, std::string> config;  // every key's value in force, as text
    std::mutex mu;                              // held while the environment is driven
    bool in_episode = false;                    // guarded by mu
    std::atomic<int> users{0};
    std::atomic<int64_t> last_used_ns{0};
  };

  // A session marked in use: ReclaimIdle leaves it alone until the lease ends, which also
  // stamps its last use.
  class Lease {
   public:
    Lease(std::shared_ptr<Session> session, const SessionTable* table);
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    Session* operator->() const { return session_.get(); }
    Session& operator*() const { return *session_; }

   private:
    std::shared_ptr<Session> session_;
    const SessionTable* table_;
  };

  explicit SessionTable(SessionTableOptions options);

  // Counts a make (or a fork: `op`, which the message names) of `owner` as pending;
  // ResourceExhausted (its message saying which limit) when the limits refuse it. Every OK
  // must be followed by Add or Unreserve.
  absl::Status Reserve(const std::string& owner, std::string_view op = "make");
  void Unreserve();
  // Adds a made session, ending its pending make; returns it (its id set).
  std::shared_ptr<Session> Add(std::string owner, std::unique_ptr<SessionEnv> env,
                               std::map<std::string, std::string> config);

  // The session `id` of `owner`, leased; NotFound naming `field` when there is none
  // (unknown and another owner's alike).
  absl::StatusOr<Lease> Acquire(const protocol::SessionId& id, const std::string& owner,
                                std::string_view field) const;
  // Whether the session `id` of `owner` is open (it may go at any time).
  bool Contains(const protocol::SessionId& id, const std::string& owner) const;

  // Closes the session `id` of `owner`; NotFound on "session" when there is none.
  absl::Status Close(const protocol::SessionId& id, const std::string& owner);
  // Closes every session of `owner` (its connection went away); returns how many.
  size_t CloseOwnedBy(std::string_view owner);
  // Closes sessions idle for longer than idle_timeout_s and not in use; returns how many.
  size_t ReclaimIdle();

  // Called (outside the table's lock) with the ids of the sessions removed, however they
  // went. Set before the table is used.
  void OnErased(std::function<void(const std::vector<protocol::SessionId>&)> listener) {
    on_erased_ = std::move(listener);
  }

  uint64_t size() const;
  uint64_t made() const { return made_.load(); }
  uint64_t closed() const { return closed_.load(); }
  uint64_t reclaimed() const { return reclaimed_.load(); }
  std::chrono::steady_clock::time_point Now() const;

 private:
  using Map = std::unordered_map<protocol::SessionId, std::shared_ptr<Session>>;
  // Removes a session (REQUIRES: mu_ held); it goes into `doomed`, to be destroyed and
  // announced outside the lock.
  void EraseLocked(Map::iterator it, std::vector<std::shared_ptr<Session>>& doomed);
  // Announces the sessions removed, then destroys them.
  void Erased(std::vector<std::shared_ptr<Session>> doomed);

  SessionTableOptions options_;
  mutable std::mutex mu_;  // guards sessions_, of_owner_, pending_
  Map sessions_;
  // Open sessions per owner: an owner that goes costs its own sessions, not a scan of every
  // session (4000 connections leaving 32,000 sessions took seconds of the I/O thread).
  std::unordered_map<std::string, std::unordered_set<protocol::SessionId>> of_owner_;
  uint64_t pending_ = 0;  // makes reserved, not yet added
  std::function<void(const std::vector<protocol::SessionId>&)> on_erased_;
  std::atomic<uint64_t> made_{0}, closed_{0}, reclaimed_{0};
};

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_SERVER_SESSION_TABLE_H_
