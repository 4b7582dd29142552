#include "env/server/batch_stepper.h"

#include <algorithm>
#include <utility>

namespace tiergym::env {

ReplySink::ReplySink(size_t rows) : finals_(rows), ended_(rows, 0) {
  reply_.results.resize(rows);
  reply_.was_reset.assign(rows, 0);
}

void ReplySink::Row(size_t i, StepResult& result, bool was_reset, StepResult* ended) {
  reply_.results[i] = std::move(result);
  reply_.was_reset[i] = was_reset ? 1 : 0;
  if (ended != nullptr) {
    finals_[i] = std::move(*ended);
    ended_[i] = 1;
  }
}

bool ReplySink::any_ended() const {
  return std::find(ended_.begin(), ended_.end(), 1) != ended_.end();
}

protocol::StepBatchReply ReplySink::Take() {
  if (any_ended()) {
    for (size_t i = 0; i < finals_.size(); ++i) {
      if (ended_[i] == 0) finals_[i] = reply_.results[i];
    }
    reply_.finals = std::move(finals_);
  }
  return std::move(reply_);
}

absl::Status BatchStepper::StepOne(const protocol::StepBatchRequest& r, size_t i, const Entry& e,
                                   ResultSink& sink) const {
  if (!r.reset.empty() && r.reset[i] != 0) {
    absl::StatusOr<StepResult> res =
        e.env->Reset(r.seeds.empty() ? std::nullopt : r.seeds[i],
                     r.options.empty() ? ResetOptions{} : r.options[i]);
    if (!res.ok()) {
      *e.in_episode = false;
      return res.status();
    }
    *e.in_episode = !(res->terminated || res->truncated);
    sink.Row(i, *res, /*was_reset=*/true, nullptr);
    return absl::OkStatus();
  }
  // Checked before anything moved (the one check of every action): not checked again.
  absl::StatusOr<StepResult> res = e.env->StepPrechecked(r.actions[i]);
  if (!res.ok()) return res.status();
  const bool ended = res->terminated || res->truncated;
  if (ended) *e.in_episode = false;
  if (!ended || r.autoreset != protocol::Autoreset::kSameStep) {
    sink.Row(i, *res, /*was_reset=*/false, nullptr);
    return absl::OkStatus();
  }
  absl::StatusOr<StepResult> again = e.env->Reset(std::nullopt, ResetOptions{});
  if (!again.ok()) return again.status();
  *e.in_episode = !(again->terminated || again->truncated);
  // The step's reward and flags, the reset's observation and info.
  again->reward = res->reward;
  again->terminated = res->terminated;
  again->truncated = res->truncated;
  sink.Row(i, *again, /*was_reset=*/true, &*res);
  return absl::OkStatus();
}

std::vector<absl::Status> BatchStepper::Run(const protocol::StepBatchRequest& r,
                                            const std::vector<Entry>& entries, ResultSink& sink,
                                            size_t max_helpers) const {
  const size_t n = entries.size();
  std::vector<absl::Status> errors(n);
  auto body = [&](size_t i) { errors[i] = StepOne(r, i, entries[i], sink); };
  if (pool_ != nullptr && n > 1) {
    pool_->ParallelFor(n, body, max_helpers);
  } else {
    for (size_t i = 0; i < n; ++i) body(i);
  }
  return errors;
}

}  // namespace tiergym::env
