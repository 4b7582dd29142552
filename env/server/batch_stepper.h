// A step_batch's entries stepped (the second of the service's three parts, service.h): each
// leased, locked session stepped or reset as the request says, in parallel on the thread
// pool, and each row handed to a result sink from the thread that stepped it. Two sinks: the
// reply (ReplySink, here) and a shared-memory segment (env/server/shm_transport.h).
//
// Autoreset same_step: the step that ends an episode resets it at once (no seed, no
// options); the row holds the step's reward and flags with the reset's observation and info,
// and the sink also gets the ended step's result.
//
// Thread-compatible: Run may be called from several threads at once (for different
// sessions).
#ifndef TIERGYM_ENV_SERVER_BATCH_STEPPER_H_
#define TIERGYM_ENV_SERVER_BATCH_STEPPER_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "env/protocol/protocol.h"
#include "env/provider/env_provider.h"
#include "env/server/thread_pool.h"

namespace tiergym::env {

// Where a batch's rows go.
class ResultSink {
 public:
  virtual ~ResultSink() = default;
  // Row i: `result` (after the step or the reset), `was_reset`, and `ended` (same_step: the
  // result of the step that ended the episode; null otherwise). Called once per row, from
  // the thread that stepped it (rows in parallel); the sink may take the results (move).
  virtual void Row(size_t i, StepResult& result, bool was_reset, StepResult* ended) = 0;
};

// The rows into a step_batch reply.
class ReplySink : public ResultSink {
 public:
  explicit ReplySink(size_t rows);
  void Row(size_t i, StepResult& result, bool was_reset, StepResult* ended) override;
  // Whether an episode ended (same_step).
  bool any_ended() const;
  // The reply: results and was_reset per row; with an ended episode, finals for every row
  // (the ended step's result, or a copy of the row where it did not end).
  protocol::StepBatchReply Take();

 private:
  protocol::StepBatchReply reply_;
  std::vector<StepResult> finals_;
  std::vector<uint8_t> ended_;
};

class BatchStepper {
 public:
  // A batch's session: its environment and episode flag (the caller holds its lock).
  struct Entry {
    SessionEnv* env = nullptr;
    bool* in_episode = nullptr;
  };

  // `pool` may be null (every entry on the calling thread).
  explicit BatchStepper(ThreadPool* pool) : pool_(pool) {}

  // Steps or resets every entry of `r` (its actions checked already: the one check of
  // env/spec/action_check.h, before anything moves), rows to `sink`; max_helpers pool
  // threads help (ThreadPool::ParallelFor). Returns each entry's error (OK when it went).
  std::vector<absl::Status> Run(const protocol::StepBatchRequest& r,
                                const std::vector<Entry>& entries, ResultSink& sink,
                                size_t max_helpers) const;

 private:
  // One entry: its row to the sink, or its error.
  absl::Status StepOne(const protocol::StepBatchRequest& r, size_t i, const Entry& e,
                       ResultSink& sink) const;

  ThreadPool* pool_;
};

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_SERVER_BATCH_STEPPER_H_
