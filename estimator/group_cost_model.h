// The paper model's interval estimate as a linear function of the tiers of fixed groups of
// pages (the environment's regions). Under Model::kPaper a window's time is
// sum_d (hits_d / hits) * t_d and the time of its segment's windows without samples is
// shared by the segment's hits per device: both are linear in the page-to-device
// assignment, so for any placement that puts every page of group g on one device d_g,
//     PlacementState::IntervalNs(from, to, factor)
//         == costs.constant_ns + sum_g costs.cost[g * N + d_g]      (to rounding)
// with costs = IntervalCosts(from, to, factor). A caller whose intervals are fixed (an
// environment's decision intervals) computes the costs once and then prices any group
// placement in O(groups), without moving pages. The models that are not linear
// (concurrent, roofline: their corrections are a max per block) have no such
// decomposition.
//
// Immutable and thread-safe after construction; holds the index by shared_ptr.
#ifndef TIERGYM_ESTIMATOR_GROUP_COST_MODEL_H_
#define TIERGYM_ESTIMATOR_GROUP_COST_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "estimator/estimator_index.h"

namespace tiergym {

class GroupCostModel {
 public:
  struct Costs {
    double constant_ns = 0;    // time no placement changes (segments without samples)
    std::vector<double> cost;  // [g * N + d]: group g's share of the time if on device d
    // Adds `other` (same groups and devices) to this.
    void Add(const Costs& other);
  };

  // REQUIRES: group_of_page has one entry per page id of `index`, each < num_groups.
  GroupCostModel(std::shared_ptr<const EstimatorIndex> index, std::vector<uint32_t> group_of_page,
                 size_t num_groups);

  // The decomposition of base-run positions [from, to) (clamped as IntervalNs clamps).
  // device_factor: as for PlacementState::IntervalNs (empty: all 1). Cost: the
  // interval's windows' non-zeros, plus groups * devices per segment it touches.
  Costs IntervalCosts(uint64_t from, uint64_t to,
                      const std::vector<double>& device_factor = {}) const;

  size_t num_groups() const { return num_groups_; }
  const EstimatorIndex& index() const { return *index_; }

 private:
  void AddSegment(size_t s, double a, double b, const double* factor, Costs& out) const;

  std::shared_ptr<const EstimatorIndex> index_;
  std::vector<uint32_t> group_of_page_;
  size_t num_groups_ = 0;
  // Per segment, its weighted hits per group, sparse: groups and counts at
  // [seg_offset_[s], seg_offset_[s + 1]).
  std::vector<uint64_t> seg_offset_;
  std::vector<uint32_t> seg_group_;
  std::vector<uint64_t> seg_count_;
};

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_GROUP_COST_MODEL_H_
