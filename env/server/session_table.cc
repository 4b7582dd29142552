#include "env/server/session_table.h"

#include <utility>

#include "env/server/random_id.h"
#include "traces/base/strings.h"

namespace tiergym::env {

SessionTable::Lease::Lease(std::shared_ptr<Session> session, const SessionTable* table)
    : session_(std::move(session)), table_(table) {}

SessionTable::Lease::Lease(Lease&& other) noexcept
    : session_(std::move(other.session_)), table_(other.table_) {}

SessionTable::Lease::~Lease() {
  if (session_ == nullptr) return;
  session_->last_used_ns.store(table_->Now().time_since_epoch().count());
  session_->users.fetch_sub(1);
}

SessionTable::SessionTable(SessionTableOptions options) : options_(std::move(options)) {}

std::chrono::steady_clock::time_point SessionTable::Now() const {
  return options_.clock ? options_.clock() : std::chrono::steady_clock::now();
}

absl::Status SessionTable::Reserve(const std::string& owner, std::string_view op) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sessions_.size() + pending_ >= options_.max_sessions) {
    return absl::ResourceExhaustedError(StrCat(
        op, " refused: ", sessions_.size(),
        " sessions open, the server's limit (--max-sessions); close sessions you no longer use"));
  }
  auto mine = of_owner_.find(owner);
  if (mine != of_owner_.end() && mine->second.size() >= options_.max_sessions_per_owner) {
    return absl::ResourceExhaustedError(
        StrCat(op, " refused: this connection has ", mine->second.size(),
               " sessions open, the server's limit per connection "
               "(--max-sessions-per-connection); close sessions you no longer use"));
  }
  ++pending_;
  return absl::OkStatus();
}

void SessionTable::Unreserve() {
  std::lock_guard<std::mutex> lock(mu_);
  --pending_;
}

std::shared_ptr<SessionTable::Session> SessionTable::Add(
    std::string owner, std::unique_ptr<SessionEnv> env, std::map<std::string, std::string> config) {
  auto session = std::make_shared<Session>();
  session->owner = std::move(owner);
  session->env = std::move(env);
  session->config = std::move(config);
  session->last_used_ns.store(Now().time_since_epoch().count());
  std::lock_guard<std::mutex> lock(mu_);
  --pending_;
  do {
    session->id = RandomHex128();
  } while (sessions_.count(session->id) != 0);
  of_owner_[session->owner].insert(session->id);
  sessions_.emplace(session->id, session);
  made_.fetch_add(1, std::memory_order_relaxed);
  return session;
}

namespace {

std::string NoSuchSession(double idle_timeout_s) {
  return StrCat("no such session on this connection (never made here, closed, or reclaimed after ",
                idle_timeout_s, " s idle or when the connection that made it closed)");
}

}  // namespace

absl::StatusOr<SessionTable::Lease> SessionTable::Acquire(const protocol::SessionId& id,
                                                          const std::string& owner,
                                                          std::string_view field) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(id);
  // Another connection's session is not found either: the same answer, the same work.
  if (it == sessions_.end() || it->second->owner != owner) {
    return absl::NotFoundError(StrCat(field, ": ", NoSuchSession(options_.idle_timeout_s)));
  }
  it->second->users.fetch_add(1);
  return Lease(it->second, this);
}

bool SessionTable::Contains(const protocol::SessionId& id, const std::string& owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(id);
  return it != sessions_.end() && it->second->owner == owner;
}

void SessionTable::EraseLocked(Map::iterator it, std::vector<std::shared_ptr<Session>>& doomed) {
  auto owner = of_owner_.find(it->second->owner);
  if (owner != of_owner_.end()) {
    owner->second.erase(it->first);
    if (owner->second.empty()) of_owner_.erase(owner);
  }
  doomed.push_back(std::move(it->second));
  sessions_.erase(it);
}

void SessionTable::Erased(std::vector<std::shared_ptr<Session>> doomed) {
  if (doomed.empty()) return;
  if (on_erased_) {
    std::vector<protocol::SessionId> ids;
    ids.reserve(doomed.size());
    for (const auto& s : doomed) ids.push_back(s->id);
    on_erased_(ids);
  }
  doomed.clear();  // environments destroyed here, outside the lock
}

absl::Status SessionTable::Close(const protocol::SessionId& id, const std::string& owner) {
  std::vector<std::shared_ptr<Session>> doomed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end() || it->second->owner != owner) {
      return absl::NotFoundError(NoSuchSession(options_.idle_timeout_s));
    }
    EraseLocked(it, doomed);
  }
  Erased(std::move(doomed));
  closed_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

size_t SessionTable::CloseOwnedBy(std::string_view owner) {
  std::vector<std::shared_ptr<Session>> doomed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto mine = of_owner_.find(std::string(owner));
    if (mine == of_owner_.end()) return 0;
    const std::vector<protocol::SessionId> ids(mine->second.begin(), mine->second.end());
    for (const protocol::SessionId& id : ids) {
      auto it = sessions_.find(id);
      if (it != sessions_.end()) EraseLocked(it, doomed);  // (erases `mine` with its last)
    }
  }
  const size_t n = doomed.size();
  reclaimed_.fetch_add(n, std::memory_order_relaxed);
  Erased(std::move(doomed));
  return n;
}

size_t SessionTable::ReclaimIdle() {
  if (options_.idle_timeout_s <= 0) return 0;
  const int64_t now = Now().time_since_epoch().count();
  const auto timeout =
      static_cast<int64_t>(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(options_.idle_timeout_s))
                               .count());
  std::vector<std::shared_ptr<Session>> doomed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      auto next = std::next(it);
      const Session& s = *it->second;
      if (s.users.load() == 0 && now - s.last_used_ns.load() > timeout) EraseLocked(it, doomed);
      it = next;
    }
  }
  const size_t n = doomed.size();
  reclaimed_.fetch_add(n, std::memory_order_relaxed);
  Erased(std::move(doomed));
  return n;
}

uint64_t SessionTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

}  // namespace tiergym::env
