// N environments in one process, stepped together on a small thread pool, their results
// written straight into caller-provided arrays: the in-process counterpart of the server's
// step_batch (env/server/batch_stepper.cc), for a learner that links the environment (the Python
// extension tiergym._core, env/python/_core/) instead of talking to `tiergym serve`.
//
// Same semantics as step_batch, so that the same seeds and actions give bit-identical
// episodes on both paths:
//   - Reset(mask, seeds, profiles) resets the environments of the mask (all when it is
//     empty), each with its seed (none: the environment's generator goes on) and profile.
//   - Autoreset kNextStep: the step after an episode ended resets that environment
//     (Reset(no seed, no options)), ignores its action and returns the reset's observation
//     and info with reward 0 and no flags. kSameStep: the step that ends an episode resets
//     at once; its row holds the step's reward and flags with the reset's observation and
//     info, and the final buffers the ended step's observation and info (rows of the
//     environments that did not end hold their current row, as the server sends them).
//     kDisabled: nothing resets by itself; stepping an environment whose episode ended is
//     FailedPrecondition (reset it with a mask).
//   - Actions are checked whole before anything moves: a bad one fails the call with an
//     InvalidArgument naming actions[i] (or actions[i][r]) and nothing steps.
//
// Two ways of stepping:
//   - Step(actions, out): every environment, rows in environment order, returns when done.
//   - Send(env_ids, actions) then Recv(batch, out): EnvPool's asynchronous stepping. Send
//     queues the environments' steps and returns; Recv returns the first `batch`
//     environments whose step finished, in the order they finished, with out.env_id
//     saying which row is which. An environment may be sent again once received.
//     Reset and Step are refused (FailedPrecondition) while sent steps are not all received.
// With `threads` T the calling thread and T - 1 workers step (as the server's ParallelFor);
// with T = 1 everything runs on the calling thread, in Step or in Recv.
//
// Thread-compatible: one caller at a time (the Python wrapper holds it per object).
#ifndef TIERGYM_ENV_VECTOR_VECTOR_ENV_H_
#define TIERGYM_ENV_VECTOR_VECTOR_ENV_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "env/provider/env_provider.h"
#include "env/spec/env_spec.h"
#include "env/spec/info_columns.h"

namespace tiergym::env {

enum class AutoresetMode { kNextStep, kSameStep, kDisabled };

// A call's step infos are written column-wise into InfoColumns (env/spec/step_info.h,
// generated with StepInfo from the protocol's declaration): row i of every array belongs
// to row i of the batch; widths as InfoShapeOf(spec()) gives them (env/spec/info_columns.h);
// profile holds the index into EnvSpec::profiles.

// Where a call writes its rows (num_envs rows each; Recv fills the first `batch`). All
// pointers must be set, final_* and ended included (they are written only in kSameStep
// mode, when an episode ended in the call; `*any_ended` says whether one did).
struct BatchOutput {
  float* obs = nullptr;  // rows * ObsSize()
  double* reward = nullptr;
  uint8_t* terminated = nullptr;
  uint8_t* truncated = nullptr;
  int32_t* env_id = nullptr;  // which environment a row is
  InfoColumns info;
  uint8_t* ended = nullptr;    // kSameStep: this row's episode ended (final_* hold it)
  float* final_obs = nullptr;  // rows * ObsSize()
  InfoColumns final_info;
  bool* any_ended = nullptr;
  // Optional (may be null): whether a row of the call has a refused move, and whether an
  // environment of the call was reset (its profile may have changed).
  bool* any_refused = nullptr;
  bool* any_reset = nullptr;
};

struct VectorEnvOptions {
  AutoresetMode autoreset = AutoresetMode::kNextStep;
  // Threads stepping, the caller's included. Default 1.
  int threads = 1;
};

class VectorEnv {
 public:
  // REQUIRES: envs non-empty, of one shape (same observation size, action space, tiers and
  // regions; InvalidArgument otherwise), options.threads >= 1.
  static absl::StatusOr<std::unique_ptr<VectorEnv>> Create(
      std::vector<std::unique_ptr<SessionEnv>> envs, VectorEnvOptions options);
  ~VectorEnv();
  VectorEnv(const VectorEnv&) = delete;
  VectorEnv& operator=(const VectorEnv&) = delete;

  const EnvSpec& spec() const { return spec_; }
  int num_envs() const { return static_cast<int>(slots_.size()); }
  int threads() const { return threads_; }
  size_t ObsSize() const;
  // Values of one action: num_regions in placement mode, 1 in move mode.
  size_t ActionSize() const;
  // Values of one action mask: num_regions rows of the action's choices (placement mode:
  // tiers; keep mode: 1 + tiers); move mode: num_regions * tiers + 1.
  size_t MaskSize() const;

  // Resets the environments i with mask[i] != 0 (every one when mask is empty), writing
  // row i of out for each (the other rows are left as they are). seeds and profiles have
  // num_envs entries or none: seeds[i] reseeds environment i (nullopt: its generator goes
  // on), profiles[i] picks its profile by name or index (nullopt: the usual draw). Errors
  // name the environment; rows of environments reset before an error hold their new
  // episode.
  absl::Status Reset(const std::vector<uint8_t>& mask,
                     const std::vector<std::optional<uint64_t>>& seeds,
                     const std::vector<std::optional<std::string>>& profiles,
                     const BatchOutput& out);

  // Steps every environment; actions holds num_envs * ActionSize() values.
  absl::Status Step(const int64_t* actions, size_t num_values, const BatchOutput& out);

  // Queues the steps of env_ids (distinct, none in flight) with their actions
  // (env_ids.size() * ActionSize() values).
  absl::Status Send(const std::vector<int32_t>& env_ids, const int64_t* actions, size_t num_values);
  // Queues the reset of every environment (as Reset, none in flight): Recv returns the
  // first observations, as it returns steps (EnvPool's async_reset).
  absl::Status SendReset(const std::vector<std::optional<uint64_t>>& seeds,
                         const std::vector<std::optional<std::string>>& profiles);
  // Waits for `batch` finished steps (1 <= batch <= steps in flight) and writes them.
  absl::Status Recv(int batch, const BatchOutput& out);
  // Steps sent and not yet received.
  int in_flight() const { return in_flight_; }

  // A new vector environment of env_ids.size() environments with this one's options:
  // environment k is a fork (SessionEnv::Fork, charged to `maker`'s budget; null: none)
  // of environment env_ids[k] (an id may repeat: several copies) at its state, its episode
  // and whether it runs or resets at its next step included, so that the same actions give
  // the fork and the original bit-identical results (the results are not kept after they
  // are written: CopyRows gives the forks their current rows). FailedPrecondition while
  // steps are in flight; InvalidArgument for an id out of range; the forks' errors
  // (ResourceExhausted, Unimplemented) name the environment.
  absl::StatusOr<std::unique_ptr<VectorEnv>> Fork(const std::vector<int32_t>& env_ids,
                                                  EnvProvider* maker) const;
  // Copies rows ids[k] of `from` (outputs of this environment's Reset or Step, whose rows
  // are its environments) into rows k of `to` (a fork's buffers): observation, reward,
  // flags and info.
  void CopyRows(const BatchOutput& from, const std::vector<int32_t>& ids,
                const BatchOutput& to) const;

 private:
  struct Slot;
  VectorEnv(std::vector<std::unique_ptr<SessionEnv>> envs, VectorEnvOptions options);
  // InvalidArgument unless v has 0 or num_envs entries.
  absl::Status CheckPerEnv(size_t size, const char* name) const;
  // Copies entry k of `actions` into the action of slot slot_of(k) (k < count) and checks
  // it with the one action check (env/spec/action_check.h) on field "actions[k]"; the slots
  // then step with StepPrechecked. `env_ids` (Send) names the environment in the message.
  absl::Status StageActions(const int64_t* actions, size_t count,
                            const std::vector<int32_t>* env_ids);
  // Sets s.started and s.reset_next after s.result came from a reset.
  void AfterReset(Slot& s) const;
  // Steps (or autoresets) slot i with the action in slot.action; fills slot.result.
  void RunSlot(size_t i);
  // Copies slot i's results into `row` of out.
  void WriteRow(size_t i, size_t row, const BatchOutput& out) const;
  // Sets out's any_* flags for the environments `ids` written to rows 0, 1, ...
  void Summarize(const std::vector<int32_t>* ids, size_t rows, const BatchOutput& out) const;
  // Runs body(0..n-1) on the calling thread and the workers.
  void ParallelFor(size_t n, void (*body)(VectorEnv*, size_t, const void*), const void* arg);
  void WorkerLoop();

  VectorEnvOptions options_;
  EnvSpec spec_;
  InfoShape info_shape_;  // InfoShapeOf(spec_)
  int threads_ = 1;
  std::vector<std::unique_ptr<Slot>> slots_;
  int in_flight_ = 0;  // touched by the caller only

  // The work the workers share: a parallel loop, or queued steps.
  struct Loop;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  bool stopping_ = false;       // guarded by mu_
  std::shared_ptr<Loop> loop_;  // the ParallelFor running, if any; guarded by mu_
  std::deque<int32_t> queue_;   // sent, not started; guarded by mu_
  std::deque<int32_t> ready_;   // finished, not received; guarded by mu_
  std::vector<std::thread> workers_;
};

// Arrays that own a call's outputs for `env` (num_envs rows), with a BatchOutput pointing
// into them: for callers that bring no arrays of their own (tiergym._core, tests). Info
// columns start at their fill values (InfoStorage: profile and refused_regions at -1), env_id
// at 0, 1, 2, ..., the rest at 0. Not copyable or movable: `out` points into it.
struct BatchBuffers {
  explicit BatchBuffers(const VectorEnv& env);
  BatchBuffers(const BatchBuffers&) = delete;
  BatchBuffers& operator=(const BatchBuffers&) = delete;

  std::vector<float> obs, final_obs;
  std::vector<double> reward;
  std::vector<uint8_t> terminated, truncated, ended;
  std::vector<int32_t> env_id;
  InfoStorage info, final_info;
  bool any_ended = false, any_refused = false, any_reset = false;
  BatchOutput out;
};

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_VECTOR_VECTOR_ENV_H_
