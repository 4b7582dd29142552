// Regions: the application's footprint cut into K page-aligned address ranges, the unit
// an agent places.
//
// The footprint's pages (sorted) are merged into mapped areas: runs of pages whose gaps are
// below `gap_pages` (default 256 pages, 1 MiB at 4 KiB pages: the trace summary's default).
// While there are more areas than regions, the two neighbouring areas with the smallest gap
// merge. Regions are then shared out over the areas in proportion to their footprint pages
// (at least one each; largest remainders, ties to the lower address), and each area is cut
// into its regions at equal numbers of footprint pages, boundaries on page boundaries. A
// region never spans a gap that separates two areas; regions are sorted, disjoint, and
// cover every footprint page. Deterministic: a pure function of the pages.
#ifndef TIERGYM_ENV_REGIONS_H_
#define TIERGYM_ENV_REGIONS_H_

#include <cstdint>
#include <vector>

namespace tiergym::env {

struct Region {
  uint64_t start_page = 0;  // [start_page, end_page)
  uint64_t end_page = 0;
  uint64_t footprint_pages = 0;  // sampled pages inside
};

// REQUIRES: `pages` sorted and unique; num_regions >= 1. Fewer regions come back only
// when there are fewer pages than num_regions (one region per page).
std::vector<Region> MakeRegions(const std::vector<uint64_t>& pages, int num_regions,
                                uint64_t gap_pages = 256);

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_REGIONS_H_
