#include "env/interval_pricer.h"

#include <algorithm>
#include <utility>

#include "traces/placement.h"

namespace tiergym::env {
namespace {

bool AllOne(const std::vector<double>& factors) {
  return std::all_of(factors.begin(), factors.end(), [](double f) { return f == 1.0; });
}

// Model::kPaper: the intervals' times tabulated per region and tier.
class LinearCostPricer final : public IntervalPricer {
 public:
  explicit LinearCostPricer(const IntervalPricerInputs& in)
      : regions_(in.regions.size()), tiers_(in.device_of_tier.size()) {
    const size_t steps = in.bounds.size() - 1, k = regions_, tiers = tiers_;
    const size_t devices = in.index->devices().size();
    const GroupCostModel costs(in.index, in.region_of_page, k);
    cost_.resize(steps * k * tiers);
    constant_ns_.reserve(steps);
    for (size_t i = 0; i < steps; ++i) {
      const GroupCostModel::Costs c =
          in.contention ? in.contention->IntervalCosts(costs, in.bounds[i], in.bounds[i + 1])
                        : costs.IntervalCosts(in.bounds[i], in.bounds[i + 1]);
      constant_ns_.push_back(c.constant_ns);
      for (size_t r = 0; r < k; ++r) {
        for (size_t t = 0; t < tiers; ++t) {
          cost_[(i * k + r) * tiers + t] =
              c.cost[r * devices + static_cast<size_t>(in.device_of_tier[t])];
        }
      }
    }
  }

  // The episode has no state of its own: the regions' tiers are the placement.
  class LinearEpisode final : public Episode {
   public:
    explicit LinearEpisode(const LinearCostPricer& pricer) : pricer_(pricer) {}
    absl::Status Move(std::span<const int> /*moved*/,
                      const std::vector<int>& /*region_tier*/) override {
      return absl::OkStatus();
    }
    [[nodiscard]] double IntervalNs(size_t step,
                                    const std::vector<int>& region_tier) const override {
      return pricer_.IntervalNs(step, region_tier);
    }
    [[nodiscard]] double IntervalNs(size_t step, const std::vector<int>& region_tier,
                                    const std::vector<double>& tier_factor) const override {
      return pricer_.IntervalNs(step, region_tier, tier_factor);
    }
    [[nodiscard]] std::unique_ptr<Episode> Clone() const override {
      return std::make_unique<LinearEpisode>(pricer_);
    }

   private:
    const LinearCostPricer& pricer_;
  };

  absl::StatusOr<std::unique_ptr<Episode>> NewEpisode() const override {
    return std::make_unique<LinearEpisode>(*this);
  }
  [[nodiscard]] const char* name() const override { return "linear costs"; }
  [[nodiscard]] size_t MemoryBytes() const override {
    return cost_.size() * sizeof(double) + constant_ns_.size() * sizeof(double);
  }

  [[nodiscard]] double IntervalNs(size_t step, const std::vector<int>& region_tier) const {
    const size_t k = regions_, tiers = tiers_;
    const double* c = &cost_[step * k * tiers];
    double sum = constant_ns_[step];
    for (size_t r = 0; r < k; ++r) sum += c[r * tiers + static_cast<size_t>(region_tier[r])];
    return sum;
  }

  // The costs are linear in the device factors (GroupCostModel::IntervalCosts): a region's
  // cost on tier t scales by tier_factor[t], the constant (segments without samples, run
  // on the default tier) by the default tier's factor.
  [[nodiscard]] double IntervalNs(size_t step, const std::vector<int>& region_tier,
                                  const std::vector<double>& tier_factor) const {
    if (AllOne(tier_factor)) return IntervalNs(step, region_tier);
    const size_t k = regions_, tiers = tiers_;
    const double* c = &cost_[step * k * tiers];
    double sum = constant_ns_[step] * tier_factor[0];
    for (size_t r = 0; r < k; ++r) {
      const auto t = static_cast<size_t>(region_tier[r]);
      sum += c[r * tiers + t] * tier_factor[t];
    }
    return sum;
  }

 private:
  size_t regions_, tiers_;
  std::vector<double> cost_;         // [(step * regions + r) * tiers + t]
  std::vector<double> constant_ns_;  // per step: what no placement changes
};

// The regions' pages moved in a PlacementState, the interval's windows walked; with a
// contention scenario, through its composer.
class IndexWalkPricer final : public IntervalPricer {
 public:
  explicit IndexWalkPricer(const IntervalPricerInputs& in)
      : index_(in.index),
        model_(in.model),
        device_of_tier_(in.device_of_tier),
        bounds_(in.bounds),
        contention_(in.contention) {
    const uint64_t page_bytes = uint64_t{1} << index_->page_shift();
    for (const Region& r : in.regions) {
      region_bytes_.emplace_back(r.start_page * page_bytes, r.end_page * page_bytes);
    }
  }

  class WalkEpisode : public Episode {
   public:
    WalkEpisode(const IndexWalkPricer& pricer, PlacementState state)
        : pricer_(pricer), state_(std::move(state)) {}
    absl::Status Move(std::span<const int> moved, const std::vector<int>& region_tier) override {
      for (const int r : moved) {
        const auto [start, end] = pricer_.region_bytes_[static_cast<size_t>(r)];
        absl::Status status =
            state_.Move(start, end, pricer_.device_of_tier_[static_cast<size_t>(region_tier[r])]);
        if (!status.ok()) return status;
      }
      return absl::OkStatus();
    }

    using Episode::IntervalNs;
    // The machine tiers' factors as the index's device factors (the plain walk when all are
    // 1, for its cached block corrections).
    [[nodiscard]] double IntervalNs(size_t step, const std::vector<int>& region_tier,
                                    const std::vector<double>& tier_factor) const override {
      if (AllOne(tier_factor)) return IntervalNs(step, region_tier);
      std::vector<double> device_factor(pricer_.index_->devices().size(), 1.0);
      for (size_t t = 0; t < tier_factor.size(); ++t) {
        device_factor[static_cast<size_t>(pricer_.device_of_tier_[t])] = tier_factor[t];
      }
      return state_.IntervalNs(pricer_.bounds_[step], pricer_.bounds_[step + 1], device_factor);
    }

   protected:
    const IndexWalkPricer& pricer_;
    PlacementState state_;
  };

  class PlainWalkEpisode final : public WalkEpisode {
   public:
    using WalkEpisode::IntervalNs;
    using WalkEpisode::WalkEpisode;
    [[nodiscard]] double IntervalNs(size_t step,
                                    const std::vector<int>& /*region_tier*/) const override {
      return state_.IntervalNs(pricer_.bounds_[step], pricer_.bounds_[step + 1]);
    }
    [[nodiscard]] std::unique_ptr<Episode> Clone() const override {
      return std::make_unique<PlainWalkEpisode>(*this);  // the PlacementState copied
    }
  };

  class ContendedWalkEpisode final : public WalkEpisode {
   public:
    using WalkEpisode::IntervalNs;
    using WalkEpisode::WalkEpisode;
    [[nodiscard]] double IntervalNs(size_t step,
                                    const std::vector<int>& /*region_tier*/) const override {
      return pricer_.contention_->IntervalNs(state_, pricer_.bounds_[step],
                                             pricer_.bounds_[step + 1]);
    }
    [[nodiscard]] std::unique_ptr<Episode> Clone() const override {
      return std::make_unique<ContendedWalkEpisode>(*this);
    }
  };

  absl::StatusOr<std::unique_ptr<Episode>> NewEpisode() const override {
    const EstimatorIndex& x = *index_;
    absl::StatusOr<ResolvedPlacement> all_default =
        x.Resolve(Placement{x.devices()[static_cast<size_t>(x.base())], {}, {}});
    if (!all_default.ok()) return all_default.status();
    PlacementState state(index_, *all_default, model_);
    if (contention_ != nullptr)
      return std::make_unique<ContendedWalkEpisode>(*this, std::move(state));
    return std::make_unique<PlainWalkEpisode>(*this, std::move(state));
  }
  [[nodiscard]] const char* name() const override {
    return contention_ != nullptr ? "contended index walk" : "index walk";
  }
  [[nodiscard]] size_t MemoryBytes() const override {
    return device_of_tier_.size() * sizeof(int) + bounds_.size() * sizeof(uint64_t) +
           region_bytes_.size() * 2 * sizeof(uint64_t);
  }
  // PlacementState's arrays: tier_ (a byte per page), blk_hits_ and seg_hits_ (a count
  // per block or segment and device), blk_corr_ (a double per block).
  [[nodiscard]] size_t EpisodeBytes() const override {
    const EstimatorIndex& x = *index_;
    const size_t devices = x.devices().size();
    return sizeof(PlacementState) + x.pages().size() +
           x.num_blocks() * (devices * sizeof(uint64_t) + sizeof(double)) +
           x.num_segments() * devices * sizeof(uint64_t);
  }

 private:
  std::shared_ptr<const EstimatorIndex> index_;
  Model model_;
  std::vector<int> device_of_tier_;
  std::vector<uint64_t> bounds_;
  std::vector<std::pair<uint64_t, uint64_t>> region_bytes_;  // per region: [start, end) bytes
  std::shared_ptr<const InterferenceComposer> contention_;
};

}  // namespace

bool PricesByLinearCosts(Model model, uint64_t steps, uint64_t regions, uint64_t tiers,
                         uint64_t max_entries) {
  return model == Model::kPaper && steps * regions * tiers <= max_entries;
}

std::unique_ptr<const IntervalPricer> MakeIntervalPricer(const IntervalPricerInputs& inputs) {
  if (PricesByLinearCosts(inputs.model, inputs.bounds.size() - 1, inputs.regions.size(),
                          inputs.device_of_tier.size(), inputs.max_linear_entries)) {
    return std::make_unique<LinearCostPricer>(inputs);
  }
  return std::make_unique<IndexWalkPricer>(inputs);
}

}  // namespace tiergym::env
