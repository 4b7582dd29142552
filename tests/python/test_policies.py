"""The placement policies (agents_examples/policies.py): each heuristic's rule on hand-made
observations, then episodes on a real `tiergym serve`: every policy on a two-tier and a
three-tier machine, and on the synthetic application `hotset` (a 1.5 GiB hot set, a 1 GiB
fast tier) the ordering the issue asks for: every online heuristic beats random, the
oracle beats every online heuristic. Episodes are short (few steps) and seeded."""

import json
import subprocess
import types

import numpy as np
import pytest

from tiergym_testing import BINARY, SKIP_REASON, needs_binary

import policies  # agents_examples/ (pytest's pythonpath)
import tiergym  # noqa: E402
GIB = 1 << 30


# --- Rules on hand-made observations -------------------------------------------------------


def fake_env(sizes_bytes, capacity_fast, tiers=("ddr", "hbm")):
    k = len(sizes_bytes)
    ends = np.cumsum(np.asarray(sizes_bytes, dtype=np.uint64))
    bounds = np.stack([ends - np.asarray(sizes_bytes, dtype=np.uint64), ends], axis=1)[None]
    spec = {"obs_region_features": 4, "obs_global_offset": k * 4, "profiles": ["fake"],
            "region_bounds": bounds,
            "tier_capacity_bytes": [1 << 40, capacity_fast] + [1 << 40] * (len(tiers) - 2),
            "tier_bandwidth_gbps": [90.0, 400.0] + [25.0] * (len(tiers) - 2),
            "tier_migration_gbps": [6.0] * len(tiers)}
    return types.SimpleNamespace(num_regions=k, tiers=list(tiers), tier_spec=spec,
                                 config={"machine": "none", "migration_gbps": "0"})


class Episode:
    """Feeds a policy observations built from per-region tiers and last-interval shares."""

    def __init__(self, policy, sizes_bytes, capacity_fast, interval_ns=1e9):
        self.policy = policy
        self.sizes = np.asarray(sizes_bytes, dtype=np.float64)
        self.env = fake_env(sizes_bytes, capacity_fast)
        self.capacity = capacity_fast
        self.tier = np.zeros(len(sizes_bytes), dtype=np.int64)
        self.interval_ns = interval_ns
        obs, info = self.observe(np.zeros(len(sizes_bytes)), interval_ns=0.0)
        policy.reset(self.env, obs, info)

    def observe(self, last, interval_ns=None):
        k = len(self.sizes)
        regions = np.zeros((k, 4), dtype=np.float32)
        regions[:, 0] = self.tier
        regions[:, 1] = last
        regions[:, 3] = self.sizes / self.sizes.sum()
        used = np.array([self.sizes[self.tier == 0].sum(), self.sizes[self.tier == 1].sum()])
        obs = np.concatenate([regions.ravel(), [0.0, used[1] / self.capacity, 0.5, 0.5]])
        mask = np.ones((k, 2), dtype=np.uint8)
        for r in range(k):
            if self.tier[r] == 0 and used[1] + self.sizes[r] > self.capacity:
                mask[r, 1] = 0
        info = {"profile": "fake", "step": 0,
                "interval_ns": self.interval_ns if interval_ns is None else interval_ns,
                "tier_used_bytes": used.astype(np.uint64), "action_mask": mask,
                "refused_regions": np.zeros(0, dtype=np.int32)}
        return obs.astype(np.float32), info

    def step(self, last):
        """One decision on an observation whose last interval had these shares; applies it
        (asserting that it fits) and returns it."""
        action = np.asarray(self.policy.act(*self.observe(np.asarray(last, dtype=np.float64))))
        assert self.sizes[action == 1].sum() <= self.capacity, "the policy overfilled the fast tier"
        self.tier = action.copy()
        return action


MIB = 1 << 20


def test_hemem_promotes_hot_regions_and_demotes_cold_ones_only_to_make_room():
    # Four equal regions, room for two on the fast tier; no rate limit in the way.
    ep = Episode(policies.HeMemPolicy(hot_density=1.0, cooling_steps=1, rate_mbps=None),
                 [100 * MIB] * 4, 200 * MIB)
    assert list(ep.step([0.5, 0.5, 0, 0])) == [1, 1, 0, 0]     # density 2: hot
    # Region 0 is not accessed: its count halves to the threshold; it stays.
    assert list(ep.step([0, 1.0, 0, 0])) == [1, 1, 0, 0]
    # Region 2 turns hot: the fast tier is full, cold region 0 makes room; hot region 1 stays.
    assert list(ep.step([0, 0.5, 0.5, 0])) == [0, 1, 1, 0]
    # Two hot regions want in while two hot ones are there: hot never displaces hot.
    assert list(ep.step([0.25, 0.25, 0.25, 0.25])) == [0, 1, 1, 0]


def test_hemem_counts_are_halved_every_cooling_period():
    policy = policies.HeMemPolicy(hot_density=1.0, cooling_steps=2, rate_mbps=None)
    ep = Episode(policy, [100 * MIB] * 4, 400 * MIB)
    ep.step([1.0, 0, 0, 0])        # count 4
    ep.step([0, 0, 0, 0])          # 4
    ep.step([0, 0, 0, 0])          # halved: 2
    assert policy.count[0] == pytest.approx(2.0)
    ep.step([0, 0, 0, 0])          # 2
    ep.step([0, 0, 0, 0])          # halved: 1 < hot threshold 1 * 2
    assert policy.count[0] == pytest.approx(1.0)


def test_the_rate_limit_bounds_the_bytes_moved_per_decision():
    # 150 MB/s over a 1 s interval: one 100 MiB region per decision.
    ep = Episode(policies.HeMemPolicy(hot_density=1.0, cooling_steps=1, rate_mbps=150),
                 [100 * MIB] * 4, 400 * MIB)
    assert ep.step([0.25, 0.25, 0.25, 0.25]).sum() == 1
    assert ep.step([0.25, 0.25, 0.25, 0.25]).sum() == 2


def test_memtis_threshold_makes_the_hot_set_fit_the_fast_tier():
    policy = policies.MemtisPolicy(cooling_steps=1, rate_mbps=None)
    ep = Episode(policy, [100 * MIB] * 8, 200 * MIB)
    # Densities 3.2, 1.2 (x4), 0 (x3): bins 2, 1 (x4), 0. Bins >= 1 hold 500 MiB, more than
    # the fast tier: the threshold rises to bin 2 and only region 0 is hot, room or not.
    assert list(ep.step([0.4, 0.15, 0.15, 0.15, 0.15, 0, 0, 0])) == [1, 0, 0, 0, 0, 0, 0, 0]
    assert policy.threshold(np.array([2, 1, 1, 1, 1, 0, 0, 0])) == 2
    assert policy.threshold(np.array([2, 1, 0, 0, 0, 0, 0, 0])) == 1


def test_memtis_keeps_warm_regions_and_demotes_colder_ones():
    policy = policies.MemtisPolicy(cooling_steps=1, rate_mbps=None)
    ep = Episode(policy, [100 * MIB] * 4, 200 * MIB)
    assert list(ep.step([0.5, 0.5, 0, 0])) == [1, 1, 0, 0]    # counts 2, 2: bin 1, T = 1
    # Counts 3, 1, 2, 0: bins 2, 1, 1, 0; bins >= 1 do not fit, T = 2: region 0 is hot,
    # regions 1 and 2 are warm and stay where they are.
    assert list(ep.step([0.5, 0, 0.5, 0])) == [1, 1, 0, 0]
    # Counts 3.5, 0.5, 3, 0: bins 2, 0, 2, 0; T = 1: region 2 is hot, region 1 (bin 0,
    # now the warm bin) makes room for it.
    assert list(ep.step([0.5, 0, 0.5, 0])) == [1, 0, 1, 0]


def test_damos_quota_and_min_age_for_cold_regions():
    policy = policies.DamosPolicy(min_cold_age_s=2.0, quota_mbps=250)   # 2 regions per 1 s
    ep = Episode(policy, [100 * MIB] * 4, 400 * MIB)
    assert ep.step([0.25, 0.25, 0.25, 0.25]).sum() == 2   # the quota
    assert ep.step([0.25, 0.25, 0.25, 0.25]).sum() == 4
    assert ep.step([0.5, 0.5, 0, 0]).sum() == 4           # idle 1 s: too young to demote
    assert list(ep.step([0.5, 0.5, 0, 0])) == [1, 1, 0, 0]   # idle 2 s: demoted


def test_autonuma_promotes_recently_touched_regions_and_demotes_least_recently_used():
    policy = policies.AutoNumaPolicy(rate_mbps=None)
    ep = Episode(policy, [100 * MIB] * 4, 200 * MIB)
    assert list(ep.step([0.5, 0.5, 0, 0])) == [1, 1, 0, 0]
    ep.step([0, 1.0, 0, 0])                               # region 0 not touched since
    # Region 2 touched: the fast tier is full; region 0 is the least recently used and
    # inactive, region 1 was touched in the last interval (active): region 0 goes.
    assert list(ep.step([0, 0.5, 0.5, 0])) == [0, 1, 1, 0]
    # Every fast region active: no demotion, so region 3 waits.
    assert list(ep.step([0, 0.3, 0.3, 0.4])) == [0, 1, 1, 0]


def test_tpp_promotes_regions_referenced_twice_and_keeps_headroom_by_demoting_inactive_ones():
    # Four equal regions, room for two; the watermark wants a tenth of the fast tier free.
    ep = Episode(policies.TppPolicy(headroom=0.1, rate_mbps=None), [100 * MIB] * 4, 200 * MIB)
    assert list(ep.step([0.5, 0.5, 0, 0])) == [0, 0, 0, 0]      # first reference: inactive
    assert list(ep.step([0.6, 0.4, 0, 0])) == [1, 1, 0, 0]      # active: promoted, densest first
    # Full (below the watermark): region 0, not referenced, is demoted; region 2's first
    # reference makes it no candidate yet, and nothing is displaced for it.
    assert list(ep.step([0, 0.5, 0.5, 0])) == [0, 1, 0, 0]
    assert list(ep.step([0, 0.5, 0.5, 0])) == [0, 1, 1, 0]      # referenced again: promoted
    # Every region referenced: nothing is inactive, nothing demoted, no room for region 3.
    assert list(ep.step([0.25, 0.25, 0.25, 0.25])) == [0, 1, 1, 0]


class RelativeEpisode(Episode):
    """Episode with the relative observation (20 features per region on two tiers): the
    policies below read each region's traffic and the tiers' idle latencies. traffic[r] is
    the region's traffic (GB/s) in the last interval; latency the tiers' idle latencies
    against the highest."""

    def __init__(self, policy, sizes_bytes, capacity_fast, latency=(130 / 155, 1.0)):
        self.latency = latency
        self.traffic = np.zeros(len(sizes_bytes))
        super().__init__(policy, sizes_bytes, capacity_fast)

    def observe(self, last, interval_ns=None):
        raw, info = super().observe(last, interval_ns)
        k = len(self.sizes)
        regions = np.zeros((k, 20), dtype=np.float32)
        regions[:, :4] = raw[:4 * k].reshape(k, 4)
        regions[:, 9] = self.traffic / 90.0 / (1 + self.traffic / 90.0)
        extra = np.zeros(8, dtype=np.float32)
        extra[4:6] = self.latency
        obs = np.concatenate([regions.ravel(), raw[4 * k:], extra])
        return obs.astype(np.float32), info

    def step_traffic(self, last, traffic):
        self.traffic = np.asarray(traffic, dtype=np.float64)
        return self.step(last)


def relative_env(episode):
    episode.env.tier_spec.update(obs_region_features=20,
                                 obs_global_offset=20 * len(episode.sizes))


def test_colloid_moves_the_hottest_regions_until_the_loaded_latencies_balance():
    policy = policies.ColloidPolicy(cooling_steps=1, rate_mbps=None)
    ep = RelativeEpisode(policy, [100 * MIB] * 4, 400 * MIB)
    relative_env(ep)
    policy.reset(ep.env, *ep.observe(np.zeros(4), interval_ns=0.0))
    # The default tier loaded (80 of 90 GB/s): its loaded latency is far above the fast
    # tier's idle one, the gap 0.70 of the accesses: the hottest regions move until they
    # carry that share (regions 0 and 1: 0.5 + 0.3).
    assert list(ep.step_traffic([0.5, 0.3, 0.15, 0.05], [40, 24, 12, 4])) == [1, 1, 0, 0]
    # Little traffic: the fast tier's higher idle latency (knl's MCDRAM) is the larger, and
    # its hottest region leaves it (a share of 0.5 covers the gap).
    assert list(ep.step_traffic([0.5, 0.3, 0.15, 0.05], [0.5, 0.3, 0.15, 0.05])) == [0, 1, 0, 0]
    # Latencies within epsilon of each other: nothing moves.
    policy.epsilon = 1.0
    assert list(ep.step_traffic([0.5, 0.3, 0.15, 0.05], [40, 24, 12, 4])) == [0, 1, 0, 0]
    with pytest.raises(ValueError, match="observation='relative'"):
        Episode(policies.ColloidPolicy(), [MIB] * 2, MIB).step([0.5, 0.5])


def test_arms_promotes_the_top_of_its_ranking_when_the_gain_pays_for_the_move():
    policy = policies.ArmsPolicy()
    ep = RelativeEpisode(policy, [100 * MIB] * 4, 200 * MIB)
    relative_env(ep)
    policy.reset(ep.env, *ep.observe(np.zeros(4), interval_ns=0.0))
    # Heavy traffic: the two densest regions are the hot set and their gain over ten
    # intervals (1 s each) is far above the 35 ms their move takes.
    assert list(ep.step_traffic([0.5, 0.3, 0.15, 0.05], [40, 24, 12, 4])) == [1, 1, 0, 0]
    # The hot set changes (regions 2 and 3 now): the short average catches it, and the
    # long one keeps regions 0 and 1 ranked (max of the two): 2 replaces 1, which scored less.
    action = ep.step_traffic([0, 0, 0.6, 0.4], [0, 0, 48, 32])
    assert action[2] == 1 and action.sum() == 2
    # A region whose traffic is negligible is not worth its migration.
    quiet = policies.ArmsPolicy()
    ep2 = RelativeEpisode(quiet, [100 * MIB] * 4, 200 * MIB)
    relative_env(ep2)
    quiet.reset(ep2.env, *ep2.observe(np.zeros(4), interval_ns=0.0))
    assert list(ep2.step_traffic([0.5, 0.3, 0.15, 0.05], [1e-4, 1e-4, 1e-4, 1e-4])) == [0] * 4


def test_random_is_seeded_and_respects_the_mask():
    a = Episode(policies.RandomPolicy(seed=3), [100 * MIB] * 8, 200 * MIB)
    b = Episode(policies.RandomPolicy(seed=3), [100 * MIB] * 8, 200 * MIB)
    obs, info = a.observe(np.zeros(8))
    info["action_mask"][:, 1] = 0            # nothing fits the fast tier
    assert not a.policy.act(obs, info).any()
    first = [a.policy.act(*a.observe(np.zeros(8))) for _ in range(3)]
    b.policy.act(obs, info)
    second = [b.policy.act(*b.observe(np.zeros(8))) for _ in range(3)]
    assert all(np.array_equal(x, y) for x, y in zip(first, second))
    assert any(x.any() for x in first)


def test_fast_tier_is_the_highest_bandwidth_one():
    assert policies.fast_tier(np.array([90.0, 400, 25])) == 1
    assert policies.fast_tier(np.array([90.0, 25, 400])) == 2
    assert policies.fast_tier(np.array([90.0, 25])) == 0  # none faster: the default tier


def test_make_policy_names_the_known_policies():
    assert policies.make_policy("hemem").name == "hemem"
    with pytest.raises(ValueError, match="unknown policy 'nope'.*hemem"):
        policies.make_policy("nope")
    with pytest.raises(ValueError, match="cannot load"):
        policies.make_policy("no_such_module_here:Factory")
    assert set(policies.ONLINE) < set(policies.POLICIES)


# --- Episodes on a real server ---------------------------------------------------------------


def synth(out, app, machine):
    subprocess.run([BINARY, "trace", "synth", "--app", app, "--machine", str(machine),
                    "--format", "bin", "--out", str(out), "--quiet"], check=True,
                   capture_output=True, timeout=300)
    return out / app / "profile"


@pytest.fixture(scope="module")
def hotset(tmp_path_factory):
    """`hotset` on a KNL whose MCDRAM holds 1 GiB (the hot set is 1.5 GiB), served."""
    if BINARY is None:
        pytest.skip(SKIP_REASON)
    out = tmp_path_factory.mktemp("hotset")
    knl = json.loads(subprocess.run([BINARY, "trace", "synth", "--print-model", "knl"],
                                    check=True, capture_output=True, text=True).stdout)
    knl["name"] = "knl-1g"
    knl["tiers"][1]["capacity_bytes"] = GIB
    machine = out / "knl-1g.json"
    machine.write_text(json.dumps(knl))
    profile = synth(out, "hotset", machine)
    server = tiergym.Server(args=["--profiles", str(profile), "--threads", "2"])
    yield types.SimpleNamespace(server=server, machine=str(machine), profile=profile, out=out)
    server.close()


@pytest.fixture(scope="module")
def disagg(tmp_path_factory, hotset):
    """`hotset` on disagg (ddr, hbm, remote): a profile directory for the `profiles` key
    (`tiergym serve --profiles` loads its profiles on the default machine, knl, at start)."""
    return synth(tmp_path_factory.mktemp("disagg"), "hotset", "disagg")


def returns(server, names, **config):
    # The relative observation (its first four features are the raw ones): every policy
    # reads it, Colloid and ARMS need it.
    with tiergym.make(address=server, observation="relative", **config) as env:
        return {n: policies.run_episode(env, policies.make_policy(n, seed=0), seed=0,
                                        profile="hotset") for n in names}


@needs_binary
def test_every_policy_runs_an_episode_within_capacity(hotset):
    results = returns(hotset.server, policies.POLICIES, num_regions=16, steps=4,
                      machine=hotset.machine)
    for name, r in results.items():
        assert r["steps"] == 4, name
        assert r["runtime_ns"] > 0 and r["default_runtime_ns"] > 0, name
        assert r["speedup"] == pytest.approx(1 - r["runtime_ns"] / r["default_runtime_ns"],
                                             abs=1e-9), name
        if name != "random":  # the others plan against the capacity
            assert r["refused"] == 0, name
    assert results["default"]["speedup"] == 0 and results["default"]["migrated_bytes"] == 0


@needs_binary
def test_on_three_tiers_the_policies_use_the_fastest_and_leave_the_slowest_alone(hotset, disagg):
    names = [n for n in policies.POLICIES if n != "random"]
    with tiergym.make(address=hotset.server, num_regions=16, steps=6, machine="disagg",
                      profiles=[str(disagg)], observation="relative") as env:
        assert env.tiers == ["ddr", "hbm", "remote"]
        for name in names:
            r = policies.run_episode(env, policies.make_policy(name), seed=0, profile="hotset")
            used = np.concatenate([a for a, _ in r["schedule"]])
            assert not (used == 2).any(), f"{name} put data on the remote tier"
            assert r["refused"] == 0, name
            if name != "default":
                assert (used == 1).any(), f"{name} never used hbm"
                assert r["speedup"] > 0, name


@needs_binary
def test_on_hotset_heuristics_beat_random_and_the_oracle_beats_them_all(hotset):
    # 256 regions: with fewer, the 3 GiB table is a single region (see the README) and no
    # part of the hot set fits the 1 GiB fast tier.
    results = returns(hotset.server, policies.POLICIES, num_regions=256, steps=12,
                      machine=hotset.machine)
    speedup = {n: r["speedup"] for n, r in results.items()}
    for name in policies.ONLINE:
        assert speedup[name] > speedup["random"], speedup
        assert speedup["oracle"] > speedup[name], speedup
    assert speedup["oracle"] > 0.1, speedup  # the hot table on MCDRAM is worth > 10 %
    oracle_bytes = results["oracle"]["migrated_bytes"]
    assert 0.9 * GIB < oracle_bytes <= GIB, "the oracle fills the fast tier, no more"


@needs_binary
def test_oracle_benefits_add_up(hotset):
    """The oracle's knapsack rests on the estimator being linear in the placement: the
    return of two regions together is the sum of their returns alone."""
    with tiergym.make(address=hotset.server, num_regions=256, steps=12,
                      machine=hotset.machine) as env:
        obs, info = env.reset(seed=0, options={"profile": "hotset"})
        oracle = policies.OraclePolicy()
        oracle.reset(env, obs, info)
        benefit = oracle.benefits(env, "hotset")
        a, b = np.argsort(-benefit)[:2]
        action = np.zeros(env.num_regions, dtype=np.int64)
        action[[a, b]] = oracle.layout.fast
        env.reset(seed=0, options={"profile": "hotset"})
        total = 0.0
        while True:
            _, reward, terminated, truncated, _ = env.step(action)
            total += reward
            if terminated or truncated:
                break
    assert benefit[a] > 0 and benefit[b] > 0
    assert total == pytest.approx(benefit[a] + benefit[b], rel=1e-6)


def test_region_ranges_and_sizes_come_from_the_spec():
    bounds = np.array([[[0x1000, 0x3000], [0x3000, 0x4000]],
                       [[0x8000, 0x9000], [0x9000, 0x9000]]], dtype=np.uint64)
    env = fake_env([8192, 4096], 1 << 20)
    env.tier_spec.update(profiles=["a", "b"], region_bounds=bounds,
                         tier_capacity_bytes=np.array([1 << 40, 1 << 20], dtype=np.uint64))
    assert policies.region_address_ranges(env, "b") == [(0x8000, 0x9000), (0x9000, 0x9000)]
    assert policies.region_address_ranges(env, "c") is None
    obs = np.zeros(2 * 4 + 4, dtype=np.float32)
    info = {"profile": "a", "tier_used_bytes": np.array([12288, 0], dtype=np.uint64)}
    layout = policies.Layout(env, obs, info)
    assert list(layout.region_bytes) == [8192, 4096]
    assert list(layout.capacity_bytes) == [1 << 40, 1 << 20] and layout.fast == 1


def test_the_oracle_probes_one_profile_of_a_pool():
    """A session made with a pool of profile directories (a split of tiergym.datasets: past
    a configuration value's 4096 bytes once joined) is probed with the one profile."""
    pool = ",".join(f"/cache/procedural-v1-{i}/profile" for i in range(3))
    config = {"profiles": pool, "num_regions": "16"}
    names = ["procedural-v1-0", "procedural-v1-1", "procedural-v1-2"]
    assert policies.probe_config(config, names, "procedural-v1-1") == {
        "profiles": ["/cache/procedural-v1-1/profile"], "num_regions": "16"}
    # A comma inside a path: the list does not split back; the session's config as it is.
    assert policies.probe_config({"profiles": "/a,b/p,/c"}, ["p", "c"], "p") == {
        "profiles": "/a,b/p,/c"}
    assert policies.probe_config({"num_regions": "8"}, ["minife"], "minife") == {
        "num_regions": "8"}
