#include "estimator/calibration.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "estimator/cli/estimator_cli.h"
#include "estimator/models/roofline_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "traces/synth/app_model.h"
#include "traces/synth/generator.h"
#include "traces/synth/truth_model.h"

namespace tiergym {
namespace {

using ::testing::ElementsAre;
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

// An interval key added in version `since`: a file of the version before (`old`, whose
// interval lacks the key) reads it as 0 (`get`) and refuses it by name; in version `since`
// a negative value is refused by its field path.
void ExpectIntervalKeySince(const std::string& old, const std::string& key, int since,
                            double (*get)(const Calibration&)) {
  auto parsed = ParseCalibration(old, "c.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_DOUBLE_EQ(get(*parsed), 0);
  std::string with = old;
  with.replace(with.find(R"("scores")"), 8, "\"" + key + "\": 0.1, \"scores\"");
  auto refused = ParseCalibration(with, "c.json");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr(key));
  const std::string before = "\"version\": " + std::to_string(since - 1);
  with.replace(with.find(before), before.size(), "\"version\": " + std::to_string(since));
  with.replace(with.find("0.1, \"scores"), 3, "-1");
  auto negative = ParseCalibration(with, "c.json");
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(std::string(negative.status().message()), HasSubstr("interval." + key));
}

TEST(CalibrationTest, TheMixingTermWidensMixesOnlyAndRoundTripsSinceVersionThree) {
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
  EXPECT_THAT(FormatCalibration(c), HasSubstr(R"("version": 8)"));
  // Version 2 files have no mix_error: read as 0, and the key is refused there.
  ExpectIntervalKeySince(
      R"({"format": "tiergym-calibration", "version": 2, "model": "roofline",
          "compute_overlap": 0.7, "relative_noise": 0.01,
          "interval": {"noise": 0.01, "model_error": 0.1, "scores": [1, 2]}})",
      "mix_error", 3, [](const Calibration& c) { return c.prior.mix_error; });
}

TEST(CalibrationTest, TheSerializationTermWidensByTheTierOverlapAndRoundTripsSinceVersionFive) {
  EXPECT_DOUBLE_EQ(Serialization(100, 100), 0);
  EXPECT_NEAR(Serialization(100, 130), 0.3, 1e-12);
  Calibration c;
  c.prior = {0.01, 0.1, 0, 0.2};
  const SamplingInterval none;
  const double z = NormalQuantile(0.95);
  // sd = sqrt(0.01^2 + (0.1 * 0.2)^2 + (0.2 * 0.3)^2): delta 0.2, serialization 0.3.
  auto wide = CalibratedInterval(c, 100, 80, none, 0.9, 0, 0.3);
  EXPECT_NEAR(wide.hi_ns - 100, z * std::hypot(0.01, 0.02, 0.06) * 100, 1e-9);
  EXPECT_NEAR(100 - wide.lo_ns, z * std::hypot(0.01, 0.02, 0.06) * 100, 1e-9);
  auto single = CalibratedInterval(c, 100, 80, none, 0.9, 0, 0);
  EXPECT_NEAR(single.hi_ns - 100, z * std::hypot(0.01, 0.02) * 100, 1e-9);
  c.interval_scores = {0.5, 1.0, 2.0};
  auto conformal = CalibratedInterval(c, 100, 100, none, 0.5, 0, 0.3);
  EXPECT_NEAR(conformal.hi_ns - 100, 1.0 * std::hypot(0.01, 0.06) * 100, 1e-9);

  auto back = ParseCalibration(FormatCalibration(c), "c.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_DOUBLE_EQ(back->prior.overlap_error, 0.2);
  // A version 4 file's scores were divided by a scale without the term: read as 0 (not
  // the default prior's), and the key is refused there.
  EXPECT_GT(IntervalPrior{}.overlap_error, 0);
  ExpectIntervalKeySince(
      R"({"format": "tiergym-calibration", "version": 4, "model": "roofline",
          "compute_overlap": 0.7, "relative_noise": 0.01,
          "interval": {"noise": 0.01, "model_error": 0.1, "mix_error": 0, "scores": [1, 2]}})",
      "overlap_error", 5, [](const Calibration& c) { return c.prior.overlap_error; });
}

TEST(CalibrationTest, TheSerializationTermHoldsTheMixesOfTiersThatOverlapPartly) {
  // Ground truth `overlap` (traces/SYNTH.md section 10): the tiers' bandwidth-bound times
  // overlap by 70 %, and the default estimate (1) underprices the mixes whose tiers'
  // times are alike. Their serialization is what tells them apart: 0 on one tier, largest
  // on those mixes; the default prior's interval holds more of the mixes with the term than
  // the same prior without it.
  auto model = synth::LoadAppModel("lulesh");
  ASSERT_TRUE(model.ok()) << model.status();
  auto machine = LoadMachine("disagg");
  ASSERT_TRUE(machine.ok()) << machine.status();
  synth::SynthOptions options;
  options.target_samples = 100000;
  options.chunks_per_phase = 50;
  options.truth = *synth::LoadTruthModel("overlap");
  auto generated = synth::GenerateProfile(*model, *machine, options);
  ASSERT_TRUE(generated.ok()) << generated.status();
  auto estimator = Estimator::Create(*Profile::FromRuns("lulesh", generated->traces),
                                     RecommendedEstimatorOptions(*machine));
  ASSERT_TRUE(estimator.ok()) << estimator.status();
  // The serialized estimates (the tier overlap 0, on the index as built) are those of an
  // index built with the tier overlap 0.
  EstimatorOptions serial_options = RecommendedEstimatorOptions(*machine);
  serial_options.tier_overlap = 0;
  auto built_serial =
      Estimator::Create(*Profile::FromRuns("lulesh", generated->traces), serial_options);
  ASSERT_TRUE(built_serial.ok()) << built_serial.status();
  IntervalPrior without = IntervalPrior{};
  without.overlap_error = 0;
  // One tier holding everything: nothing to serialize.
  for (const TierSpec& tier : machine->tiers) {
    SCOPED_TRACE(tier.name);
    const Placement all_on{tier.name, {}, {}};
    auto est = (*estimator)->EstimatePlacement(all_on, Model::kRoofline);
    ASSERT_TRUE(est.ok()) << est.status();
    auto serialized = (*estimator)->SerializedRuntimeNs(all_on, Model::kRoofline);
    ASSERT_TRUE(serialized.ok()) << serialized.status();
    EXPECT_NEAR(Serialization(est->runtime_ns, *serialized), 0, 1e-9);
  }
  int mixes = 0, with_inside = 0, without_inside = 0;
  const SamplingInterval none;
  for (const synth::SynthRun& run : generated->runs) {
    SCOPED_TRACE(run.name);
    auto est = (*estimator)->EstimatePlacement(run.placement, Model::kRoofline);
    ASSERT_TRUE(est.ok()) << est.status();
    auto paper = (*estimator)->EstimatePlacement(run.placement, Model::kPaper);
    ASSERT_TRUE(paper.ok()) << paper.status();
    auto serialized = (*estimator)->SerializedRuntimeNs(run.placement, Model::kRoofline);
    ASSERT_TRUE(serialized.ok()) << serialized.status();
    EXPECT_NEAR(*serialized,
                (*built_serial)->EstimatePlacement(run.placement, Model::kRoofline)->runtime_ns,
                1e-9 * *serialized);
    // The other models do not read the tier overlap: their serialized estimate is theirs.
    auto index = (*estimator)->IndexFor(run.placement.default_tier);
    ASSERT_TRUE(index.ok()) << index.status();
    const auto resolved = (*index)->Resolve(run.placement);
    ASSERT_TRUE(resolved.ok()) << resolved.status();
    for (Model other : {Model::kPaper, Model::kConcurrent}) {
      EXPECT_EQ(*(*index)->RuntimeNs(*resolved, other, 0), *(*index)->RuntimeNs(*resolved, other));
      EXPECT_EQ(*(*estimator)->SerializedRuntimeNs(run.placement, other),
                *(*index)->RuntimeNs(*resolved, other));
    }
    EXPECT_NE(*(*index)->RuntimeNs(*resolved, Model::kRoofline, 0),
              *(*index)->RuntimeNs(*resolved, Model::kRoofline));
    EXPECT_EQ(*(*index)->RuntimeNs(*resolved, Model::kRoofline, 1),
              *(*index)->RuntimeNs(*resolved, Model::kRoofline));
    const double serial = Serialization(est->runtime_ns, *serialized);
    const double mixing = Mixing(est->access_share);
    EXPECT_GE(*serialized, est->runtime_ns * (1 - 1e-12));
    if (run.name.rfind("mix-", 0) != 0) continue;
    ++mixes;
    const auto measured = static_cast<double>(run.runtime_ns);
    with_inside += Inside(PriorInterval(IntervalPrior{}, est->runtime_ns, paper->runtime_ns, none,
                                        0.9, mixing, serial),
                          measured);
    without_inside += Inside(
        PriorInterval(without, est->runtime_ns, paper->runtime_ns, none, 0.9, mixing, serial),
        measured);
  }
  ASSERT_GT(mixes, 3);
  EXPECT_GT(with_inside, without_inside);
  EXPECT_GE(with_inside, mixes * 3 / 4);
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

TEST(CalibrationTest, VersionFourRoundTripsTheQueueingAndRefusesBadValuesByName) {
  Calibration c;
  c.queue_strength = 1.5;
  c.queue_like = "xeonmax:ddr";
  c.queue_shape = *LoadQueueShape("xeonmax:ddr");
  const std::string text = FormatCalibration(c);
  EXPECT_THAT(text, HasSubstr(R"("version": 8)"));
  auto back = ParseCalibration(text, "c.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_DOUBLE_EQ(back->queue_strength, 1.5);
  EXPECT_EQ(back->queue_like, "xeonmax:ddr");
  ASSERT_TRUE(back->queue_shape.has_value());
  EXPECT_EQ(back->queue_shape->name, "ddr");
  EXPECT_FALSE(back->queue_shape->curves.empty());
  EstimatorOptions options;
  EXPECT_TRUE(options.queue_from_profile);  // the default: read from the profile
  ApplyCalibration(*back, &options);
  ASSERT_TRUE(options.queue_like.has_value());
  EXPECT_DOUBLE_EQ(options.queue_strength, 1.5);
  EXPECT_FALSE(options.queue_from_profile);  // the fitted strength supersedes it
  // A fitted strength of 0: flat tiers, whatever the options said or the profile shows.
  back->queue_strength = 0;
  options = EstimatorOptions{};
  ApplyCalibration(*back, &options);
  EXPECT_FALSE(options.queue_like.has_value());
  EXPECT_FALSE(options.queue_from_profile);
  // Without a queueing fit (version 3, or 4 without the keys) the options are left alone.
  Calibration none;
  EXPECT_THAT(FormatCalibration(none), ::testing::Not(HasSubstr("queue_strength")));
  options = EstimatorOptions{};
  options.queue_like = c.queue_shape;
  ApplyCalibration(*ParseCalibration(FormatCalibration(none), "c.json"), &options);
  EXPECT_TRUE(options.queue_like.has_value());
  EXPECT_TRUE(options.queue_from_profile);

  auto refused = [&](const std::string& from, const std::string& to) {
    std::string bad = text;
    bad.replace(bad.find(from), from.size(), to);
    auto parsed = ParseCalibration(bad, "c.json");
    EXPECT_FALSE(parsed.ok()) << to;
    return parsed.ok() ? std::string() : std::string(parsed.status().message());
  };
  EXPECT_THAT(refused(R"("queue_strength": 1.5)", R"("queue_strength": 4.5)"),
              HasSubstr("queue_strength"));
  EXPECT_THAT(refused(R"("queue_strength": 1.5)", R"("queue_strength": -0.5)"),
              HasSubstr("queue_strength"));
  EXPECT_THAT(refused(R"("queue_like": "xeonmax:ddr")", R"("queue_like": "xeonmax:nope")"),
              HasSubstr("queue_like"));
  EXPECT_THAT(refused(R"("queue_like": "xeonmax:ddr")", R"("queue_like": "knl:ddr")"),
              HasSubstr("measured curves"));
  EXPECT_THAT(refused(R"("queue_like": "xeonmax:ddr",)", ""), HasSubstr("queue_like"));
  EXPECT_THAT(refused(R"("version": 8)", R"("version": 3)"), HasSubstr("version 4 key"));
}

TEST(CalibrationTest, VersionSixRecordsTheFitSpanAndEstimatesWithTheFileUseIt) {
  Calibration c;
  c.fit_span_samples = 2048;
  const std::string text = FormatCalibration(c);
  EXPECT_THAT(text, HasSubstr(R"("fit_span": 2048)"));
  auto back = ParseCalibration(text, "c.json");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(back->fit_span_samples.has_value());
  EXPECT_EQ(*back->fit_span_samples, 2048u);
  EstimatorOptions options;
  ApplyCalibration(*back, &options);
  EXPECT_EQ(options.fit_span_samples, 2048u);
  EXPECT_TRUE(ConflictingOptions(*back, options).empty());
  options.fit_span_samples = 0;
  const std::vector<OptionConflict> span = ConflictingOptions(*back, options);
  ASSERT_EQ(span.size(), 1u);
  EXPECT_EQ(span[0].key, "fit-span");
  EXPECT_EQ(span[0].recorded, "2048");
  EXPECT_EQ(span[0].other, "0");
  // A file without the key (version 5, which never had it) leaves the span alone.
  Calibration old;
  EXPECT_THAT(FormatCalibration(old), ::testing::Not(HasSubstr("fit_span")));
  options.fit_span_samples = 1024;
  ApplyCalibration(*ParseCalibration(FormatCalibration(old), "c.json"), &options);
  EXPECT_EQ(options.fit_span_samples, 1024u);
  std::string v5 = text;
  v5.replace(v5.find(R"("version": 8)"), 12, R"("version": 5)");
  auto refused = ParseCalibration(v5, "c.json");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("fit_span"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("version 6 key"));
  std::string negative = text;
  negative.replace(negative.find("2048"), 4, "-1");
  EXPECT_FALSE(ParseCalibration(negative, "c.json").ok());
  std::string nine = text;
  nine.replace(nine.find(R"("version": 8)"), 12, R"("version": 9)");
  EXPECT_FALSE(ParseCalibration(nine, "c.json").ok());
}

TEST(CalibrationTest, VersionSevenRecordsTheEstimatesOptionsAndEstimatesWithTheFileUseThem) {
  EstimatorOptions fitted;
  fitted.block_samples = 512;
  fitted.first_touch = FirstTouchFootprint::kExtended;
  fitted.join_sweeps = false;
  fitted.share_bias = ShareBias::kCorrect;
  fitted.use_phasemarks = false;
  fitted.read_pct = 62.5;
  fitted.limit_smoothness = 4;
  fitted.fit_tolerance = 0.003;
  Calibration c;
  c.options = RecordedOptions(fitted);
  ASSERT_EQ(c.options.size(), 15u);
  const std::string text = FormatCalibration(c);
  EXPECT_THAT(text, HasSubstr(R"("block-samples": "512")"));
  EXPECT_THAT(text, HasSubstr(R"("first-touch": "extended")"));
  EXPECT_THAT(text, HasSubstr(R"("phasemarks": "off")"));
  EXPECT_THAT(text, HasSubstr(R"("read-pct": "62.5")"));
  auto back = ParseCalibration(text, "c.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->options, c.options);
  // Applied, every recorded option is the file's; options it does not record stay.
  EstimatorOptions options;
  options.compute_overlap = 0.3;
  EXPECT_EQ(ConflictingOptions(*back, options).size(), 7u);  // first-touch is one
  ApplyCalibration(*back, &options);
  EXPECT_TRUE(ConflictingOptions(*back, options).empty());
  EXPECT_EQ(RecordedOptions(options), RecordedOptions(fitted));
  EXPECT_EQ(options.block_samples, 512u);
  EXPECT_EQ(options.first_touch, FirstTouchFootprint::kExtended);
  EXPECT_FALSE(options.use_phasemarks);
  EXPECT_EQ(options.read_pct, 62.5);
  EXPECT_EQ(options.share_bias, ShareBias::kCorrect);
  EXPECT_EQ(options.fit_tolerance, 0.003);
  const std::vector<OptionConflict> one = ConflictingOptions(*back, [&] {
    EstimatorOptions o = options;
    o.block_samples = 256;
    return o;
  }());
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].key, "block-samples");
  EXPECT_EQ(one[0].recorded, "512");
  EXPECT_EQ(one[0].other, "256");
  // Errors name the key and the rule; every key is required, no other is taken, and a
  // version 6 file has none.
  auto refused = [&](const std::string& from, const std::string& to) {
    std::string bad = text;
    const size_t at = bad.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    bad.replace(at, from.size(), to);
    auto r = ParseCalibration(bad, "c.json");
    EXPECT_FALSE(r.ok()) << to;
    return r.ok() ? std::string() : std::string(r.status().message());
  };
  EXPECT_THAT(refused(R"("block-samples": "512")", R"("block-samples": "0")"),
              HasSubstr("options.block-samples: must be a positive integer"));
  EXPECT_THAT(refused(R"("first-touch": "extended")", R"("first-touch": "random")"),
              HasSubstr("sweeps, extents, extended or base"));
  EXPECT_THAT(refused(R"("read-pct": "62.5")", R"("read-pct": "101")"),
              HasSubstr("options.read-pct"));
  EXPECT_THAT(refused(R"("limit-smoothness": "4")", R"("limit-smoothness": "0.5")"),
              HasSubstr("options.limit-smoothness"));
  EXPECT_THAT(refused(R"("share-bias": "correct",)", ""), HasSubstr("share-bias"));
  EXPECT_THAT(refused(R"("read-pct": "62.5")", R"("read-pct": "62.5", "colour": "red")"),
              HasSubstr("colour"));
  EXPECT_THAT(refused(R"("share-bias")", R"("share_bias")"),
              HasSubstr("options.share_bias: is not an option a calibration records"));
  EXPECT_THAT(refused(R"("window": "1000000")", R"("window": 1000000)"),
              HasSubstr("options.window"));
  EXPECT_THAT(refused(R"("version": 8)", R"("version": 6)"), HasSubstr("version 7 key"));
  EXPECT_THAT(refused(R"("fit-tolerance": "0.003")", R"("fit-tolerance": "0.5")"),
              HasSubstr("options.fit-tolerance: must be a number in [0, 0.1]"));
  // Version 8 added the fit tolerance: a version 7 file has none (the estimate's own is
  // left alone) and may not name it.
  EXPECT_THAT(refused(R"("version": 8)", R"("version": 7)"),
              HasSubstr("options.fit-tolerance: is a version 8 key (this file says version 7)"));
  std::string seven = text;
  seven.replace(seven.find(R"("version": 8)"), 12, R"("version": 7)");
  const std::string key = R"("fit-tolerance": "0.003",)";
  ASSERT_NE(seven.find(key), std::string::npos) << seven;
  seven.erase(seven.find(key), key.size());
  auto v7 = ParseCalibration(seven, "c.json");
  ASSERT_TRUE(v7.ok()) << v7.status() << "\n" << seven;
  EXPECT_EQ(v7->options.size(), 14u);
  EstimatorOptions tolerant;
  tolerant.fit_tolerance = 0.01;
  for (const OptionConflict& conflict : ConflictingOptions(*v7, tolerant)) {
    EXPECT_NE(conflict.key, "fit-tolerance");
  }
  ApplyCalibration(*v7, &tolerant);
  EXPECT_EQ(tolerant.fit_tolerance, 0.01);
  // The machine it was fitted on: estimates on another, or without one, are refused.
  Calibration on_disagg = c;
  on_disagg.machine = "disagg";
  const std::string with_machine = FormatCalibration(on_disagg);
  EXPECT_THAT(with_machine, HasSubstr(R"("machine": "disagg")"));
  auto read = ParseCalibration(with_machine, "c.json");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->machine, "disagg");
  Machine disagg, knl;
  disagg.name = "disagg";
  knl.name = "knl";
  EXPECT_TRUE(CheckCalibrationMachine(*read, disagg).ok());
  EXPECT_THAT(std::string(CheckCalibrationMachine(*read, knl).message()),
              HasSubstr("fitted on machine 'disagg', not 'knl'"));
  EXPECT_THAT(std::string(CheckCalibrationMachine(*read, std::nullopt).message()),
              HasSubstr("not without a machine"));
  EXPECT_TRUE(CheckCalibrationMachine(*back, knl).ok());  // none recorded
  std::string unnamed = with_machine;
  unnamed.replace(unnamed.find(R"("disagg")"), 8, R"("")");
  EXPECT_FALSE(ParseCalibration(unnamed, "c.json").ok());
  // A file without them (version 6, or older) leaves the options alone.
  EstimatorOptions untouched;
  untouched.block_samples = 1024;
  ApplyCalibration(Calibration{}, &untouched);
  EXPECT_EQ(untouched.block_samples, 1024u);
}

TEST(CalibrationTest, TheQueueStrengthScalesTheCurvesRiseOfFlatTiersOnly) {
  const TierSpec shape = *LoadQueueShape("xeonmax:ddr");
  const Machine disagg = *LoadMachine("disagg");
  const TierSpec& flat = disagg.tiers[0];
  IndexOptions options;
  EXPECT_TRUE(QueueingCurve(flat, options).flat());
  options.queue_like = shape;
  const LoadCurve full = QueueingCurve(flat, options);
  options.queue_strength = 0.5;
  const LoadCurve half = QueueingCurve(flat, options);
  ASSERT_FALSE(full.flat());
  EXPECT_DOUBLE_EQ(half.idle_latency_ns, flat.latency_ns);
  for (double u : {0.3, 0.8, 1.0}) {
    EXPECT_GT(full.Ratio(u), 1) << u;
    EXPECT_NEAR(half.Ratio(u) - 1, 0.5 * (full.Ratio(u) - 1), 1e-12) << u;
  }
  options.queue_strength = 0;
  EXPECT_TRUE(QueueingCurve(flat, options).flat());
  // A tier with its own curves follows them at any strength.
  options.queue_strength = 2;
  EXPECT_EQ(QueueingCurve(shape, options).ratio, shape.CurveAt(100).ratio);

  EstimatorOptions bad = RecommendedEstimatorOptions(disagg);
  bad.queue_like = shape;
  bad.queue_strength = kMaxQueueStrength + 1;
  const Data& d = Nekbone();
  auto estimator = Estimator::Create(d.profile, bad);
  absl::Status s = estimator.ok() ? (*estimator)->IndexFor("ddr").status() : estimator.status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("queue_strength"));
}

// hotset on disagg (its hot table loads a tier to its peak, where a queueing tier's
// latency doubles) under the ground truth `truth` (traces/SYNTH.md, section 10).
Data Hotset(const std::string& truth) {
  auto model = synth::LoadAppModel("hotset");
  auto machine = LoadMachine("disagg");
  synth::SynthOptions options;
  options.seed = 3;
  options.target_samples = 100000;
  options.chunks_per_phase = 50;
  options.truth = *synth::LoadTruthModel(truth);
  auto generated = synth::GenerateProfile(*model, *machine, options);
  Data d{*Profile::FromRuns("hotset", generated->traces), *generated, {}};
  for (const synth::SynthRun& r : d.generated.runs) {
    d.runs.push_back({MeasuredRun{r.name, "", r.runtime_ns}, r.placement});
  }
  return d;
}

TEST(CalibrationTest, FitsTheQueueStrengthOfAQueueingMachine) {
  // Under `queueing` the flat tiers queue along xeonmax's measured DDR5 curve: strength 1.
  // (Under the spec model they do not: FitsTheOverlapAndScoresEveryRunOnAFitWithoutIt.)
  const Data queueing = Hotset("queueing");
  CalibrationOptions options;
  options.folds = 3;
  auto c = Calibrate(queueing.profile, RecommendedEstimatorOptions(queueing.generated.machine),
                     queueing.runs, options);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_GE(c->queue_strength, 0.5);
  EXPECT_LE(c->queue_strength, 1.5);
  EXPECT_EQ(c->queue_like, "xeonmax:ddr");
  EXPECT_LT(c->cv_mean_error_pct, 0.5 * c->uncalibrated_mean_error_pct);
  EXPECT_LT(c->cv_max_error_pct, c->uncalibrated_max_error_pct);
  // Options that queue along a curve must name it (the file records it).
  options.queue_like = "";
  EstimatorOptions with_curve = RecommendedEstimatorOptions(queueing.generated.machine);
  with_curve.queue_like = *LoadQueueShape("xeonmax:ddr");
  EXPECT_FALSE(Calibrate(queueing.profile, with_curve, queueing.runs, options).ok());
  options.queue_like = "xeonmax";
  auto unnamed =
      Calibrate(queueing.profile, RecommendedEstimatorOptions(queueing.generated.machine),
                queueing.runs, options);
  ASSERT_FALSE(unnamed.ok());
  EXPECT_THAT(std::string(unnamed.status().message()), HasSubstr("queue_like"));
}

TEST(CalibrationTest, FitsTheLimitSmoothnessOfAMachineWhoseLimitsBlend) {
  // Under `smooth` latency- and bandwidth-bound time combine as the 4-norm, not the hard
  // maximum the estimate assumes. Without a queueing fit to stand in for it (a latency
  // that rises near the limit looks alike), the fit finds a smoothness and errs less than
  // the hard maximum; under the spec model it keeps the hard maximum. The file records the
  // fitted value and estimates with it use it.
  CalibrationOptions options;
  options.folds = 3;
  options.queue_like = "";  // no queueing fit
  const Data smooth = Hotset("smooth");
  const EstimatorOptions base = RecommendedEstimatorOptions(smooth.generated.machine);
  auto hard = Calibrate(smooth.profile, base, smooth.runs, options);
  ASSERT_TRUE(hard.ok()) << hard.status();
  options.fit_smoothness = true;
  auto fitted = Calibrate(smooth.profile, base, smooth.runs, options);
  ASSERT_TRUE(fitted.ok()) << fitted.status();
  EstimatorOptions applied = base;
  ApplyCalibration(*fitted, &applied);
  EXPECT_GE(applied.limit_smoothness, 2);
  EXPECT_LT(fitted->cv_mean_error_pct, hard->cv_mean_error_pct);
  EXPECT_LT(fitted->cv_max_error_pct, hard->cv_max_error_pct);
  const auto recorded = std::find_if(fitted->options.begin(), fitted->options.end(),
                                     [](const auto& kv) { return kv.first == "limit-smoothness"; });
  ASSERT_NE(recorded, fitted->options.end());
  EXPECT_EQ(recorded->second, applied.limit_smoothness == 2 ? "2" : "4");
  EstimatorOptions unfitted = base;
  ApplyCalibration(*hard, &unfitted);
  EXPECT_EQ(unfitted.limit_smoothness, 0);

  const Data spec = Hotset("spec");
  auto kept = Calibrate(spec.profile, base, spec.runs, options);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EstimatorOptions spec_applied = base;
  ApplyCalibration(*kept, &spec_applied);
  EXPECT_EQ(spec_applied.limit_smoothness, 0);
}

TEST(CalibrationTest, FitsComputeHiddenUnderTheFastTiersLatencyFromTheMeasuredMixes) {
  // Under `hiding` compute hides 85 % of the shorter of compute and memory time. hotset's
  // scan is then compute-bound on hbm, which its three runs cannot tell from latency-bound
  // within their noise: at any other overlap its blocks read as latency-bound, and a mix
  // that adds the remote tier's latency to hbm's is overpriced; so it is when the blocks
  // fit their own overlaps (the default), from the prior or even from the truth. The
  // measured mixes tell the overlap, which then holds for every block: the fit chooses
  // that over per-block fits.
  const Data hiding = Hotset("hiding");
  EstimatorOptions base = RecommendedEstimatorOptions(hiding.generated.machine);
  base.compute_overlap = kCalibrationComputeOverlap;
  ASSERT_TRUE(base.fit_overlap);
  CalibrationOptions options;
  options.folds = 3;
  auto c = Calibrate(hiding.profile, base, hiding.runs, options);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NEAR(c->compute_overlap, 0.85, 0.051);  // the 0.05 grid's nearest to the truth
  EstimatorOptions calibrated = base;
  ApplyCalibration(*c, &calibrated);
  EXPECT_FALSE(calibrated.fit_overlap);  // the file records it
  EstimatorOptions per_block = calibrated;
  per_block.fit_overlap = true;
  auto error_pct = [&](const EstimatorOptions& o, const std::string& run) {
    auto estimator = Estimator::Create(hiding.profile, o);
    EXPECT_TRUE(estimator.ok()) << estimator.status();
    for (const auto& [measured, placement] : hiding.runs) {
      if (measured.name != run) continue;
      auto e = (*estimator)->EstimatePlacement(placement, Model::kRoofline);
      EXPECT_TRUE(e.ok()) << e.status();
      return 100 * (e->runtime_ns / static_cast<double>(measured.runtime_ns) - 1);
    }
    ADD_FAILURE() << "no run " << run;
    return 0.0;
  };
  // The first quarter of every array on hbm, the last on remote.
  EXPECT_GT(error_pct(base, "mix-ranges-quarters"), 3.5);
  EXPECT_GT(error_pct(per_block, "mix-ranges-quarters"), 3.5);
  EXPECT_LT(std::fabs(error_pct(calibrated, "mix-ranges-quarters")), 1.5);
  // With two devices the blocks' overlap fits do not act: nothing to choose
  // (FitsTheOverlapAndScoresEveryRunOnAFitWithoutIt, CommandWritesAFileThatValidateReads).
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
  // knl's two tiers transfer concurrently in the spec model: no tier overlap below the
  // prior (1) helps, and they do not queue.
  EXPECT_EQ(c->tier_overlap, 1);
  // The uncalibrated error is the default estimate's on the same runs (the prior is a
  // candidate of the grid: a prior off it was once rounded to another tier overlap).
  auto estimator = Estimator::Create(d.profile, RecommendedEstimatorOptions(d.generated.machine));
  ASSERT_TRUE(estimator.ok()) << estimator.status();
  double default_mean = 0;
  for (const auto& [run, placement] : d.runs) {
    auto e = (*estimator)->EstimatePlacement(placement, Model::kRoofline);
    ASSERT_TRUE(e.ok()) << e.status();
    default_mean += 100 * std::fabs(e->runtime_ns / static_cast<double>(run.runtime_ns) - 1);
  }
  EXPECT_NEAR(c->uncalibrated_mean_error_pct, default_mean / static_cast<double>(d.runs.size()),
              1e-9);
  EXPECT_DOUBLE_EQ(c->queue_strength, 0);
  ASSERT_EQ(c->cv_inside.size(), d.runs.size());
  EXPECT_EQ(c->interval_scores.size(), d.runs.size());
  EXPECT_GE(c->cv_coverage, 0.5);
  // Each run was held out in its fold of CalibrationFolds, and scored by that fold's fit:
  // an estimator built with the fold's parameters prices it as the cross-validation did.
  std::vector<Placement> placements;
  std::vector<size_t> all;
  for (size_t i = 0; i < d.runs.size(); ++i) {
    placements.push_back(d.runs[i].second);
    all.push_back(i);
  }
  const auto folds = CalibrationFolds(placements, all, 4);
  ASSERT_EQ(c->fold_fits.size(), folds.size());
  ASSERT_EQ(c->cv_fold.size(), d.runs.size());
  for (size_t f = 0; f < folds.size(); ++f) {
    for (size_t i : folds[f]) EXPECT_EQ(c->cv_fold[i], static_cast<int>(f)) << i;
  }
  const size_t last = d.runs.size() - 1;
  const Calibration::Parameters& fit = c->fold_fits[c->cv_fold[last]];
  ASSERT_EQ(fit.queue_strength, 0);  // knl's tiers do not queue (above)
  EstimatorOptions held_out = RecommendedEstimatorOptions(d.generated.machine);
  held_out.fit_overlap = fit.fit_overlap;
  held_out.compute_overlap = fit.compute_overlap;
  held_out.tier_overlap = fit.tier_overlap;
  held_out.fit_tolerance = fit.fit_tolerance;
  held_out.limit_smoothness = fit.limit_smoothness;
  held_out.queue_from_profile = false;
  auto fold_estimator = Estimator::Create(d.profile, held_out);
  ASSERT_TRUE(fold_estimator.ok()) << fold_estimator.status();
  auto e = (*fold_estimator)->EstimatePlacement(d.runs[last].second, Model::kRoofline);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_NEAR(e->runtime_ns / static_cast<double>(d.runs[last].first.runtime_ns) - 1,
              c->cv_residual[last], 1e-9);

  options.folds = static_cast<int>(d.runs.size()) + 1;
  EXPECT_FALSE(
      Calibrate(d.profile, RecommendedEstimatorOptions(d.generated.machine), d.runs, options).ok());
  options.folds = 1;
  EXPECT_FALSE(
      Calibrate(d.profile, RecommendedEstimatorOptions(d.generated.machine), d.runs, options).ok());
}

TEST(CalibrationTest, FoldsSpreadEachKindOfPlacementWhateverTheRunsOrder) {
  auto placement = [](std::vector<std::string> others) {
    Placement p;
    p.default_tier = "ddr";
    for (size_t i = 0; i < others.size(); ++i) p.fractions.emplace_back(others[i], 0.1);
    return p;
  };
  // Three mixes among two-tier runs and a single-tier one, listed at 0, 3 and 6: by position
  // (the i-th run in fold i % 3) all three would be in fold 0.
  const std::vector<Placement> placements = {
      placement({"hbm", "remote"}), placement({"hbm"}), placement({"hbm"}),
      placement({"hbm", "remote"}), placement({}),      placement({"remote"}),
      placement({"hbm", "remote"}), placement({"hbm"})};
  const std::vector<size_t> all = {0, 1, 2, 3, 4, 5, 6, 7};
  const auto folds = CalibrationFolds(placements, all, 3);
  // Ordered by tiers named, then as listed: 4 | 1 2 5 7 | 0 3 6.
  EXPECT_THAT(folds, ElementsAre(ElementsAre(4, 5, 3), ElementsAre(1, 7, 6), ElementsAre(2, 0)));
  for (const auto& fold : folds) {
    EXPECT_LE(std::count_if(fold.begin(), fold.end(),
                            [&](size_t i) { return placements[i].Tiers().size() == 3; }),
              1);
  }
  // A subset keeps its own order of kinds.
  EXPECT_THAT(CalibrationFolds(placements, {6, 0, 1}, 2),
              ElementsAre(ElementsAre(1, 0), ElementsAre(6)));
}

TEST(CalibrationTest, FoldsDefaultToFiveOrOnePerRun) {
  const Data& d = Nekbone();
  ASSERT_GE(d.runs.size(), 4u);
  const std::vector<std::pair<MeasuredRun, Placement>> four(d.runs.begin(), d.runs.begin() + 4);
  auto c = Calibrate(d.profile, RecommendedEstimatorOptions(d.generated.machine), four);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->folds, 4);  // fewer runs than kDefaultCalibrationFolds: leave-one-out
  const std::vector<std::pair<MeasuredRun, Placement>> one(d.runs.begin(), d.runs.begin() + 1);
  auto refused = Calibrate(d.profile, RecommendedEstimatorOptions(d.generated.machine), one);
  EXPECT_THAT(refused.status().message(), HasSubstr("at least 2 measured runs"));
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
                                 "--machine", "knl", "--out", out, "--folds", "3", "--queue-shape",
                                 "none", "--quiet"}),
            0);
  auto c = ReadCalibration(out);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->folds, 3);
  EXPECT_FALSE(c->queue_shape.has_value());  // no queueing fitted
  // Calibrate fits over spans of 2048 samples unless told (at least a block), and the file
  // says so: estimates with it use that span, and another given with it is refused.
  ASSERT_TRUE(c->fit_span_samples.has_value());
  EXPECT_EQ(*c->fit_span_samples, kCalibrationFitSpan);
  // Its prior compute overlap is 0.7 unless told (the uncalibrated errors it reports are
  // the prior's): the same as given 0.7, not as given the estimate's 0.5.
  auto prior_mean = [&](const std::string& overlap) {
    const std::string path = dir + "/prior-" + overlap + ".json";
    EXPECT_EQ(RunCalibrateCommand({"--profile", app + "/profile", "--runs", app + "/runs/runs.csv",
                                   "--machine", "knl", "--out", path, "--folds", "3",
                                   "--queue-shape", "none", "--overlap", overlap, "--quiet"}),
              0);
    return ReadCalibration(path)->uncalibrated_mean_error_pct;
  };
  EXPECT_EQ(kCalibrationComputeOverlap, 0.7);
  EXPECT_EQ(c->uncalibrated_mean_error_pct, prior_mean("0.7"));
  EXPECT_NE(c->uncalibrated_mean_error_pct, prior_mean("0.5"));
  const std::vector<std::string> validate = {
      "--profile", app + "/profile", "--runs", app + "/runs/runs.csv", "--machine",
      "knl",       "--calibration",  out,      "--replicates",         "5"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), validate.begin(), validate.end());
    return extra;
  };
  auto refusal = [&](const std::vector<std::string>& args) {
    ::testing::internal::CaptureStderr();
    const int rc = RunValidateCommand(args);
    const std::string err = ::testing::internal::GetCapturedStderr();
    return rc != 0 ? err : std::string("(accepted)");
  };
  EXPECT_EQ(RunValidateCommand(with({"--fit-span", "2048"})), 0);
  EXPECT_THAT(refusal(with({"--fit-span", "0"})),
              HasSubstr("--fit-span 0: " + out + " was fitted with --fit-span 2048"));
  EXPECT_THAT(refusal(with({"--block-samples", "4096"})),
              HasSubstr("--block-samples 4096: " + out + " was fitted with --block-samples 256"));
  // A version 6 file records the span but not the block size: one above the span is
  // refused as such.
  {
    std::string v6 = FormatCalibration([&] {
      Calibration old = *c;
      old.options.clear();
      old.machine.clear();
      return old;
    }());
    v6.replace(v6.find(R"("version": 8)"), 12, R"("version": 6)");
    const std::string six = dir + "/six.json";
    std::ofstream(six) << v6;
    std::vector<std::string> args = validate;
    args[args.size() - 3] = six;  // --calibration's
    args.insert(args.end(), {"--block-samples", "4096"});
    EXPECT_THAT(refusal(args),
                HasSubstr("--block-samples 4096: " + six +
                          " was fitted with the fit span 2048, which must hold a block at least"));
  }
  // The file records the other options it was fitted with, and an estimate with it uses
  // them unless told otherwise, which is refused; the ones given the same are taken.
  EXPECT_EQ(c->options, RecordedOptions(EstimatorOptions{}));
  const std::string fitted = dir + "/fitted.json";
  EXPECT_EQ(RunCalibrateCommand({"--profile", app + "/profile", "--runs", app + "/runs/runs.csv",
                                 "--machine", "knl", "--out", fitted, "--folds", "3",
                                 "--queue-shape", "none", "--block-samples", "512", "--share-bias",
                                 "correct", "--no-phasemarks", "--quiet"}),
            0);
  auto f = ReadCalibration(fitted);
  ASSERT_TRUE(f.ok()) << f.status();
  EstimatorOptions applied;
  ApplyCalibration(*f, &applied);
  EXPECT_EQ(applied.block_samples, 512u);
  EXPECT_EQ(applied.share_bias, ShareBias::kCorrect);
  EXPECT_FALSE(applied.use_phasemarks);
  const std::vector<std::string> on_file = {
      "--profile", app + "/profile", "--runs", app + "/runs/runs.csv", "--machine",
      "knl",       "--calibration",  fitted,   "--replicates",         "5"};
  auto validated = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), on_file.begin(), on_file.end());
    extra.push_back("--json");
    ::testing::internal::CaptureStdout();
    const int rc = RunValidateCommand(extra);
    const std::string text = ::testing::internal::GetCapturedStdout();
    return rc == 0 ? text : std::string();
  };
  const std::string alone = validated({});
  ASSERT_FALSE(alone.empty());
  EXPECT_EQ(validated({"--block-samples", "512", "--share-bias", "correct", "--no-phasemarks"}),
            alone);
  EXPECT_NE(validated({"--fit-overlap", "on"}), "");  // the file's value, given
  ::testing::internal::CaptureStderr();
  EXPECT_NE(RunValidateCommand([&] {
              std::vector<std::string> v = on_file;
              v.insert(v.end(), {"--share-bias", "keep"});
              return v;
            }()),
            0);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              HasSubstr("--share-bias keep: " + fitted +
                        " was fitted with --share-bias correct, which its estimates use"));
  EXPECT_EQ(validated({"--block-samples", "256"}), "");
  // It records the machine, and is refused on another.
  EXPECT_EQ(c->machine, "knl");
  ::testing::internal::CaptureStderr();
  EXPECT_NE(RunValidateCommand({"--profile", app + "/profile", "--runs", app + "/runs/runs.csv",
                                "--machine", "disagg", "--calibration", out}),
            0);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              HasSubstr("--calibration " + out + ": fitted on machine 'knl', not 'disagg'"));
  // Against a file fitted with phasemarks, --no-phasemarks is refused.
  ::testing::internal::CaptureStderr();
  EXPECT_NE(RunValidateCommand(with({"--no-phasemarks"})), 0);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              HasSubstr("--no-phasemarks: " + out + " was fitted with phasemarks"));
  const std::string blocks = dir + "/blocks.json";
  EXPECT_EQ(RunCalibrateCommand({"--profile", app + "/profile", "--runs", app + "/runs/runs.csv",
                                 "--machine", "knl", "--out", blocks, "--folds", "3",
                                 "--queue-shape", "none", "--block-samples", "4096", "--quiet"}),
            0);
  ASSERT_TRUE(ReadCalibration(blocks).ok());
  EXPECT_EQ(ReadCalibration(blocks)->fit_span_samples, 4096u);
  EXPECT_EQ(RunCalibrateCommand({"--profile", app + "/profile", "--runs", app + "/runs/runs.csv",
                                 "--machine", "knl", "--out", blocks, "--folds", "3",
                                 "--queue-shape", "none", "--fit-span", "0", "--quiet"}),
            0);
  EXPECT_EQ(ReadCalibration(blocks)->fit_span_samples, 0u);
  EXPECT_EQ(RunValidateCommand({"--profile", app + "/profile", "--runs", app + "/runs/runs.csv",
                                "--machine", "knl", "--calibration", blocks, "--replicates", "5"}),
            0);
  EXPECT_EQ(RunCalibrateCommand({"--profile", app + "/profile", "--runs", app + "/runs/runs.csv",
                                 "--machine", "knl", "--out", out, "--queue-shape", "knl:ddr"}),
            2);
  EXPECT_EQ(RunCalibrateCommand({"--profile", app + "/profile", "--runs", app + "/runs/runs.csv",
                                 "--machine", "knl", "--out", out, "--queue-like", "xeonmax:ddr",
                                 "--queue-shape", "xeonmax:ddr"}),
            2);
  EXPECT_EQ(RunValidateCommand({"--profile", app + "/profile", "--runs", app + "/runs/runs.csv",
                                "--machine", "knl", "--calibration", out, "--replicates", "5"}),
            0);
  EXPECT_EQ(RunCalibrateCommand({"--profile", app + "/profile", "--out", out}), 2);
  // --queue-strength scales --queue-like's curve: alone, or outside [0, 4], it is refused.
  EXPECT_EQ(RunValidateCommand({"--profile", app + "/profile", "--runs", app + "/runs/runs.csv",
                                "--machine", "knl", "--queue-strength", "0.5"}),
            2);
  EXPECT_EQ(RunValidateCommand({"--profile", app + "/profile", "--runs", app + "/runs/runs.csv",
                                "--machine", "knl", "--queue-like", "xeonmax:ddr",
                                "--queue-strength", "5"}),
            2);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tiergym
