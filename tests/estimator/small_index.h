// A small synthetic profile (testing::SmallProfileOptions) of an app on a machine with its
// estimator index over ddr, built once per program and shared by its tests.
#ifndef TIERGYM_TESTS_ESTIMATOR_SMALL_INDEX_H_
#define TIERGYM_TESTS_ESTIMATOR_SMALL_INDEX_H_

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "estimator/estimator_index.h"
#include "gtest/gtest.h"
#include "tests/test_root.h"
#include "traces/machine.h"
#include "traces/profile.h"
#include "traces/synth/app_model.h"
#include "traces/synth/generator.h"

namespace tiergym::testing {

struct IndexedProfile {
  std::unique_ptr<Profile> profile;
  std::shared_ptr<const EstimatorIndex> index;
};

// `app`'s small profile on `machine`, indexed over ddr; with `index_machine` the index
// knows the machine (for the concurrent model). A failure fails the calling test and the
// returned members are null.
inline const IndexedProfile& SmallIndexedProfile(const std::string& app, const std::string& machine,
                                                 bool index_machine = false) {
  static auto* built = new std::map<std::tuple<std::string, std::string, bool>, IndexedProfile>();
  auto [it, inserted] = built->try_emplace({app, machine, index_machine});
  if (!inserted) return it->second;
  IndexedProfile& w = it->second;
  absl::StatusOr<synth::AppModel> model = synth::LoadAppModel(app);
  absl::StatusOr<Machine> m = LoadMachine(machine);
  EXPECT_TRUE(model.ok() && m.ok()) << model.status() << " " << m.status();
  if (!model.ok() || !m.ok()) return w;
  absl::StatusOr<synth::SynthProfile> generated =
      synth::GenerateProfile(*model, *m, SmallProfileOptions());
  EXPECT_TRUE(generated.ok()) << generated.status();
  if (!generated.ok()) return w;
  absl::StatusOr<Profile> profile = Profile::FromRuns(app, generated->traces);
  EXPECT_TRUE(profile.ok()) << profile.status();
  if (!profile.ok()) return w;
  w.profile = std::make_unique<Profile>(*std::move(profile));
  IndexOptions options;
  options.base_device = "ddr";
  if (index_machine) options.machine = *m;
  absl::StatusOr<std::shared_ptr<const EstimatorIndex>> index =
      EstimatorIndex::Build(*w.profile, options);
  EXPECT_TRUE(index.ok()) << index.status();
  if (index.ok()) w.index = *std::move(index);
  return w;
}

}  // namespace tiergym::testing

#endif  // TIERGYM_TESTS_ESTIMATOR_SMALL_INDEX_H_
