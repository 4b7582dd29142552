#include "env/regions.h"

#include <algorithm>
#include <cmath>

namespace tiergym::env {

std::vector<Region> MakeRegions(const std::vector<uint64_t>& pages, int num_regions,
                                uint64_t gap_pages) {
  std::vector<Region> out;
  if (pages.empty()) return out;
  // Areas as index ranges [first, last) into `pages`.
  struct Area {
    size_t first, last;
  };
  std::vector<Area> areas;
  size_t first = 0;
  for (size_t i = 1; i <= pages.size(); ++i) {
    if (i == pages.size() || pages[i] - pages[i - 1] > gap_pages) {
      areas.push_back({first, i});
      first = i;
    }
  }
  const size_t k = static_cast<size_t>(num_regions);
  while (areas.size() > k) {
    size_t best = 0;
    uint64_t best_gap = UINT64_MAX;
    for (size_t a = 0; a + 1 < areas.size(); ++a) {
      const uint64_t gap = pages[areas[a + 1].first] - pages[areas[a].last - 1];
      if (gap < best_gap) {
        best_gap = gap;
        best = a;
      }
    }
    areas[best].last = areas[best + 1].last;
    areas.erase(areas.begin() + best + 1);
  }
  // Regions per area: one each, the others in proportion to the area's pages (largest
  // remainders first, ties to the lower address), never more regions than pages.
  const size_t total = pages.size();
  const size_t spare = std::min(k, total) - areas.size();
  std::vector<size_t> count(areas.size(), 1);
  std::vector<std::pair<double, size_t>> remainder;
  size_t given = 0;
  for (size_t a = 0; a < areas.size(); ++a) {
    const size_t n = areas[a].last - areas[a].first;
    const double ideal = static_cast<double>(spare) * static_cast<double>(n) / total;
    const size_t whole = std::min(n - 1, static_cast<size_t>(ideal));
    count[a] += whole;
    given += whole;
    remainder.emplace_back(-(ideal - std::floor(ideal)), a);
  }
  std::stable_sort(remainder.begin(), remainder.end());
  for (bool progressed = true; given < spare && progressed;) {
    progressed = false;
    for (const auto& [r, a] : remainder) {
      if (given == spare) break;
      if (count[a] < areas[a].last - areas[a].first) {
        ++count[a];
        ++given;
        progressed = true;
      }
    }
  }
  for (size_t a = 0; a < areas.size(); ++a) {
    const size_t n = areas[a].last - areas[a].first;
    for (size_t r = 0; r < count[a]; ++r) {
      const size_t lo = areas[a].first + n * r / count[a];
      const size_t hi = areas[a].first + n * (r + 1) / count[a];
      Region region;
      region.start_page = pages[lo];
      region.end_page = hi == areas[a].last ? pages[hi - 1] + 1 : pages[hi];
      region.footprint_pages = hi - lo;
      out.push_back(region);
    }
  }
  return out;
}

}  // namespace tiergym::env
