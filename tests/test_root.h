// Inputs a test program generates once and shares between its tests, in a directory of its
// own that is removed when its tests end.
//
//   TestRoot()                  "<tmp>/tiergym-<program>-<pid>" (not created until used)
//   SmallProfileDir("lulesh")   a small synthetic profile of the app on knl, generated under
//                               TestRoot() on first use; returns its profile directory
//
// Header-only, for the suites of tests/ (tiergym_test_support); not thread-safe (tests
// call it from the test's thread).
#ifndef TIERGYM_TESTS_TEST_ROOT_H_
#define TIERGYM_TESTS_TEST_ROOT_H_

#include <errno.h>  // program_invocation_short_name
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "gtest/gtest.h"
#include "traces/machine.h"
#include "traces/synth/app_model.h"
#include "traces/synth/generator.h"

namespace tiergym::testing {

// This test program's directory under the system's temporary directory: its name and
// process id make it its own, so suites running in parallel never share one.
inline const std::string& TestRoot() {
  static const std::string* const root = new std::string(
      (std::filesystem::temp_directory_path() /
       (std::string("tiergym-") + program_invocation_short_name + "-" + std::to_string(getpid())))
          .string());
  return *root;
}

// Removes TestRoot() and what it holds when the program's tests end (registered before
// RUN_ALL_TESTS, in every program that includes this header).
class RemoveTestRoot : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(TestRoot(), ec);
  }
};
inline ::testing::Environment* const kRemoveTestRoot =
    ::testing::AddGlobalTestEnvironment(new RemoveTestRoot);

// The options of a small synthetic profile: 20,000 samples, 40 chunks a phase, no measured
// runs (generated in a fraction of a second).
inline synth::SynthOptions SmallProfileOptions() {
  synth::SynthOptions options;
  options.target_samples = 20000;
  options.chunks_per_phase = 40;
  options.measured_runs = false;
  return options;
}

// The profile directory of a small synthetic profile (SmallProfileOptions) of `app` on
// `machine` (binary traces), generated under TestRoot() on first use; a failure to
// generate it fails the calling test.
inline std::string SmallProfileDir(const std::string& app, const std::string& machine = "knl") {
  const std::string dir = TestRoot() + "/" + machine;
  const std::string profile = dir + "/" + app + "/profile";
  if (std::filesystem::exists(profile)) return profile;
  absl::StatusOr<synth::AppModel> model = synth::LoadAppModel(app);
  EXPECT_TRUE(model.ok()) << model.status();
  absl::StatusOr<Machine> m = LoadMachine(machine);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!model.ok() || !m.ok()) return profile;
  absl::StatusOr<synth::SynthProfile> generated =
      synth::GenerateProfile(*model, *m, SmallProfileOptions());
  EXPECT_TRUE(generated.ok()) << generated.status();
  if (!generated.ok()) return profile;
  const absl::Status written = synth::WriteSynthProfile(*generated, dir, TraceFormat::kBinary);
  EXPECT_TRUE(written.ok()) << written;
  return profile;
}

}  // namespace tiergym::testing

#endif  // TIERGYM_TESTS_TEST_ROOT_H_
