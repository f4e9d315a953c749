// A TunableSolver's config chosen by the tuner, stored beside its find-db row and handed back in a
// new process; a stored config that is not valid any more; the pick on a hit that checks only the
// stored best; and Tuner::preload's startup warm-up.
#include <gtest/gtest.h>

#include "galley/runtime/stream.hpp"
#include "galley/tuning/tuner.hpp"
#include "tuning_fixtures.hpp"

namespace galley::tuning {
namespace {

using namespace testing;

TEST(TunerInnerChoice, TheTunerFindsTheFastestConfigStoresItAndHandsItBack) {
  TempDir dir;
  const auto p = small_problem(40);
  {
    Tuner tuner(options_in(dir.path(), FindMode::hybrid, {kInner, kSlow}));
    const Pick pick = tuner.pick(p, cpu());
    EXPECT_EQ(pick.solver->name(), kInner);
    EXPECT_EQ(pick.config, "wait=0.3");  // not the preferred wait=1.5: the tuner timed them all
  }
  const auto rows = FindDb({dir.path() / "finddb.sqlite", {}}).lookup(p.key(), DeviceIdentity::of(cpu()));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].solver, kInner);
  EXPECT_EQ(rows[0].params, "wait=0.3");
  EXPECT_EQ(rows[1].params, "");  // test.conv.slow has no configs

  Tuner fresh(options_in(dir.path(), FindMode::hybrid, {kInner, kSlow}));
  const long runs = runs_of(kInner);
  const Pick pick = fresh.pick(p, cpu());
  EXPECT_EQ(pick.source, PickSource::user_db);
  EXPECT_EQ(pick.solver->name(), kInner);
  EXPECT_EQ(pick.config, "wait=0.3");
  EXPECT_EQ(runs_of(kInner), runs);  // a hit: nothing timed
}

TEST(TunerInnerChoice, AStoredConfigThatIsNotValidNowIsTunedAgain) {
  TempDir dir;
  const auto p = small_problem(41);
  FindDb({dir.path() / "finddb.sqlite", {}})
      .store(p.key(), DeviceIdentity::of(cpu()), {FindRecord{kInner, 0.5, 0, 0, "wait=9"}});
  Tuner tuner(options_in(dir.path(), FindMode::hybrid, {kInner, kSlow}));
  const Pick pick = tuner.pick(p, cpu());
  EXPECT_FALSE(pick.hit);
  EXPECT_EQ(pick.source, PickSource::tuned);
  EXPECT_EQ(pick.config, "wait=0.3");
  EXPECT_EQ(tuner.db().lookup(p.key(), DeviceIdentity::of(cpu()))[0].params, "wait=0.3");  // replaced
}

// A row that an earlier build wrote for a solver without configs, with the text of a search the
// solver ran itself: the solver is still the stored best and runs as it does untuned.
TEST(TunerInnerChoice, AnInnerChoiceOfASolverWithoutConfigsStillHits) {
  TempDir dir;
  const auto p = small_problem(39);
  FindDb({dir.path() / "finddb.sqlite", {}})
      .store(p.key(), DeviceIdentity::of(cpu()), {FindRecord{kFast, 1.0, 0, 0, "searched-by-an-older-build"}});
  Tuner tuner(options_in(dir.path(), FindMode::hybrid, {kFast, kSlow}));
  const long runs = runs_of(kFast) + runs_of(kSlow);
  const Pick pick = tuner.pick(p, cpu());
  EXPECT_TRUE(pick.hit);
  EXPECT_EQ(pick.solver->name(), kFast);
  EXPECT_EQ(pick.config, "");
  EXPECT_EQ(runs_of(kFast) + runs_of(kSlow), runs);
}

TEST(TunerInnerChoice, PickOnAHitChecksOnlyTheBestAndRankedChecksTheRest) {
  TempDir dir;
  const auto p = small_problem(42);
  FindDb({dir.path() / "finddb.sqlite", {}})
      .store(p.key(), DeviceIdentity::of(cpu()),
             {FindRecord{kFast, 1.0, 0, 0, ""}, FindRecord{kCounted, 2.0, 0, 1, ""}});
  Tuner tuner(options_in(dir.path(), FindMode::hybrid, {kFast, kCounted}));
  const long checks = checks_of_counted();
  const Pick pick = tuner.pick(p, cpu());
  EXPECT_EQ(pick.source, PickSource::user_db);
  EXPECT_EQ(pick.solver->name(), kFast);
  EXPECT_EQ(checks_of_counted(), checks);  // the runner-up was not checked
  const auto ranked = tuner.ranked(p, cpu());
  ASSERT_EQ(ranked.size(), 2u);
  EXPECT_EQ(ranked[1].solver, kCounted);
  EXPECT_GT(checks_of_counted(), checks);  // ranked() hands out a checked list
}

TEST(TunerInnerChoice, RankedDropsARunnerUpThatNoLongerApplies) {
  TempDir dir;
  const auto p = small_problem(43);
  FindDb({dir.path() / "finddb.sqlite", {}})
      .store(p.key(), DeviceIdentity::of(cpu()), {FindRecord{kFast, 1.0, 0, 0, ""}, FindRecord{kToggle, 2.0, 0, 1, ""}});
  Tuner tuner(options_in(dir.path(), FindMode::hybrid, {kFast, kToggle}));
  toggle_applicable() = false;
  EXPECT_EQ(tuner.pick(p, cpu()).solver->name(), kFast);
  const auto ranked = tuner.ranked(p, cpu());
  toggle_applicable() = true;
  ASSERT_EQ(ranked.size(), 1u);
  EXPECT_EQ(ranked[0].solver, kFast);
}

TEST(TunerPreload, RunsEveryStoredProblemOnceAndFillsTheCache) {
  TempDir dir;
  const auto a = small_problem(44), b = small_problem(45);
  {
    FindDb db({dir.path() / "finddb.sqlite", {}});
    const auto id = DeviceIdentity::of(cpu());
    db.store(a.key(), id, {FindRecord{kFast, 1.0, 0, 0, ""}});
    db.store(b.key(), id, {FindRecord{kInner, 0.5, 0, 0, "wait=0.8"}});
    db.store("conv-not-a-key", id, {FindRecord{kFast, 1.0, 0, 0, ""}});
    db.store(small_problem(46).key(), id, {FindRecord{"cpu.conv.removed_long_ago", 1.0, 0, 0, ""}});
  }
  Tuner tuner(options_in(dir.path(), FindMode::hybrid, {kFast, kInner}));
  runtime::Stream stream(cpu());
  const long fast_runs = runs_of(kFast), inner_runs = runs_of(kInner);
  const PreloadResult r = tuner.preload(stream);
  EXPECT_EQ(r.problems, 4);
  EXPECT_EQ(r.prepared, 2);
  ASSERT_EQ(r.skipped.size(), 2u);
  EXPECT_EQ(runs_of(kFast), fast_runs + 1);  // one warm run each, nothing benchmarked
  EXPECT_EQ(runs_of(kInner), inner_runs + 1);
  EXPECT_EQ(inner_config_ran(b.key()), "wait=0.8");  // the stored config, not the preferred one
  const Pick pick = tuner.pick(a, cpu());
  EXPECT_EQ(pick.source, PickSource::cache);
  EXPECT_EQ(pick.solver->name(), kFast);
  // The removed solver's problem was not tuned by preload; its first pick tunes as usual.
  EXPECT_EQ(tuner.db().lookup(small_problem(46).key(), DeviceIdentity::of(cpu()))[0].solver,
            "cpu.conv.removed_long_ago");
}

TEST(TunerPreload, DoesNothingWhenTheDbIsNotTrusted) {
  TempDir dir;
  const auto p = small_problem(47);
  FindDb({dir.path() / "finddb.sqlite", {}}).store(p.key(), DeviceIdentity::of(cpu()), {FindRecord{kFast, 1.0, 0, 0, ""}});
  runtime::Stream stream(cpu());
  for (FindMode mode : {FindMode::off, FindMode::normal}) {
    Tuner tuner(options_in(dir.path(), mode, {kFast}));
    const long runs = runs_of(kFast);
    const PreloadResult r = tuner.preload(stream);
    EXPECT_EQ(r.problems, 0);
    EXPECT_EQ(r.prepared, 0);
    EXPECT_EQ(runs_of(kFast), runs);
  }
  auto options = options_in(dir.path(), FindMode::hybrid, {kFast});
  options.find.enforce_search = true;
  Tuner enforcing(options);
  EXPECT_EQ(enforcing.preload(stream).problems, 0);
}

}  // namespace
}  // namespace galley::tuning
