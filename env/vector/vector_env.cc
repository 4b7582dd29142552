#include "env/vector/vector_env.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "env/spec/action_check.h"
#include "traces/base/field_status.h"
#include "traces/base/strings.h"

namespace tiergym::env {

struct VectorEnv::Slot {
  std::unique_ptr<SessionEnv> env;
  Action action;
  bool started = false;     // an episode is running (kDisabled: and has not ended)
  bool reset_next = false;  // kNextStep: the last step ended an episode
  bool in_flight = false;   // sent, not received
  bool reset_sent = false;  // SendReset: the run resets with reset_seed, reset_options
  std::optional<uint64_t> reset_seed;
  ResetOptions reset_options;
  // The last run's outcome.
  StepResult result;
  StepResult final;  // kSameStep: the ended step's, when ended
  bool ended = false;
  bool was_reset = false;  // the run reset the environment
  absl::Status error;
};

// One ParallelFor call, shared with the workers that join it: a worker that wakes after
// the call returned touches only this state, never the next call's.
struct VectorEnv::Loop {
  std::atomic<size_t> next{0};
  size_t n = 0;
  size_t done = 0;  // guarded by VectorEnv::mu_
  void (*body)(VectorEnv*, size_t, const void*) = nullptr;
  const void* arg = nullptr;

  // Runs chunks of consecutive indices until none is left; returns how many it ran. A
  // thread takes kChunk rows at a time so that two threads rarely write the same cache
  // line of the output columns (one value per row, 8 bytes: 8 rows to a line).
  static constexpr size_t kChunk = 8;
  size_t Work(VectorEnv* self) {
    size_t ran = 0;
    for (size_t begin; (begin = next.fetch_add(kChunk, std::memory_order_relaxed)) < n;) {
      const size_t end = std::min(n, begin + kChunk);
      for (size_t i = begin; i < end; ++i) body(self, i, arg);
      ran += end - begin;
    }
    return ran;
  }
};

namespace {

bool SameShape(const EnvSpec& a, const EnvSpec& b) {
  return a.observation.shape == b.observation.shape && a.action.kind == b.action.kind &&
         a.action.shape == b.action.shape && a.action.n == b.action.n &&
         a.tiers.size() == b.tiers.size() && a.num_regions == b.num_regions;
}

}  // namespace

absl::StatusOr<std::unique_ptr<VectorEnv>> VectorEnv::Create(
    std::vector<std::unique_ptr<SessionEnv>> envs, VectorEnvOptions options) {
  if (envs.empty()) return absl::InvalidArgumentError("num_envs: at least one environment");
  if (options.threads < 1) {
    return absl::InvalidArgumentError(
        StrCat("threads: at least 1 (the calling thread), got ", options.threads));
  }
  for (size_t i = 1; i < envs.size(); ++i) {
    if (!SameShape(envs[i]->spec(), envs[0]->spec())) {
      return absl::InvalidArgumentError(
          StrCat("env ", i,
                 ": its spaces differ from those of env 0; a vector environment holds "
                 "environments of one shape (same num_regions, action_mode and number of "
                 "tiers)"));
    }
  }
  return std::unique_ptr<VectorEnv>(new VectorEnv(std::move(envs), options));
}

VectorEnv::VectorEnv(std::vector<std::unique_ptr<SessionEnv>> envs, VectorEnvOptions options)
    : options_(options),
      spec_(envs[0]->spec()),
      info_shape_(InfoShapeOf(spec_)),
      threads_(options.threads) {
  slots_.reserve(envs.size());
  for (auto& e : envs) {
    auto slot = std::make_unique<Slot>();
    slot->env = std::move(e);
    slot->action.values.assign(ActionSize(), 0);
    slots_.push_back(std::move(slot));
  }
  const int workers = std::min<int>(threads_ - 1, static_cast<int>(slots_.size()));
  for (int w = 0; w < workers; ++w) workers_.emplace_back([this] { WorkerLoop(); });
}

VectorEnv::~VectorEnv() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

size_t VectorEnv::ObsSize() const {
  size_t n = 1;
  for (int64_t d : spec_.observation.shape) n *= static_cast<size_t>(d);
  return n;
}

size_t VectorEnv::ActionSize() const {
  return spec_.action.kind == Space::kMultiDiscrete ? static_cast<size_t>(spec_.num_regions) : 1;
}

size_t VectorEnv::MaskSize() const { return info_shape_.mask; }

void VectorEnv::WorkerLoop() {
  std::shared_ptr<Loop> seen;
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    work_cv_.wait(lock, [&] { return stopping_ || loop_ != seen || !queue_.empty(); });
    if (stopping_) return;
    if (loop_ != seen) {
      seen = loop_;
      if (seen == nullptr) continue;
      std::shared_ptr<Loop> loop = seen;
      lock.unlock();
      const size_t mine = loop->Work(this);
      if (mine == 0) continue;
      lock.lock();
      loop->done += mine;
      if (loop->done == loop->n) done_cv_.notify_all();
      continue;
    }
    const int32_t id = queue_.front();
    queue_.pop_front();
    lock.unlock();
    RunSlot(static_cast<size_t>(id));
    lock.lock();
    ready_.push_back(id);
    done_cv_.notify_all();
  }
}

void VectorEnv::ParallelFor(size_t n, void (*body)(VectorEnv*, size_t, const void*),
                            const void* arg) {
  if (workers_.empty() || n <= 1) {
    for (size_t i = 0; i < n; ++i) body(this, i, arg);
    return;
  }
  auto loop = std::make_shared<Loop>();
  loop->n = n;
  loop->body = body;
  loop->arg = arg;
  {
    std::lock_guard<std::mutex> lock(mu_);
    loop_ = loop;
  }
  work_cv_.notify_all();
  const size_t mine = loop->Work(this);
  std::unique_lock<std::mutex> lock(mu_);
  loop->done += mine;
  done_cv_.wait(lock, [&] { return loop->done == n; });
  loop_ = nullptr;
}

absl::Status VectorEnv::StageActions(const int64_t* actions, size_t count,
                                     const std::vector<int32_t>* env_ids) {
  const size_t width = ActionSize();
  for (size_t k = 0; k < count; ++k) {
    const size_t slot = env_ids == nullptr ? k : static_cast<size_t>((*env_ids)[k]);
    Action& action = slots_[slot]->action;
    std::copy_n(actions + k * width, width, action.values.begin());
    absl::Status s = CheckAction(spec_, action, StrCat("actions[", k, "]"));
    if (!s.ok() && env_ids != nullptr) {
      s = WithField(absl::Status(s.code(), StrCat(s.message(), " (env ", slot, ")")),
                    ErrorField(s).value_or(""));
    }
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

void VectorEnv::AfterReset(Slot& s) const {
  // An episode that ends at its reset: reset again at the next step (as step_batch's
  // client does), or, with autoreset disabled, none is running.
  const bool over = s.result.terminated || s.result.truncated;
  s.started = !(over && options_.autoreset == AutoresetMode::kDisabled);
  s.reset_next = over && options_.autoreset != AutoresetMode::kDisabled;
}

void VectorEnv::RunSlot(size_t i) {
  Slot& s = *slots_[i];
  s.ended = false;
  s.was_reset = false;
  s.error = absl::OkStatus();
  if (s.reset_sent) {
    s.was_reset = true;
    s.reset_sent = false;
    s.reset_next = false;
    absl::StatusOr<StepResult> r = s.env->Reset(s.reset_seed, s.reset_options);
    if (!r.ok()) {
      s.error = r.status();
      s.started = false;
      return;
    }
    s.result = *std::move(r);
    AfterReset(s);
    return;
  }
  if (s.reset_next) {
    s.was_reset = true;
    absl::StatusOr<StepResult> r = s.env->Reset(std::nullopt, ResetOptions{});
    s.reset_next = false;
    if (!r.ok()) {
      s.error = r.status();
      return;
    }
    s.result = *std::move(r);
    AfterReset(s);
    return;
  }
  absl::StatusOr<StepResult> r = s.env->StepPrechecked(s.action);  // StageActions checked it
  if (!r.ok()) {
    s.error = r.status();
    return;
  }
  if (!(r->terminated || r->truncated)) {
    s.result = *std::move(r);
    return;
  }
  if (options_.autoreset == AutoresetMode::kDisabled) {
    s.result = *std::move(r);
    s.started = false;
    return;
  }
  if (options_.autoreset == AutoresetMode::kNextStep) {
    s.result = *std::move(r);
    s.reset_next = true;
    return;
  }
  s.ended = true;
  s.was_reset = true;
  s.final = *std::move(r);
  absl::StatusOr<StepResult> again = s.env->Reset(std::nullopt, ResetOptions{});
  if (!again.ok()) {
    s.error = again.status();
    return;
  }
  // The step's reward and flags, the reset's observation and info.
  s.result = *std::move(again);
  s.result.reward = s.final.reward;
  s.result.terminated = s.final.terminated;
  s.result.truncated = s.final.truncated;
}

void VectorEnv::Summarize(const std::vector<int32_t>* ids, size_t rows,
                          const BatchOutput& out) const {
  if (out.any_refused != nullptr) {
    *out.any_refused = false;
    for (size_t row = 0; row < rows; ++row) {
      if (out.info.refused_count[row] > 0 ||
          (out.ended[row] && out.final_info.refused_count[row] > 0)) {
        *out.any_refused = true;
        break;
      }
    }
  }
  if (out.any_reset != nullptr) {
    *out.any_reset = false;
    for (size_t row = 0; row < rows; ++row) {
      if (slots_[ids == nullptr ? row : (*ids)[row]]->was_reset) {
        *out.any_reset = true;
        break;
      }
    }
  }
}

void VectorEnv::WriteRow(size_t i, size_t row, const BatchOutput& out) const {
  const Slot& s = *slots_[i];
  const size_t obs = ObsSize();
  float* o = out.obs + row * obs;
  if (s.result.observation.size() != obs) std::fill(o, o + obs, 0.0f);
  std::memcpy(o, s.result.observation.data(),
              std::min(obs, s.result.observation.size()) * sizeof(float));
  out.reward[row] = s.result.reward;
  out.terminated[row] = s.result.terminated ? 1 : 0;
  out.truncated[row] = s.result.truncated ? 1 : 0;
  out.env_id[row] = static_cast<int32_t>(i);
  WriteInfoRow(s.result.info, row, info_shape_, spec_.profiles, out.info);
  out.ended[row] = s.ended ? 1 : 0;
  if (s.ended) {
    float* f = out.final_obs + row * obs;
    std::fill(f, f + obs, 0.0f);
    std::memcpy(f, s.final.observation.data(),
                std::min(obs, s.final.observation.size()) * sizeof(float));
    WriteInfoRow(s.final.info, row, info_shape_, spec_.profiles, out.final_info);
  }
}

namespace {

// Row `from_row` of the info columns `from` into row `to_row` of `to` (CopyInfoRow copies
// a row to the same row).
void CopyInfoRowTo(const InfoColumns& from, size_t from_row, const InfoColumns& to, size_t to_row,
                   const InfoShape& shape) {
  ForEachInfoColumn([&](const char*, auto member, const char*, InfoWidth w, int) {
    const size_t width = ColumnWidth(w, shape);
    std::copy_n(from.*member + from_row * width, width, to.*member + to_row * width);
  });
}

// The rows of `rows` environments whose episodes did not end get their current values in
// the final buffers, as the server sends them (only read when some episode ended).
void FillFinals(const BatchOutput& out, size_t rows, size_t obs, const InfoShape& shape) {
  for (size_t row = 0; row < rows; ++row) {
    if (out.ended[row]) continue;
    std::memcpy(out.final_obs + row * obs, out.obs + row * obs, obs * sizeof(float));
    CopyInfoRow(out.info, out.final_info, row, shape);
  }
}

struct ResetArgs {
  const std::vector<int32_t>* ids;
  const std::vector<std::optional<uint64_t>>* seeds;
  const std::vector<ResetOptions>* options;
  const BatchOutput* out;
};

struct StepArgs {
  const BatchOutput* out;
};

}  // namespace

absl::Status VectorEnv::CheckPerEnv(size_t size, const char* name) const {
  if (size != 0 && size != slots_.size()) {
    return absl::InvalidArgumentError(
        StrCat(name, ": ", size, " entries for ", slots_.size(), " environments"));
  }
  return absl::OkStatus();
}

absl::Status VectorEnv::Reset(const std::vector<uint8_t>& mask,
                              const std::vector<std::optional<uint64_t>>& seeds,
                              const std::vector<std::optional<std::string>>& profiles,
                              const BatchOutput& out) {
  if (in_flight_ != 0) {
    return absl::FailedPreconditionError(
        StrCat("reset: ", in_flight_, " sent steps are not received yet; call recv until none is"));
  }
  if (absl::Status s = CheckPerEnv(mask.size(), "reset_mask"); !s.ok()) return s;
  if (absl::Status s = CheckPerEnv(seeds.size(), "seeds"); !s.ok()) return s;
  if (absl::Status s = CheckPerEnv(profiles.size(), "options.profile"); !s.ok()) return s;
  std::vector<int32_t> ids;
  ids.reserve(slots_.size());
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (mask.empty() || mask[i] != 0) ids.push_back(static_cast<int32_t>(i));
  }
  std::vector<ResetOptions> options(profiles.empty() ? 0 : slots_.size());
  for (size_t i = 0; i < options.size(); ++i) options[i].profile = profiles[i];
  const ResetArgs args{&ids, &seeds, &options, &out};
  ParallelFor(
      ids.size(),
      [](VectorEnv* self, size_t k, const void* arg) {
        const ResetArgs& a = *static_cast<const ResetArgs*>(arg);
        const auto i = static_cast<size_t>((*a.ids)[k]);
        Slot& s = *self->slots_[i];
        s.ended = false;
        s.was_reset = true;
        s.reset_next = false;
        absl::StatusOr<StepResult> r =
            s.env->Reset(a.seeds->empty() ? std::nullopt : (*a.seeds)[i],
                         a.options->empty() ? ResetOptions{} : (*a.options)[i]);
        if (!r.ok()) {
          s.error = r.status();
          s.started = false;
          return;
        }
        s.error = absl::OkStatus();
        s.result = *std::move(r);
        self->AfterReset(s);
        self->WriteRow(i, i, *a.out);
        s.result = StepResult{};
      },
      &args);
  *out.any_ended = false;
  for (int32_t i : ids) out.ended[i] = 0;
  Summarize(nullptr, slots_.size(), out);
  for (int32_t i : ids) {
    const absl::Status& e = slots_[i]->error;
    if (!e.ok()) return {e.code(), StrCat("env ", i, ": ", e.message())};
  }
  return absl::OkStatus();
}

absl::Status VectorEnv::Step(const int64_t* actions, size_t num_values, const BatchOutput& out) {
  if (in_flight_ != 0) {
    return absl::FailedPreconditionError(
        StrCat("step: ", in_flight_, " sent steps are not received yet; call recv until none is"));
  }
  const size_t width = ActionSize();
  if (num_values != slots_.size() * width) {
    return absl::InvalidArgumentError(
        StrCat("actions: expected ", slots_.size(), " x ", width, " values, got ", num_values));
  }
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i]->started) {
      return absl::FailedPreconditionError(
          StrCat("env ", i,
                 " has no episode running (never reset, or its episode ended with autoreset "
                 "disabled): reset it first"));
    }
  }
  if (absl::Status s = StageActions(actions, slots_.size(), nullptr); !s.ok()) return s;
  const StepArgs args{&out};
  ParallelFor(
      slots_.size(),
      [](VectorEnv* self, size_t i, const void* arg) {
        self->RunSlot(i);
        Slot& s = *self->slots_[i];
        if (s.error.ok()) {
          self->WriteRow(i, i, *static_cast<const StepArgs*>(arg)->out);
          // Free the results now, as a caller of Environment::Step would: the next step's
          // allocations then reuse memory that is still in cache.
          s.result = StepResult{};
          if (s.ended) s.final = StepResult{};
        }
      },
      &args);
  bool any = false;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = *slots_[i];
    if (!s.error.ok()) return {s.error.code(), StrCat("env ", i, ": ", s.error.message())};
    any = any || s.ended;
  }
  *out.any_ended = any;
  Summarize(nullptr, slots_.size(), out);
  if (any) {
    FillFinals(out, slots_.size(), ObsSize(), info_shape_);
  }
  return absl::OkStatus();
}

absl::Status VectorEnv::Send(const std::vector<int32_t>& env_ids, const int64_t* actions,
                             size_t num_values) {
  const size_t width = ActionSize();
  if (num_values != env_ids.size() * width) {
    return absl::InvalidArgumentError(StrCat("actions: expected ", env_ids.size(), " x ", width,
                                             " values (one action per env_id), got ", num_values));
  }
  std::vector<uint8_t> seen(slots_.size(), 0);
  for (size_t k = 0; k < env_ids.size(); ++k) {
    const int32_t id = env_ids[k];
    if (id < 0 || static_cast<size_t>(id) >= slots_.size()) {
      return absl::InvalidArgumentError(
          StrCat("env_ids[", k, "]: ", id, " out of range [0, ", slots_.size(), ")"));
    }
    if (seen[id]++) {
      return absl::InvalidArgumentError(StrCat("env_ids[", k, "]: env ", id, " appears twice"));
    }
    if (slots_[id]->in_flight) {
      return absl::FailedPreconditionError(
          StrCat("env_ids[", k, "]: env ", id, " was sent and not received yet; recv it first"));
    }
    if (!slots_[id]->started) {
      return absl::FailedPreconditionError(
          StrCat("env_ids[", k, "]: env ", id,
                 " has no episode running (never reset, or its episode ended with autoreset "
                 "disabled): reset it first"));
    }
  }
  if (absl::Status s = StageActions(actions, env_ids.size(), &env_ids); !s.ok()) return s;
  for (const int32_t id : env_ids) slots_[id]->in_flight = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.insert(queue_.end(), env_ids.begin(), env_ids.end());
  }
  in_flight_ += static_cast<int>(env_ids.size());
  if (!workers_.empty()) work_cv_.notify_all();
  return absl::OkStatus();
}

absl::Status VectorEnv::SendReset(const std::vector<std::optional<uint64_t>>& seeds,
                                  const std::vector<std::optional<std::string>>& profiles) {
  if (in_flight_ != 0) {
    return absl::FailedPreconditionError(
        StrCat("reset: ", in_flight_, " sent steps are not received yet; call recv until none is"));
  }
  if (absl::Status s = CheckPerEnv(seeds.size(), "seeds"); !s.ok()) return s;
  if (absl::Status s = CheckPerEnv(profiles.size(), "options.profile"); !s.ok()) return s;
  std::vector<int32_t> ids(slots_.size());
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = *slots_[i];
    s.reset_sent = true;
    s.reset_seed = seeds.empty() ? std::nullopt : seeds[i];
    s.reset_options = ResetOptions{};
    if (!profiles.empty()) s.reset_options.profile = profiles[i];
    s.in_flight = true;
    ids[i] = static_cast<int32_t>(i);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.insert(queue_.end(), ids.begin(), ids.end());
  }
  in_flight_ += static_cast<int>(ids.size());
  if (!workers_.empty()) work_cv_.notify_all();
  return absl::OkStatus();
}

absl::Status VectorEnv::Recv(int batch, const BatchOutput& out) {
  if (batch < 1 || batch > in_flight_) {
    return absl::InvalidArgumentError(StrCat("batch_size: ", batch, " must be in [1, ", in_flight_,
                                             "] (the steps sent and not yet received)"));
  }
  std::vector<int32_t> ids;
  ids.reserve(batch);
  {
    std::unique_lock<std::mutex> lock(mu_);
    while (ready_.size() < static_cast<size_t>(batch)) {
      if (!queue_.empty()) {  // the caller steps too
        const int32_t id = queue_.front();
        queue_.pop_front();
        lock.unlock();
        RunSlot(static_cast<size_t>(id));
        lock.lock();
        ready_.push_back(id);
        continue;
      }
      done_cv_.wait(lock);
    }
    ids.assign(ready_.begin(), ready_.begin() + batch);
    ready_.erase(ready_.begin(), ready_.begin() + batch);
  }
  in_flight_ -= batch;
  bool any = false;
  absl::Status first;
  for (size_t row = 0; row < ids.size(); ++row) {
    Slot& s = *slots_[ids[row]];
    s.in_flight = false;
    if (!s.error.ok()) {
      if (first.ok()) {
        first = absl::Status(s.error.code(), StrCat("env ", ids[row], ": ", s.error.message()));
      }
      continue;
    }
    WriteRow(ids[row], row, out);
    s.result = StepResult{};
    any = any || s.ended;
    if (s.ended) s.final = StepResult{};
  }
  if (!first.ok()) return first;
  *out.any_ended = any;
  Summarize(&ids, ids.size(), out);
  if (any) {
    FillFinals(out, ids.size(), ObsSize(), info_shape_);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<VectorEnv>> VectorEnv::Fork(const std::vector<int32_t>& env_ids,
                                                           EnvProvider* maker) const {
  if (in_flight_ > 0) {
    return absl::FailedPreconditionError(
        StrCat(in_flight_, " steps sent and not received; recv() them before forking"));
  }
  if (env_ids.empty()) return absl::InvalidArgumentError("env_ids: at least one environment");
  std::vector<std::unique_ptr<SessionEnv>> envs;
  envs.reserve(env_ids.size());
  for (size_t k = 0; k < env_ids.size(); ++k) {
    const int32_t i = env_ids[k];
    if (i < 0 || i >= num_envs()) {
      return absl::InvalidArgumentError(
          StrCat("env_ids[", k, "]: ", i, " is not an environment (0..", num_envs() - 1, ")"));
    }
    absl::StatusOr<std::unique_ptr<SessionEnv>> fork =
        slots_[static_cast<size_t>(i)]->env->Fork(maker);
    if (!fork.ok()) {
      return absl::Status(fork.status().code(), StrCat("env ", i, ": ", fork.status().message()));
    }
    envs.push_back(*std::move(fork));
  }
  std::unique_ptr<VectorEnv> forked(new VectorEnv(std::move(envs), options_));
  for (size_t k = 0; k < env_ids.size(); ++k) {
    const Slot& from = *slots_[static_cast<size_t>(env_ids[k])];
    Slot& to = *forked->slots_[k];
    to.started = from.started;
    to.reset_next = from.reset_next;
  }
  return forked;
}

void VectorEnv::CopyRows(const BatchOutput& from, const std::vector<int32_t>& ids,
                         const BatchOutput& to) const {
  const size_t obs = ObsSize();
  for (size_t k = 0; k < ids.size(); ++k) {
    const auto i = static_cast<size_t>(ids[k]);
    std::memcpy(to.obs + k * obs, from.obs + i * obs, obs * sizeof(float));
    to.reward[k] = from.reward[i];
    to.terminated[k] = from.terminated[i];
    to.truncated[k] = from.truncated[i];
    CopyInfoRowTo(from.info, i, to.info, k, info_shape_);
  }
}

BatchBuffers::BatchBuffers(const VectorEnv& env) {
  const auto n = static_cast<size_t>(env.num_envs());
  const size_t obs_size = env.ObsSize();
  obs.assign(n * obs_size, 0);
  final_obs.assign(n * obs_size, 0);
  reward.assign(n, 0);
  terminated.assign(n, 0);
  truncated.assign(n, 0);
  ended.assign(n, 0);
  env_id.assign(n, 0);
  for (size_t i = 0; i < n; ++i) env_id[i] = static_cast<int32_t>(i);
  out.obs = obs.data();
  out.reward = reward.data();
  out.terminated = terminated.data();
  out.truncated = truncated.data();
  out.env_id = env_id.data();
  out.info = info.Allocate(n, InfoShapeOf(env.spec()));
  out.ended = ended.data();
  out.final_obs = final_obs.data();
  out.final_info = final_info.Allocate(n, InfoShapeOf(env.spec()));
  out.any_ended = &any_ended;
  out.any_refused = &any_refused;
  out.any_reset = &any_reset;
}

}  // namespace tiergym::env
