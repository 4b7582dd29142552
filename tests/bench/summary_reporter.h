// A Google Benchmark reporter for the tiergym benchmarks: prints the usual console table
// and keeps the mean real time per iteration of every benchmark, so that a benchmark's
// main can print ratios against a baseline measured in the same run.
#ifndef TIERGYM_TESTS_BENCH_SUMMARY_REPORTER_H_
#define TIERGYM_TESTS_BENCH_SUMMARY_REPORTER_H_

#include <map>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"

namespace tiergym {

class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred || run.run_type != Run::RT_Iteration || run.iterations == 0) {
        continue;
      }
      seconds_[run.run_name.function_name] =
          run.real_accumulated_time / static_cast<double>(run.iterations);
    }
  }
  // Seconds per iteration, or a negative value when the benchmark did not run.
  double Seconds(const std::string& name) const {
    auto it = seconds_.find(name);
    return it == seconds_.end() ? -1.0 : it->second;
  }

 private:
  std::map<std::string, double> seconds_;
};

}  // namespace tiergym

#endif  // TIERGYM_TESTS_BENCH_SUMMARY_REPORTER_H_
