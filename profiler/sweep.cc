#include "profiler/sweep.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include "absl/strings/str_join.h"
#include "profiler/launcher.h"
#include "traces/base/file.h"
#include "traces/base/json.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym::prof {
namespace {

namespace fs = std::filesystem;

constexpr char kHeader[] = "app,read_pct,interference_gbps,normalized_perf";
constexpr char kColumns[] =
    "app,read_pct,interference_gbps,normalized_perf,runtime_ns,solo_runtime_ns\n";
constexpr int kWarmupMs = 200;

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct State {
  std::string app, command;
  std::vector<uint64_t> solo_runtime_ns;
  std::map<int, double> max_gbps;  // per read share
};

std::string StatePath(const std::string& output) { return output + ".state.json"; }

absl::Status SaveState(const State& s, const std::string& path) {
  json::Writer w(2);
  w.BeginObject();
  w.Key("version");
  w.Uint(1);
  w.Key("app");
  w.String(s.app);
  w.Key("command");
  w.String(s.command);
  w.Key("solo_runtime_ns");
  w.BeginArray();
  for (uint64_t v : s.solo_runtime_ns) w.Uint(v);
  w.EndArray();
  w.Key("max_gbps");
  w.BeginObject();
  for (const auto& [pct, gbps] : s.max_gbps) {
    w.Key(StrCat(pct));
    w.Double(gbps);
  }
  w.EndObject();
  w.EndObject();
  return WriteFileAtomically(path, w.Take() + "\n");
}

absl::StatusOr<State> LoadState(const std::string& path) {
  TG_ASSIGN_OR_RETURN(json::Value root, json::ParseFile(path));
  json::ObjectReader r(root, path, "");
  TG_RETURN_IF_ERROR(r.CheckIsObject());
  TG_RETURN_IF_ERROR(r.OnlyKeys({"version", "app", "command", "solo_runtime_ns", "max_gbps"}));
  TG_ASSIGN_OR_RETURN(uint64_t version, r.RequiredUint64("version"));
  if (version != 1) return r.Error("version", nullptr, "only version 1 is known");
  State s;
  TG_ASSIGN_OR_RETURN(s.app, r.RequiredString("app"));
  TG_ASSIGN_OR_RETURN(s.command, r.RequiredString("command"));
  TG_ASSIGN_OR_RETURN(const json::Value* solo, r.RequiredArray("solo_runtime_ns"));
  for (const json::Value& v : solo->array()) {
    auto n = v.is_number() ? v.AsUint64() : std::nullopt;
    if (!n) return r.Error("solo_runtime_ns", &v, "expected integers");
    s.solo_runtime_ns.push_back(*n);
  }
  TG_ASSIGN_OR_RETURN(const json::Value* max, r.RequiredObject("max_gbps"));
  for (const auto& [key, v] : max->object()) {
    if (!v.is_number()) return r.Error("max_gbps", &v, "expected numbers");
    s.max_gbps[std::atoi(key.c_str())] = v.number();
  }
  return s;
}

// Rows already in curves.csv, counted by (app, read_pct, interference_gbps as written).
absl::StatusOr<std::map<std::string, int>> ExistingRows(const std::string& path) {
  std::map<std::string, int> rows;
  if (!fs::exists(path)) return rows;
  TG_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  size_t pos = 0;
  int line = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string row = text.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (!row.empty() && row.back() == '\r') row.pop_back();
    if (row.empty()) continue;
    if (line == 1) {
      if (row.rfind(kHeader, 0) != 0) {
        return absl::InvalidArgumentError(
            StrCat(path, ":1: column-line: expected columns starting ", kHeader,
                   " (another layout: write the sweep elsewhere)"));
      }
      continue;
    }
    // app,read_pct,gbps,...
    const size_t c1 = row.find(',');
    const size_t c2 = c1 == std::string::npos ? c1 : row.find(',', c1 + 1);
    const size_t c3 = c2 == std::string::npos ? c2 : row.find(',', c2 + 1);
    if (c3 == std::string::npos) {
      return absl::InvalidArgumentError(StrCat(path, ":", line, ": field-count: too few fields"));
    }
    ++rows[row.substr(0, c3)];
  }
  return rows;
}

std::string PointKey(const std::string& app, int read_pct, double gbps) {
  return StrCat(app, ",", read_pct, ",", FixedDecimal(gbps, 4));
}

absl::Status AppendLine(const std::string& path, const std::string& line) {
  std::ofstream out(path, std::ios::app);
  out << line;
  out.flush();
  if (!out) return absl::InternalError(StrCat("cannot append to ", path));
  return absl::OkStatus();
}

std::string ProgressBar(uint64_t done, uint64_t total) {
  constexpr int kWidth = 24;
  const int filled = total == 0 ? kWidth : static_cast<int>(kWidth * done / total);
  return StrCat("[", std::string(static_cast<size_t>(filled), '#'),
                std::string(static_cast<size_t>(kWidth - filled), '-'), "] ", done, "/", total);
}

}  // namespace

std::vector<double> SweepLevels(double max_gbps, int levels) {
  std::vector<double> out;
  if (levels <= 1) return {max_gbps};
  for (int i = 0; i < levels; ++i) {
    out.push_back(max_gbps * (0.1 + 0.9 * static_cast<double>(i) / (levels - 1)));
  }
  return out;
}

absl::StatusOr<SweepResult> RunSweep(const SweepOptions& o) {
  if (o.command.empty()) return absl::InvalidArgumentError("no target command");
  if (o.output.empty()) return absl::InvalidArgumentError("no curves.csv to write (-o)");
  if (o.levels < 1 || o.solo_repeats < 1 || o.repeats < 1) {
    return absl::InvalidArgumentError("levels, solo repeats and repeats must be at least 1");
  }
  std::vector<int> read_pcts = o.read_pcts;
  if (read_pcts.empty()) {
    for (int p = 50; p <= 100; p += 5) read_pcts.push_back(p);
  }
  for (int p : read_pcts) {
    if (p < 50 || p > 100) {
      return absl::InvalidArgumentError(StrCat("read share ", p, " % is outside 50..100 %"));
    }
  }
  State state;
  state.app = o.app.empty() ? fs::path(o.command[0]).filename().string() : o.app;
  state.command = absl::StrJoin(o.command, " ");
  const std::string state_path = StatePath(o.output);
  if (fs::exists(state_path)) {
    TG_ASSIGN_OR_RETURN(State old, LoadState(state_path));
    if (old.app != state.app || old.command != state.command) {
      return absl::FailedPreconditionError(StrCat(state_path, " belongs to another sweep (app '",
                                                  old.app, "', command '", old.command,
                                                  "'); remove it or write this sweep elsewhere"));
    }
    state = std::move(old);
  }
  TG_ASSIGN_OR_RETURN(auto existing, ExistingRows(o.output));
  if (!fs::exists(o.output)) TG_RETURN_IF_ERROR(WriteFileAtomically(o.output, kColumns));

  LaunchOptions launch;
  launch.argv = o.command;
  launch.membind_node = o.target_mem_node;
  launch.cpu_node = o.target_cpu_node;
  launch.cpus = o.target_cpus;
  if (!o.show_target_output) launch.stdout_path = "/dev/null";
  auto run_target = [&]() -> absl::StatusOr<uint64_t> {
    TG_ASSIGN_OR_RETURN(StoppedChild child, StoppedChild::Spawn(launch));
    const uint64_t start = NowNs();
    TG_RETURN_IF_ERROR(child.Release());
    TG_ASSIGN_OR_RETURN(int status, child.Wait());
    const uint64_t ns = NowNs() - start;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      return absl::AbortedError(StrCat("the target ended with ", DescribeWaitStatus(status),
                                       "; the sweep stops (run it again to resume)"));
    }
    return ns;
  };

  uint64_t total = 0;
  for (size_t i = 0; i < read_pcts.size(); ++i)
    total += static_cast<uint64_t>(o.levels * o.repeats);
  total += static_cast<uint64_t>(o.solo_repeats);
  uint64_t done = 0;
  auto progress = [&](const std::string& what) {
    if (o.progress)
      std::cerr << "\r" << ProgressBar(done, total) << "  " << what << "\x1b[K" << std::flush;
  };

  // Solo runs: the reference.
  while (state.solo_runtime_ns.size() < static_cast<size_t>(o.solo_repeats)) {
    progress("solo");
    TG_ASSIGN_OR_RETURN(uint64_t ns, run_target());
    state.solo_runtime_ns.push_back(ns);
    TG_RETURN_IF_ERROR(SaveState(state, state_path));
    ++done;
  }
  done = static_cast<uint64_t>(o.solo_repeats);
  double solo_sum = 0;
  for (size_t i = 0; i < static_cast<size_t>(o.solo_repeats); ++i) {
    solo_sum += static_cast<double>(state.solo_runtime_ns[i]);
  }
  SweepResult result;
  result.solo_mean_ns = solo_sum / o.solo_repeats;

  for (int pct : read_pcts) {
    // The generator's maximum at this read share, alone.
    double max = o.max_gbps;
    if (max <= 0) {
      auto known = state.max_gbps.find(pct);
      if (known != state.max_gbps.end()) {
        max = known->second;
      } else {
        progress(StrCat("calibrating read ", pct, " %"));
        InterferenceOptions cal = o.interferer;
        cal.target_gbps = 0;
        cal.read_pct = pct;
        TG_ASSIGN_OR_RETURN(auto gen, InterferenceGenerator::Start(cal));
        std::this_thread::sleep_for(std::chrono::milliseconds(kWarmupMs));
        const InterferenceStats a = gen->Stats();
        std::this_thread::sleep_for(
            std::chrono::milliseconds(static_cast<int>(o.calibrate_seconds * 1000)));
        const InterferenceStats b = gen->Stats();
        gen->Stop();
        max = static_cast<double>((b.read_bytes + b.write_bytes) - (a.read_bytes + a.write_bytes)) /
              (b.seconds - a.seconds) / 1e9;
        state.max_gbps[pct] = max;
        TG_RETURN_IF_ERROR(SaveState(state, state_path));
      }
    }
    for (double level : SweepLevels(max, o.levels)) {
      const std::string key = PointKey(state.app, pct, level);
      int have = existing.count(key) ? existing[key] : 0;
      result.points_skipped += static_cast<uint64_t>(std::min(have, o.repeats));
      done += static_cast<uint64_t>(std::min(have, o.repeats));
      for (; have < o.repeats; ++have) {
        progress(StrCat("read ", pct, " %  ", FixedDecimal(level, 2), " GB/s"));
        InterferenceOptions io = o.interferer;
        io.target_gbps = level;
        io.read_pct = pct;
        TG_ASSIGN_OR_RETURN(auto gen, InterferenceGenerator::Start(io));
        std::this_thread::sleep_for(std::chrono::milliseconds(kWarmupMs));
        auto ns = run_target();
        gen->Stop();
        if (!ns.ok()) return ns.status();
        const double perf = result.solo_mean_ns / static_cast<double>(*ns);
        TG_RETURN_IF_ERROR(AppendLine(
            o.output, StrCat(key, ",", FixedDecimal(perf, 5), ",", *ns, ",",
                             static_cast<uint64_t>(std::llround(result.solo_mean_ns)), "\n")));
        ++existing[key];
        ++result.points_measured;
        ++done;
      }
    }
  }
  progress("done");
  if (o.progress) std::cerr << "\n";
  return result;
}

}  // namespace tiergym::prof
