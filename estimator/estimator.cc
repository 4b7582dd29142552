#include "estimator/estimator.h"

#include "estimator/page_placement.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym {

absl::StatusOr<std::unique_ptr<Estimator>> Estimator::Create(Profile profile,
                                                             EstimatorOptions options) {
  if (options.window_instructions == 0) {
    return absl::InvalidArgumentError("window_instructions must be positive");
  }
  if (options.block_samples == 0) {
    return absl::InvalidArgumentError("block_samples must be positive");
  }
  if (options.fit_span_samples != 0 && options.fit_span_samples < options.block_samples) {
    return absl::InvalidArgumentError(
        StrCat("fit_span_samples must be 0 (each block's fit its own) or at least block_samples (",
               options.block_samples, "), not ", options.fit_span_samples));
  }
  if (!(options.fit_tolerance >= 0 && options.fit_tolerance <= kMaxFitTolerance)) {
    return absl::InvalidArgumentError(StrCat("fit_tolerance must be in [0, ", kMaxFitTolerance,
                                             "] (a relative misfit), not ", options.fit_tolerance));
  }
  if (options.machine) {
    for (const std::string& device : profile.devices()) {
      if (options.machine->Find(device) == nullptr) {
        return absl::InvalidArgumentError(StrCat("machine ", options.machine->name,
                                                 " has no tier '", device, "' (profile ",
                                                 profile.name(), " has a run for it)"));
      }
    }
  }
  return std::unique_ptr<Estimator>(new Estimator(std::move(profile), std::move(options)));
}

absl::StatusOr<std::shared_ptr<const EstimatorIndex>> Estimator::IndexFor(
    const std::string& base_device) {
  {
    absl::MutexLock lock(&mu_);
    auto it = indexes_.find(base_device);
    if (it != indexes_.end()) return it->second;
  }
  // Built under build_mu_ alone: a second request for the same index waits for the first
  // (and finds it), while HasIndex and IndexBytes answer meanwhile.
  absl::MutexLock build(&build_mu_);
  {
    absl::MutexLock lock(&mu_);
    auto it = indexes_.find(base_device);
    if (it != indexes_.end()) return it->second;
  }
  IndexOptions index_options;
  index_options.window_instructions = options_.window_instructions;
  index_options.use_phasemarks = options_.use_phasemarks;
  index_options.base_device = base_device;
  index_options.machine = options_.machine;
  index_options.block_samples = options_.block_samples;
  index_options.fit_span_samples = options_.fit_span_samples;
  index_options.share_runs = options_.share_runs;
  index_options.align = options_.align;
  index_options.first_touch = options_.first_touch;
  index_options.empty_windows = options_.empty_windows;
  index_options.compute_overlap = options_.compute_overlap;
  index_options.fit_overlap = options_.fit_overlap;
  index_options.fit_tolerance = options_.fit_tolerance;
  index_options.tier_overlap = options_.tier_overlap;
  index_options.limit_smoothness = options_.limit_smoothness;
  index_options.queue_like = options_.queue_like;
  index_options.queue_strength = options_.queue_strength;
  index_options.queue_from_profile = options_.queue_from_profile;
  index_options.subset_fits = options_.subset_fits;
  index_options.share_bias = options_.share_bias;
  index_options.tail_window_apart = options_.tail_window_apart;
  index_options.read_pct = options_.read_pct;
  index_options.extent_gap_pages = options_.extent_gap_pages;
  index_options.join_sweeps = options_.join_sweeps;
  TG_ASSIGN_OR_RETURN(std::shared_ptr<const EstimatorIndex> index,
                      EstimatorIndex::Build(profile_, index_options));
  absl::MutexLock lock(&mu_);
  indexes_.emplace(base_device, index);
  return index;
}

bool Estimator::HasIndex(const std::string& base_device) const {
  absl::MutexLock lock(&mu_);
  return indexes_.count(base_device) > 0;
}

size_t Estimator::IndexBytes() const {
  absl::MutexLock lock(&mu_);
  size_t bytes = 0;
  for (const auto& [device, index] : indexes_) bytes += index->MemoryBytes();
  return bytes;
}

absl::StatusOr<Estimate> Estimator::EstimatePlacement(const Placement& placement, Model model) {
  TG_RETURN_IF_ERROR(CheckPlacementTiers(profile_, placement));
  TG_ASSIGN_OR_RETURN(std::shared_ptr<const EstimatorIndex> index,
                      IndexFor(placement.default_tier));
  TG_ASSIGN_OR_RETURN(ResolvedPlacement resolved, index->Resolve(placement));
  return index->EstimateDetailed(resolved, model);
}

absl::StatusOr<double> Estimator::SerializedRuntimeNs(const Placement& placement, Model model) {
  TG_RETURN_IF_ERROR(CheckPlacementTiers(profile_, placement));
  TG_ASSIGN_OR_RETURN(std::shared_ptr<const EstimatorIndex> index,
                      IndexFor(placement.default_tier));
  TG_ASSIGN_OR_RETURN(ResolvedPlacement resolved, index->Resolve(placement));
  return index->RuntimeNs(resolved, model, /*tier_overlap=*/0);
}

absl::StatusOr<SamplingInterval> Estimator::SamplingSpread(const Placement& placement, Model model,
                                                           int replicates, uint64_t seed,
                                                           double level) {
  TG_RETURN_IF_ERROR(CheckPlacementTiers(profile_, placement));
  TG_ASSIGN_OR_RETURN(std::shared_ptr<const EstimatorIndex> index,
                      IndexFor(placement.default_tier));
  TG_ASSIGN_OR_RETURN(ResolvedPlacement resolved, index->Resolve(placement));
  return tiergym::SamplingSpread(*index, resolved, model, replicates, seed, level);
}

}  // namespace tiergym
