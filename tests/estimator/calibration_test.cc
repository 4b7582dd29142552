#include "estimator/calibration.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "estimator/cli/estimator_cli.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "traces/synth/app_model.h"
#include "traces/synth/generator.h"

namespace tiergym {
namespace {

using ::testing::HasSubstr;

TEST(CalibrationTest, FileRoundTripsAndErrorsNameTheField) {
  Calibration c;
  c.compute_overlap = 0.7;
  c.tier_overlap = 0.8;
  c.relative_noise = 0.0125;
  c.interval_scores = {0.5, 1.5};
  c.fitted_runs = 18;
  c.folds = 5;
  c.cv_mean_error_pct = 0.4;
  c.cv_max_error_pct = 1.5;
  c.uncalibrated_mean_error_pct = 0.9;
  c.uncalibrated_max_error_pct = 2.3;
  auto back = ParseCalibration(FormatCalibration(c), "c.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->model, Model::kRoofline);
  EXPECT_DOUBLE_EQ(back->compute_overlap, 0.7);
  EXPECT_DOUBLE_EQ(back->tier_overlap, 0.8);
  EXPECT_EQ(back->interval_scores, (std::vector<double>{0.5, 1.5}));
  EXPECT_DOUBLE_EQ(back->relative_noise, 0.0125);
  EXPECT_EQ(back->folds, 5);
  EXPECT_DOUBLE_EQ(back->uncalibrated_max_error_pct, 2.3);

  auto bad = ParseCalibration(
      R"({"format": "tiergym-calibration", "version": 2, "model": "roofline",
          "compute_overlap": 1.5, "relative_noise": 0})",
      "c.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("compute_overlap"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("c.json:"));
  auto unknown = ParseCalibration(
      R"({"format": "tiergym-calibration", "version": 1, "model": "roofline",
          "compute_overlap": 0.5, "relative_noise": 0, "overlapp": 1})",
      "c.json");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("overlapp"));
  EXPECT_FALSE(ParseCalibration(R"({"format": "other", "version": 1})", "c.json").ok());
  EXPECT_FALSE(ReadCalibration("/nonexistent/c.json").ok());
}

TEST(CalibrationTest, ReadsVersionOneFilesAsBefore) {
  auto v1 = ParseCalibration(
      R"({"format": "tiergym-calibration", "version": 1, "model": "roofline",
          "compute_overlap": 0.7, "relative_noise": 0.01})",
      "c.json");
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_DOUBLE_EQ(v1->compute_overlap, 0.7);
  EXPECT_DOUBLE_EQ(v1->tier_overlap, 1);
  EXPECT_TRUE(v1->interval_scores.empty());
  auto bad = ParseCalibration(
      R"({"format": "tiergym-calibration", "version": 2, "model": "roofline",
          "compute_overlap": 0.7, "relative_noise": 0.01,
          "interval": {"noise": 0.01, "model_error": 0.1, "scores": [1, -2]}})",
      "c.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("interval.scores"));
}

TEST(CalibrationTest, TheIntervalIsConformalOnTheScoresAndThePriorWithoutThem) {
  Calibration c;
  c.prior = {0.01, 0.1};
  const SamplingInterval none;
  // No scores: the prior, z * sd either side; sd = hypot(noise, model_error * delta).
  const double z = NormalQuantile(0.95);
  auto prior = CalibratedInterval(c, 100, 80, none, 0.9);  // delta = 0.2: sd = hypot(0.01, 0.02)
  EXPECT_NEAR(prior.hi_ns - 100, z * std::hypot(0.01, 0.02) * 100, 1e-9);
  EXPECT_NEAR(100 - prior.lo_ns, z * std::hypot(0.01, 0.02) * 100, 1e-9);
  // Nine scores: the ceil(10 * 0.9) = 9th smallest is the largest.
  c.interval_scores = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 3.0};
  auto conformal = CalibratedInterval(c, 100, 100, none, 0.9);  // delta 0: sd = noise
  EXPECT_NEAR(conformal.hi_ns - 100, 3.0 * 0.01 * 100, 1e-9);
  auto lower = CalibratedInterval(c, 100, 100, none, 0.5);  // the 5th: 0.5
  EXPECT_NEAR(lower.hi_ns - 100, 0.5 * 0.01 * 100, 1e-9);
  // The sampling interval adds in quadrature.
  SamplingInterval sampling;
  sampling.lo_ns = 99;
  sampling.hi_ns = 102;
  sampling.replicates = 10;
  auto both = CalibratedInterval(c, 100, 100, sampling, 0.5);
  EXPECT_NEAR(both.lo_ns, 100 - std::hypot(1.0, 0.5), 1e-9);
  EXPECT_NEAR(both.hi_ns, 100 + std::hypot(2.0, 0.5), 1e-9);
  EXPECT_TRUE(Inside(both, 101.5));
  EXPECT_FALSE(Inside(both, 103));
}

TEST(CalibrationTest, TheMixingTermWidensMixesOnlyAndRoundTripsInVersionThree) {
  EXPECT_DOUBLE_EQ(Mixing({1.0, 0.0, 0.0}), 0);
  EXPECT_DOUBLE_EQ(Mixing({0.5, 0.5}), 0.5);
  EXPECT_NEAR(Mixing({0.2, 0.3, 0.5}), 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(Mixing({}), 0);
  Calibration c;
  c.prior = {0.01, 0.1, 0.04};
  const SamplingInterval none;
  const double z = NormalQuantile(0.95);
  // A single-tier placement (mixing 0): the interval without the term.
  auto single = CalibratedInterval(c, 100, 80, none, 0.9, 0);
  EXPECT_NEAR(single.hi_ns - 100, z * std::hypot(0.01, 0.02) * 100, 1e-9);
  // A three-tier mix, mixing 0.6: sd = sqrt(0.01^2 + 0.02^2 + (0.04 * 0.6)^2).
  auto mix = CalibratedInterval(c, 100, 80, none, 0.9, 0.6);
  EXPECT_NEAR(mix.hi_ns - 100, z * std::hypot(0.01, 0.02, 0.024) * 100, 1e-9);
  // The conformal interval scales by the same sd.
  c.interval_scores = {0.5, 1.0, 2.0};
  auto conformal = CalibratedInterval(c, 100, 100, none, 0.5, 0.5);
  EXPECT_NEAR(conformal.hi_ns - 100, 1.0 * std::hypot(0.01, 0.02) * 100, 1e-9);

  auto back = ParseCalibration(FormatCalibration(c), "c.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_DOUBLE_EQ(back->prior.mix_error, 0.04);
  EXPECT_THAT(FormatCalibration(c), HasSubstr(R"("version": 3)"));
  // Version 2 files have no mix_error: read as 0, and the key is refused there.
  const std::string v2 =
      R"({"format": "tiergym-calibration", "version": 2, "model": "roofline",
          "compute_overlap": 0.7, "relative_noise": 0.01,
          "interval": {"noise": 0.01, "model_error": 0.1, "scores": [1, 2]}})";
  auto old = ParseCalibration(v2, "c.json");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_DOUBLE_EQ(old->prior.mix_error, 0);
  std::string v2_with = v2;
  v2_with.replace(v2_with.find(R"("scores")"), 8, R"("mix_error": 0.1, "scores")");
  auto refused = ParseCalibration(v2_with, "c.json");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("mix_error"));
  std::string v3_negative = v2_with;
  v3_negative.replace(v3_negative.find(R"("version": 2)"), 12, R"("version": 3)");
  v3_negative.replace(v3_negative.find("0.1, \"scores"), 3, "-1");
  auto negative = ParseCalibration(v3_negative, "c.json");
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(std::string(negative.status().message()), HasSubstr("interval.mix_error"));
}

struct Data {
  Profile profile;
  synth::SynthProfile generated;
  std::vector<std::pair<MeasuredRun, Placement>> runs;
};

const Data& Nekbone() {
  static const Data* data = [] {
    auto model = synth::LoadAppModel("nekbone");
    auto machine = LoadMachine("knl");
    synth::SynthOptions options;
    options.target_samples = 100000;
    options.chunks_per_phase = 50;
    auto generated = synth::GenerateProfile(*model, *machine, options);
    auto* d = new Data{*Profile::FromRuns("nekbone", generated->traces), *generated, {}};
    for (const synth::SynthRun& r : d->generated.runs) {
      d->runs.push_back({MeasuredRun{r.name, "", r.runtime_ns}, r.placement});
    }
    return d;
  }();
  return *data;
}

TEST(CalibrationTest, FitsTheOverlapAndScoresEveryRunOnAFitWithoutIt) {
  // nekbone's phases overlap compute and memory by 0.7 (0.3 for one): the prior 0.5 is
  // off, and two devices cannot tell.
  const Data& d = Nekbone();
  CalibrationOptions options;
  options.folds = 4;
  auto c = Calibrate(d.profile, RecommendedEstimatorOptions(d.generated.machine), d.runs, options);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_GT(c->compute_overlap, 0.5);
  EXPECT_EQ(c->fitted_runs, static_cast<int>(d.runs.size()));
  EXPECT_EQ(c->folds, 4);
  EXPECT_LT(c->cv_mean_error_pct, c->uncalibrated_mean_error_pct);
  EXPECT_GT(c->relative_noise, 0);
  EXPECT_LT(c->relative_noise, 0.05);
  // knl's two tiers transfer concurrently in the spec model: no tier overlap below 1 helps.
  EXPECT_DOUBLE_EQ(c->tier_overlap, 1);
  ASSERT_EQ(c->cv_inside.size(), d.runs.size());
  EXPECT_EQ(c->interval_scores.size(), d.runs.size());
  EXPECT_GE(c->cv_coverage, 0.5);

  options.folds = static_cast<int>(d.runs.size()) + 1;
  EXPECT_FALSE(
      Calibrate(d.profile, RecommendedEstimatorOptions(d.generated.machine), d.runs, options).ok());
  options.folds = 1;
  EXPECT_FALSE(
      Calibrate(d.profile, RecommendedEstimatorOptions(d.generated.machine), d.runs, options).ok());
}

TEST(CalibrationTest, CommandWritesAFileThatValidateReads) {
  namespace fs = std::filesystem;
  const std::string dir =
      fs::temp_directory_path() / ("tiergym-calibrate-" + std::to_string(getpid()));
  const Data& d = Nekbone();
  ASSERT_TRUE(synth::WriteSynthProfile(d.generated, dir, TraceFormat::kBinary).ok());
  const std::string app = dir + "/nekbone";
  const std::string out = dir + "/calibration.json";
  EXPECT_EQ(RunCalibrateCommand({"--profile", app + "/profile", "--runs", app + "/runs/runs.csv",
                                 "--machine", "knl", "--out", out, "--folds", "3", "--quiet"}),
            0);
  auto c = ReadCalibration(out);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->folds, 3);
  EXPECT_EQ(RunValidateCommand({"--profile", app + "/profile", "--runs", app + "/runs/runs.csv",
                                "--machine", "knl", "--calibration", out, "--replicates", "5"}),
            0);
  EXPECT_EQ(RunCalibrateCommand({"--profile", app + "/profile", "--out", out}), 2);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tiergym
