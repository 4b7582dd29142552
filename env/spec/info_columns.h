// Step infos written column by column (InfoColumns, generated with StepInfo from the
// protocol's declaration: env/spec/step_info.h): one writer of a row, one copy of a row and
// one owner of the arrays, for every place that lays a batch's infos out in arrays (the
// in-process vector environment's buffers, env/vector/; the shared-memory segment of batch
// results, env/server/shm_batch.h). The columns themselves, their names, dtypes and widths,
// come from ForEachInfoColumn, so a field added to the schema's step info needs nothing here.
//
// Thread-compatible: rows may be written by different threads at once (WriteInfoRow touches
// only its row).
#ifndef TIERGYM_ENV_SPEC_INFO_COLUMNS_H_
#define TIERGYM_ENV_SPEC_INFO_COLUMNS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "env/spec/env_spec.h"
#include "env/spec/step_info.h"

namespace tiergym::env {

// The widths of a batch's info columns (InfoWidth): tiers, regions (the refused regions'
// capacity per row) and action-mask values per row; `mask_columns`, the mask's row width
// ([regions, columns]) or 0 for a flat mask.
struct InfoShape {
  size_t tiers = 0;
  size_t regions = 0;
  size_t mask = 0;
  size_t mask_columns = 0;
  bool operator==(const InfoShape&) const = default;
};

// The shape of the infos of environments with `spec`: a row of the action's choices per
// region for a MultiDiscrete action (placement mode: the tiers; keep mode: keep, then the
// tiers), one per action for a Discrete one (move mode: a (region, tier) each, then the
// no-op).
inline InfoShape InfoShapeOf(const EnvSpec& spec) {
  InfoShape s;
  s.tiers = spec.tiers.size();
  s.regions = static_cast<size_t>(std::max(spec.num_regions, 0));
  const auto n = static_cast<size_t>(std::max<int64_t>(spec.action.n, 0));
  if (spec.action.kind == Space::kMultiDiscrete) {
    s.mask = s.regions * n;
    s.mask_columns = n > 1 ? n : 0;
  } else {
    s.mask = n;  // regions * tiers + 1
  }
  return s;
}

// Values per row of a column of width `w`.
inline size_t ColumnWidth(InfoWidth w, const InfoShape& s) {
  switch (w) {
    case InfoWidth::kOne:
      return 1;
    case InfoWidth::kTiers:
      return s.tiers;
    case InfoWidth::kRegions:
      return s.regions;
    case InfoWidth::kMask:
      return s.mask;
  }
  return 1;
}

// Writes `info` into row `row` of `c`: the profile as its index in `profiles` (-1: not
// there), the plain values (WriteInfoValues), the refused regions (their count, and at most
// `regions` of them) and the mask. A per-tier array or mask of another length than the
// shape's leaves zeros where it has no values.
inline void WriteInfoRow(const StepInfo& info, size_t row, const InfoShape& shape,
                         const std::vector<std::string>& profiles, const InfoColumns& c) {
  const auto found = std::find(profiles.begin(), profiles.end(), info.profile);
  c.profile[row] = found == profiles.end() ? -1 : static_cast<int32_t>(found - profiles.begin());
  if (info.tier_used_bytes.size() != shape.tiers) {
    std::fill_n(c.tier_used_bytes + row * shape.tiers, shape.tiers, 0);
  }
  WriteInfoValues(info, row, shape.tiers, c);
  const size_t refused = std::min(shape.regions, info.refused_regions.size());
  std::copy_n(info.refused_regions.begin(), refused, c.refused_regions + row * shape.regions);
  c.refused_count[row] = static_cast<int32_t>(refused);
  uint8_t* mask = c.action_mask + row * shape.mask;
  if (info.action_mask.size() != shape.mask) std::fill_n(mask, shape.mask, 0);
  std::memcpy(mask, info.action_mask.data(), std::min(shape.mask, info.action_mask.size()));
}

// Row `row` of every column of `from` copied into `to`.
inline void CopyInfoRow(const InfoColumns& from, const InfoColumns& to, size_t row,
                        const InfoShape& shape) {
  ForEachInfoColumn([&](const char*, auto member, const char*, InfoWidth w, int) {
    const size_t width = ColumnWidth(w, shape);
    std::copy_n(from.*member + row * width, width, to.*member + row * width);
  });
}

// Arrays for `rows` rows of every column, each starting at the column's fill value, with
// InfoColumns pointing into them. Not copyable or movable: the columns point into it.
class InfoStorage {
 public:
  InfoStorage() = default;
  InfoStorage(const InfoStorage&) = delete;
  InfoStorage& operator=(const InfoStorage&) = delete;

  // (Re)allocates; returns the columns.
  InfoColumns Allocate(size_t rows, const InfoShape& shape) {
    arrays_.clear();
    InfoColumns c;
    ForEachInfoColumn([&](const char*, auto member, const char*, InfoWidth w, int fill) {
      using T = std::remove_pointer_t<std::remove_reference_t<decltype(c.*member)>>;
      const size_t count = rows * ColumnWidth(w, shape);
      // Bytes from operator new[]: aligned for any element type, and the column's values
      // begin their lifetime in them (an array of bytes provides storage).
      std::unique_ptr<std::byte[]>& bytes =
          arrays_.emplace_back(new std::byte[std::max<size_t>(count, 1) * sizeof(T)]);
      c.*member = reinterpret_cast<T*>(bytes.get());
      std::fill_n(c.*member, count, static_cast<T>(fill));
    });
    return c;
  }

 private:
  std::vector<std::unique_ptr<std::byte[]>> arrays_;
};

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_SPEC_INFO_COLUMNS_H_
