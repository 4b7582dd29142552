// step_batch results through shared memory (the third of the service's three parts,
// service.h; env/PROTOCOL.md "Shared memory"): one result sink of the batch stepper
// (batch_stepper.h) that owns the segments (shm_batch.h) and the threads serving requests
// written into them.
//
// A segment belongs to the connection that made it and to the sessions of the batch that
// made it; it is freed when any of them goes (SessionsErased, called by the session table)
// or when its file is found shrunk, and its handle, like a session's, means nothing on
// another connection. Its name is unlinked the first time the client names it (it has
// mapped it by then). Segments are bounded per connection and in bytes over all, and charged
// to the provider's memory budget.
//
// A segment made with `requests` also takes requests: the client writes a batch's actions
// and resets into it and bumps its request word, and a thread of that segment (woken by a
// futex, polling every 100 ms for its own closing) steps the batch's sessions through
// RunBatch exactly as a step_batch naming the segment with shm_signal, writing an error into
// the segment instead of a reply. Such threads are bounded over all connections
// (max_shm_request_threads; a segment beyond gets none and its making reply says so) and per
// connection by its segments; a thread ends when its segment is freed or the transport is
// destroyed. Each thread steps a batch alone or with the pool, and waits for the next
// request by sleeping at once or by watching the request word first, whichever was faster
// lately (two_ways.h).
//
// Thread-safe.
#ifndef TIERGYM_ENV_SERVER_SHM_TRANSPORT_H_
#define TIERGYM_ENV_SERVER_SHM_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "env/protocol/protocol.h"
#include "env/provider/env_provider.h"
#include "env/server/batch_stepper.h"
#include "env/server/thread_pool.h"

namespace tiergym::env {

struct ShmTransportOptions {
  // Bytes of segments held at most over all connections, also charged to the provider's
  // memory budget; 0: no shared memory. Default 256 MiB.
  uint64_t max_shm_bytes = uint64_t{256} << 20;
  // Segments one connection holds at most. Default 16.
  uint64_t max_shm_segments_per_connection = 16;
  // Segments taking requests (one thread each) at most; 0: not offered. Default 64.
  uint64_t max_shm_request_threads = 64;
};

class ShmTransport {
 public:
  struct Segment;

  // How a request written into a segment is stepped: the service's step_batch of `owner`
  // with `max_helpers` pool threads and the sessions locked in `lock_order`; the reply (an
  // Error when it was refused).
  using RunBatch = std::function<protocol::ReplyBody(const protocol::StepBatchRequest& request,
                                                     const std::string& owner, size_t max_helpers,
                                                     const std::vector<size_t>* lock_order)>;

  // `budget` (may be null: no budget) and `pool` (may be null) must outlive the transport.
  ShmTransport(ShmTransportOptions options, EnvProvider* budget, ThreadPool* pool, RunBatch run);
  // Frees every segment and waits for their threads.
  ~ShmTransport();
  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;

  // A new segment for a batch of `sessions` (leased; `open` tells whether one is still open)
  // with `spec`; with `requests`, taking later requests when a thread is left. Errors are on
  // the field `shm`: FailedPrecondition (no shared memory), ResourceExhausted (a limit).
  absl::StatusOr<std::shared_ptr<Segment>> Make(
      const std::vector<protocol::SessionId>& sessions, const std::string& owner,
      const EnvSpec& spec, bool requests,
      const std::function<bool(const protocol::SessionId&)>& open);
  // The owner's segment `handle` for `rows` entries of `spec`: NotFound (unknown, another
  // connection's), InvalidArgument (another shape), FailedPrecondition (its file shrunk: it
  // is freed).
  absl::StatusOr<std::shared_ptr<Segment>> Find(const std::string& handle, const std::string& owner,
                                                const EnvSpec& spec, size_t rows);

  // One batch at a time writes a segment: hold this while it does.
  std::unique_lock<std::mutex> Lock(Segment& segment);
  // A sink writing a batch's rows into `segment` (row i of `specs[i]`'s session), and into
  // `reply` too when given (the batch that made the segment: its reply carries the results).
  std::unique_ptr<ResultSink> Sink(Segment& segment, ReplySink* reply,
                                   std::vector<const EnvSpec*> specs);
  // Completes a batch whose rows `sink` wrote: the final rows, the summary, the batch
  // number; with `signal`, the client is woken and no reply is sent (the reply is quiet).
  // `reply` is the made segment's reply (its results), else empty. INTERNAL on "shm" when a
  // row could not be written.
  protocol::ReplyBody Publish(Segment& segment, ResultSink& sink, bool made, bool signal,
                              protocol::StepBatchReply reply);

  // The sessions `ids` went: their segments are freed.
  void SessionsErased(const std::vector<protocol::SessionId>& ids);

  uint64_t segments() const;
  uint64_t bytes() const { return bytes_.load(); }
  uint64_t request_threads() const { return request_threads_.load(); }
  // Requests served through segments, and how many of them failed (the service's stats
  // count them as step_batch requests).
  uint64_t requests() const { return requests_.load(); }
  uint64_t errors() const { return errors_.load(); }

 private:
  struct Waiter;
  // Frees a segment (REQUIRES: mu_ held): its thread, if any, ends.
  void EraseLocked(const std::string& handle);
  // Counts a new segment of `owner` and its bytes against the limits (under mu_); returns
  // its bytes and whether it takes requests.
  absl::StatusOr<std::pair<uint64_t, bool>> Reserve(const std::string& owner, const EnvSpec& spec,
                                                    size_t rows, bool requests);
  void Unreserve(const std::string& owner, bool requests);
  // Starts the thread of a segment taking requests.
  void StartThread(const std::shared_ptr<Segment>& segment);
  // The thread of a segment that takes requests: serves them until it is freed.
  void ServeSegment(const std::shared_ptr<Segment>& segment);
  // One request written into `segment`: its batch stepped, or its error written there.
  void ServeRequest(Segment& segment);
  // Joins the threads that ended (all of them with `all`, after closing their segments).
  void ReapWaiters(bool all);

  ShmTransportOptions options_;
  EnvProvider* budget_;
  ThreadPool* pool_;
  RunBatch run_;
  mutable std::mutex mu_;  // guards segments_, of_owner_, of_session_
  std::unordered_map<std::string, std::shared_ptr<Segment>> segments_;
  std::unordered_map<std::string, uint64_t> of_owner_;  // held or being made
  std::unordered_map<protocol::SessionId, std::vector<std::string>> of_session_;
  std::atomic<uint64_t> bytes_{0};  // held and being made
  std::mutex waiters_mu_;
  std::vector<std::unique_ptr<Waiter>> waiters_;  // guarded by waiters_mu_
  std::atomic<uint64_t> request_threads_{0};      // running or reserved (counted under mu_)
  std::atomic<uint64_t> requests_{0}, errors_{0};
};

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_SERVER_SHM_TRANSPORT_H_
