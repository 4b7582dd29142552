#include "profiler/run_placed.h"

#include <numaif.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <thread>

#include "profiler/launcher.h"
#include "profiler/perf_session.h"
#include "profiler/recorder.h"
#include "traces/base/file.h"
#include "traces/base/json.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"
#include "traces/measured_runs.h"

namespace tiergym::prof {
namespace {

namespace fs = std::filesystem;

constexpr size_t kBatchPages = 4096;

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct Vma {
  uint64_t start, end;
};

// The process's mappings whose pages can be migrated (not the kernel's special ones).
std::vector<Vma> ReadVmas(pid_t pid) {
  std::vector<Vma> out;
  auto text = ReadFile(StrCat("/proc/", pid, "/maps"));
  if (!text.ok()) return out;
  size_t pos = 0;
  while (pos < text->size()) {
    size_t end = text->find('\n', pos);
    if (end == std::string::npos) end = text->size();
    const std::string line = text->substr(pos, end - pos);
    pos = end + 1;
    unsigned long long s = 0, e = 0;
    char perms[8] = {};
    if (std::sscanf(line.c_str(), "%llx-%llx %7s", &s, &e, perms) != 3) continue;
    if (perms[0] != 'r' && perms[1] != 'w') continue;
    if (line.find("[vsyscall]") != std::string::npos || line.find("[vvar") != std::string::npos ||
        line.find("[vdso]") != std::string::npos) {
      continue;
    }
    out.push_back(Vma{s, e});
  }
  return out;
}

absl::Status CheckTiers(const Placement& p, const std::map<std::string, int>& tier_nodes,
                        const std::string& where) {
  if (p.uses_fractions()) {
    return absl::UnimplementedError(
        StrCat(where,
               " places fractions of the footprint: that needs McKernel's first-touch "
               "quota; give a placement with address ranges"));
  }
  for (const std::string& tier : p.Tiers()) {
    if (!tier_nodes.contains(tier)) {
      return absl::InvalidArgumentError(StrCat(
          where, " names tier '", tier,
          "', which has no NUMA node: give --machine with that tier or --tier-node ", tier, "=N"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

void PlacementCounts::Add(const PlacementCounts& o) {
  pages += o.pages;
  moved += o.moved;
  in_place += o.in_place;
  absent += o.absent;
  failed += o.failed;
}

absl::StatusOr<std::vector<ScheduleStep>> ReadSchedule(const std::string& path) {
  TG_ASSIGN_OR_RETURN(json::Value root, json::ParseFile(path));
  json::ObjectReader r(root, path, "");
  TG_RETURN_IF_ERROR(r.CheckIsObject());
  TG_RETURN_IF_ERROR(r.OnlyKeys({"steps"}));
  TG_ASSIGN_OR_RETURN(const json::Value* steps, r.RequiredArray("steps"));
  if (steps->array().empty()) return r.Error("steps", steps, "empty: a schedule needs a step");
  const fs::path dir = fs::path(path).parent_path();
  std::vector<ScheduleStep> out;
  for (size_t i = 0; i < steps->array().size(); ++i) {
    const json::Value& item = steps->array()[i];
    json::ObjectReader s(item, path, StrCat("steps[", i, "]"));
    TG_RETURN_IF_ERROR(s.CheckIsObject());
    TG_RETURN_IF_ERROR(s.OnlyKeys({"from_phase", "placement"}));
    ScheduleStep step;
    TG_ASSIGN_OR_RETURN(uint64_t from, s.RequiredUint64("from_phase"));
    if (from > UINT32_MAX) return s.Error("from_phase", nullptr, "too large");
    step.from_phase = static_cast<uint32_t>(from);
    if (!out.empty() && step.from_phase <= out.back().from_phase) {
      return s.Error("from_phase", s.Has("from_phase") ? item.Find("from_phase") : nullptr,
                     StrCat("not after the previous step's phase ", out.back().from_phase,
                            ": from_phase must increase"));
    }
    TG_ASSIGN_OR_RETURN(std::string placement, s.RequiredString("placement"));
    if (placement.empty()) return s.Error("placement", item.Find("placement"), "empty path");
    const fs::path resolved =
        fs::path(placement).is_absolute() ? fs::path(placement) : dir / placement;
    step.placement_path = resolved.lexically_normal().string();
    auto p = ReadPlacement(step.placement_path);
    if (!p.ok()) {
      return s.Error("placement", item.Find("placement"),
                     StrCat("cannot be read: ", p.status().message()));
    }
    if (p->uses_fractions()) {
      return s.Error("placement", item.Find("placement"),
                     "places fractions: a schedule needs placements with ranges");
    }
    step.placement = std::move(*p);
    out.push_back(std::move(step));
  }
  return out;
}

absl::StatusOr<PlacementCounts> ApplyPlacement(pid_t pid, const Placement& placement,
                                               const std::vector<PlacementRange>& previous_ranges,
                                               const std::map<std::string, int>& tier_nodes) {
  TG_RETURN_IF_ERROR(CheckTiers(placement, tier_nodes, "the placement"));
  std::vector<PlacementRange> ranges = placement.ranges;
  ranges.insert(ranges.end(), previous_ranges.begin(), previous_ranges.end());
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::vector<Vma> vmas = ReadVmas(pid);
  PlacementCounts counts;
  std::vector<void*> pages;
  std::vector<int> nodes, status;
  auto flush = [&]() {
    if (pages.empty()) return;
    status.assign(pages.size(), 0);
    // Where each page is now (nodes == nullptr only queries).
    if (::move_pages(pid, pages.size(), pages.data(), nullptr, status.data(), 0) != 0) {
      counts.failed += pages.size();
      pages.clear();
      nodes.clear();
      return;
    }
    std::vector<void*> to_move;
    std::vector<int> to_nodes;
    for (size_t i = 0; i < pages.size(); ++i) {
      if (status[i] == -ENOENT) {
        ++counts.absent;
      } else if (status[i] < 0) {
        ++counts.failed;
      } else if (status[i] == nodes[i]) {
        ++counts.in_place;
      } else {
        to_move.push_back(pages[i]);
        to_nodes.push_back(nodes[i]);
      }
    }
    if (!to_move.empty()) {
      std::vector<int> moved_status(to_move.size(), 0);
      ::move_pages(pid, to_move.size(), to_move.data(), to_nodes.data(), moved_status.data(),
                   MPOL_MF_MOVE);
      for (size_t i = 0; i < to_move.size(); ++i) {
        if (moved_status[i] == to_nodes[i]) {
          ++counts.moved;
        } else {
          ++counts.failed;
        }
      }
    }
    pages.clear();
    nodes.clear();
  };
  for (const PlacementRange& range : ranges) {
    for (const Vma& v : vmas) {
      const uint64_t lo = std::max(range.start, v.start) / page * page;
      const uint64_t hi = std::min(range.end, v.end);
      for (uint64_t a = lo; a < hi; a += page) {
        const std::string_view tier = TierOf(placement, a);
        pages.push_back(reinterpret_cast<void*>(a));
        nodes.push_back(tier_nodes.at(std::string(tier)));
        ++counts.pages;
        if (pages.size() == kBatchPages) flush();
      }
    }
  }
  flush();
  return counts;
}

absl::StatusOr<PlacedRunResult> RunPlaced(const PlacedRunOptions& o) {
  if (o.command.empty()) return absl::InvalidArgumentError("no command to run");
  TG_ASSIGN_OR_RETURN(Placement initial, ReadPlacement(o.placement_path));
  TG_RETURN_IF_ERROR(CheckTiers(initial, o.tier_nodes, o.placement_path));
  std::vector<ScheduleStep> steps;
  if (!o.schedule_path.empty()) {
    TG_ASSIGN_OR_RETURN(steps, ReadSchedule(o.schedule_path));
    for (const ScheduleStep& s : steps) {
      TG_RETURN_IF_ERROR(CheckTiers(s.placement, o.tier_nodes, s.placement_path));
    }
  }
  const std::string executable = ResolveCommand(o.command[0]);
  if (executable.empty()) {
    return absl::NotFoundError(StrCat("command '", o.command[0], "' not found"));
  }

  LaunchOptions launch;
  launch.argv = o.command;
  launch.membind_node = o.tier_nodes.at(initial.default_tier);
  launch.preferred = true;  // the default tier; placed ranges are moved away from it
  launch.keep_aslr = o.keep_aslr;
  TG_ASSIGN_OR_RETURN(StoppedChild child, StoppedChild::Spawn(launch));
  const pid_t pid = child.pid();

  // Phasemarks, for a schedule: probes writing into per-CPU rings of a dummy sampler.
  std::unique_ptr<PerfSession> perf;
  if (!steps.empty()) {
    RecordOptions probe_options;
    probe_options.phasemark_lib = o.phasemark_lib;
    std::vector<std::string> notes;
    TG_ASSIGN_OR_RETURN(std::vector<ProbeSpec> probes,
                        ResolveProbes(executable, probe_options, &notes));
    if (probes.empty()) {
      return absl::FailedPreconditionError(
          StrCat("a schedule changes placements at phasemarks, but ", executable,
                 " neither defines phasemark() nor loads libphasemark.so (give --phasemark-lib)"));
    }
    SessionOptions session;
    session.pid = pid;
    session.leader.type = PERF_TYPE_SOFTWARE;
    session.leader.config = PERF_COUNT_SW_TASK_CLOCK;
    session.leader_name = "task-clock";
    session.sampler.type = PERF_TYPE_SOFTWARE;
    session.sampler.config = PERF_COUNT_SW_DUMMY;
    session.sampler_name = "dummy";
    session.probes = probes;
    session.ring_data_pages = 16;
    TG_ASSIGN_OR_RETURN(perf, PerfSession::Open(session));
  }

  PlacedRunResult result;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  int step = -1;  // index into steps; -1: the initial placement
  std::atomic<uint32_t> phases{0};
  absl::Status placer_error = absl::OkStatus();

  bool released_flag = false;
  std::thread placer([&] {
    std::vector<PlacementRange> previous;
    int applied_step = -2;
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return stop || released_flag; });  // the command has exec'd
    while (!stop) {
      const int want = step;
      if (want != applied_step && applied_step >= -1) {
        // Ranges of the placement being left: their pages go where the new one says.
        const Placement& old = applied_step < 0 ? initial : steps[applied_step].placement;
        previous.insert(previous.end(), old.ranges.begin(), old.ranges.end());
        ++result.steps_applied;
      }
      applied_step = want;
      const Placement& current = want < 0 ? initial : steps[want].placement;
      lock.unlock();
      auto counts = ApplyPlacement(pid, current, previous, o.tier_nodes);
      lock.lock();
      if (counts.ok()) {
        result.counts.Add(*counts);
        ++result.applications;
      } else if (placer_error.ok()) {
        placer_error = counts.status();
      }
      if (stop) break;
      cv.wait_for(lock, std::chrono::milliseconds(o.interval_ms),
                  [&] { return stop || step != applied_step; });
      if (stop) break;
    }
  });

  std::atomic<bool> drain_stop{false};
  std::thread drainer;
  if (perf != nullptr) {
    drainer = std::thread([&] {
      std::vector<pollfd> fds;
      for (size_t i = 0; i < perf->num_rings(); ++i)
        fds.push_back(pollfd{perf->ring_fd(i), POLLIN, 0});
      const RecordLayout layout = perf->layout();
      auto on_record = [&](std::span<const uint8_t> bytes) {
        auto r = ParsePerfRecord(bytes, layout);
        if (!r.ok()) return r.status();
        if (r->type() != RecordType::kSample || !perf->mark_ids().contains(r->sample_id.id) ||
            r->sample_id.pid != static_cast<uint32_t>(pid)) {
          return absl::OkStatus();
        }
        const uint32_t phase = ++phases;
        std::lock_guard<std::mutex> lock(mu);
        for (size_t s = 0; s < steps.size(); ++s) {
          if (steps[s].from_phase == phase) {
            step = static_cast<int>(s);
            cv.notify_all();
          }
        }
        return absl::OkStatus();
      };
      while (!drain_stop) {
        ::poll(fds.data(), fds.size(), 5);
        for (size_t i = 0; i < perf->num_rings(); ++i) (void)perf->DrainRing(i, on_record);
      }
      for (size_t i = 0; i < perf->num_rings(); ++i) (void)perf->DrainRing(i, on_record);
    });
  }

  const uint64_t start = NowNs();
  absl::Status released = child.Release();
  {
    std::lock_guard<std::mutex> lock(mu);
    released_flag = true;
  }
  cv.notify_all();
  absl::StatusOr<int> waited = released.ok() ? child.Wait() : absl::StatusOr<int>(released);
  const uint64_t end = NowNs();
  drain_stop = true;
  if (drainer.joinable()) drainer.join();
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  cv.notify_all();
  placer.join();
  if (!waited.ok()) return waited.status();
  result.wait_status = *waited;
  result.runtime_ns = end - start;
  result.phases = phases;

  std::string base = o.run_name;
  if (base.empty()) {
    base = fs::path(o.placement_path).stem().string();
    if (!steps.empty()) base += "+" + fs::path(o.schedule_path).stem().string();
  }
  result.run_name = base;
  if (!o.runs_csv.empty()) {
    if (!WIFEXITED(result.wait_status) || WEXITSTATUS(result.wait_status) != 0) {
      return absl::AbortedError(StrCat("the command ended with ",
                                       DescribeWaitStatus(result.wait_status), "; not appended to ",
                                       o.runs_csv));
    }
    std::vector<MeasuredRun> runs;
    if (fs::exists(o.runs_csv)) {
      TG_ASSIGN_OR_RETURN(runs, ReadMeasuredRuns(o.runs_csv));
    }
    for (int k = 2;; ++k) {
      const bool taken = std::any_of(runs.begin(), runs.end(), [&](const MeasuredRun& r) {
        return r.name == result.run_name;
      });
      if (!taken) break;
      result.run_name = StrCat(base, "-", k);
    }
    MeasuredRun run;
    run.name = result.run_name;
    run.placement_path = o.placement_path;
    run.runtime_ns = std::max<uint64_t>(result.runtime_ns, 1);
    runs.push_back(run);
    TG_RETURN_IF_ERROR(WriteMeasuredRuns(runs, o.runs_csv));
  }
  if (!placer_error.ok()) return placer_error;
  return result;
}

}  // namespace tiergym::prof
