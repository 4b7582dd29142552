"""Placement policies for the tiergym environment: reference points and online heuristics
from tiered-memory systems, all behind one small interface so that evaluate.py (and the
learning agents) can run any of them.

A policy is an object with
    name: str                                  # short, e.g. "hemem"
    reset(env, obs, info) -> None              # start of an episode; env is a tiergym.TierEnv
    act(obs, info) -> action                   # int64 array, one tier per region
made by the factories of POLICIES (make_policy(name, seed=...)). Policies work in the
placement action mode (the default). They see only the observation, `info` and the static
description in env.tier_spec (tiers, capacities, bandwidths, regions), never the future of the run,
except `oracle`, which by design sees the whole profile.

What the observation holds (env/environment.h): per region [tier / (tiers - 1), share of the
last interval's sampled accesses, decayed history of those shares, size share] (then, in the
normalized and relative modes, more features: env/README.md); then the fill of each tier,
progress, last interval's speed against the default. Colloid- and ARMS-like read the
relative mode's per-region traffic and per-tier latencies (RelativeView); the others read
the first four features, which every mode has. The heuristics
translate a system's per-page access counts into per-region *access density*: the region's
share of the sampled accesses divided by its share of the footprint (1 = the average page,
4 = four times as many samples per byte as the average). Their rate limits are in MB per
second of application time and are turned into a byte budget per decision with the last
interval's estimated time (info["interval_ns"]): a policy's migration rate does not depend
on how many steps an episode has.

Tiers: the *fast* tier is the one with the highest bandwidth (spec tier_bandwidth_gbps)
(hbm on knl and disagg); the heuristics move regions between the default tier (tier 0) and
the fast tier only. A tier slower than the default (disagg's remote) is left alone: in the
estimator's model only accessed bytes cost time, the default tier's capacity never binds on
the bundled machines, so demoting cold data there only costs migration time.

Capacity: every policy plans its moves against the fast tier's capacity (tier_capacity_bytes
of the environment spec) and
the bytes in use (info["tier_used_bytes"]); a promotion is asked for only when it fits after
the same action's demotions (the environment applies departures before retrying refused
arrivals), so the action mask is respected and the environment refuses nothing.
"""

import importlib
import os

import numpy as np


# --- What a policy knows about the machine ------------------------------------------------


class Layout:
    """Static facts of an episode, from the environment's spec (PROTOCOL.md "make"):
    observation layout, tiers, each tier's capacity and bandwidth (the highest decides the
    fast tier), and the bytes of each region of the episode's profile."""

    def __init__(self, env, obs, info):
        spec = env.tier_spec
        self.num_regions = int(env.num_regions)
        self.tiers = list(env.tiers)
        self.num_tiers = len(self.tiers)
        self.features = int(spec["obs_region_features"])
        self.global_offset = int(spec["obs_global_offset"])
        self.capacity_bytes = np.asarray(spec["tier_capacity_bytes"], dtype=np.float64)
        self.bandwidth_gbps = np.asarray(spec["tier_bandwidth_gbps"], dtype=np.float64)
        self.fast = fast_tier(self.bandwidth_gbps)
        self.migration_gbps = np.asarray(spec["tier_migration_gbps"], dtype=np.float64)
        self.region_bytes = np.asarray(
            [e - s for s, e in region_address_ranges(env, info["profile"])], dtype=np.float64)
        # observation=relative (env/README.md, "Observations that transfer"): 10 + 5 x tiers
        # features per region, 4 x tiers more globals; relative-load: one more per region,
        # last (the relative features where they are).
        self.relative = self.features - 5 * self.num_tiers in (10, 11)


def fast_tier(bandwidth_gbps):
    """Index of the fast tier: the highest bandwidth (the default tier itself when no tier is
    faster: the policies then move nothing; the first of equals wins ties)."""
    return int(np.argmax(bandwidth_gbps))


def region_address_ranges(env, profile):
    """[(start, end)] of every region of `profile`, from the spec's region_bounds (an array
    [profiles, num_regions, 2], profiles in spec order); None for a profile the environment
    does not serve."""
    spec = env.tier_spec
    profiles = list(spec["profiles"])
    if profile not in profiles:
        return None
    return [(int(s), int(e)) for s, e in spec["region_bounds"][profiles.index(profile)]]


class View:
    """One observation split into its parts (see the module docstring)."""

    def __init__(self, obs, layout):
        regions = np.asarray(obs[:layout.global_offset], dtype=np.float64).reshape(
            layout.num_regions, layout.features)
        self.tier = np.rint(regions[:, 0] * max(1, layout.num_tiers - 1)).astype(np.int64)
        self.last = regions[:, 1]
        self.history = regions[:, 2]
        self.size = regions[:, 3]
        g = layout.global_offset
        self.fill = np.asarray(obs[g:g + layout.num_tiers], dtype=np.float64)
        self.progress = float(obs[g + layout.num_tiers])
        self.speed = float(obs[g + layout.num_tiers + 1])

    def density(self, share):
        """Accesses per byte against the average byte (1 = average); 0 for empty regions."""
        with np.errstate(divide="ignore", invalid="ignore"):
            d = np.where(self.size > 0, share / np.maximum(self.size, 1e-12), 0.0)
        return d


def unsquash(y):
    """x of the observation's x / (1 + x)."""
    y = np.minimum(np.asarray(y, dtype=np.float64), 1 - 1e-7)
    return y / (1 - y)


class RelativeView(View):
    """An observation of observation=relative, with what the policies below read of it:
    each region's memory traffic in the last interval (GB/s), and per tier its idle
    latency against the machine's highest and the application's traffic against its
    bandwidth. ValueError, saying what to fix, for another observation mode."""

    def __init__(self, obs, layout, policy_name):
        if not layout.relative:
            raise ValueError(f"policy {policy_name!r} reads the relative observation "
                             "(per-region traffic, the tiers' latencies): make the environment "
                             "with observation='relative'")
        super().__init__(obs, layout)
        k, f, t = layout.num_regions, layout.features, layout.num_tiers
        regions = np.asarray(obs[:layout.global_offset], dtype=np.float64).reshape(k, f)
        self.traffic_gbps = unsquash(regions[:, 9]) * layout.bandwidth_gbps[0]
        extra = layout.global_offset + t + 2
        globals_ = np.asarray(obs[extra:extra + 4 * t], dtype=np.float64).reshape(4, t)
        self.latency_ratio = globals_[2]


class Planner:
    """Builds one action: the current placement, then demotions and promotions between the
    default tier and `to`, each checked against the free bytes of `to` (demotions of this
    action counted) and against a migration budget in bytes (None: unlimited)."""

    def __init__(self, layout, view, info, to, budget_bytes=None):
        self.layout = layout
        self.action = view.tier.copy()
        self.to = to
        used = np.asarray(info["tier_used_bytes"], dtype=np.float64)
        self.free = layout.capacity_bytes[to] - used[to]
        self.budget = np.inf if budget_bytes is None else float(budget_bytes)
        self.mask = np.asarray(info["action_mask"]).reshape(layout.num_regions, layout.num_tiers)
        self.moved_bytes = 0.0

    def bytes(self, r):
        return self.layout.region_bytes[r]

    def can_promote(self, r):
        b = self.bytes(r)
        fits = b <= self.free if np.isfinite(self.free) else bool(self.mask[r, self.to])
        return self.action[r] != self.to and fits and b <= self.budget

    def promote(self, r):
        """Moves region r to `to` when it fits and the budget allows; True when it does."""
        if not self.can_promote(r):
            return False
        b = self.bytes(r)
        self.action[r] = self.to
        self.free -= b
        self.budget -= b
        self.moved_bytes += b
        return True

    def promote_making_room(self, r, victims):
        """Promotes region r, first demoting as few regions of `victims` (a list, in the
        order they should go; the ones demoted are removed from it) as make it fit. Nothing
        moves unless r fits afterwards and the budget pays for every move. True when r moved."""
        if self.action[r] == self.to:
            return False
        need = self.bytes(r) - self.free
        chosen, freed = [], 0.0
        for v in victims:
            if freed >= need:
                break
            if self.action[v] == self.to:
                chosen.append(v)
                freed += self.bytes(v)
        if freed < need or self.bytes(r) + sum(self.bytes(v) for v in chosen) > self.budget:
            return False
        for v in chosen:
            self.demote(v)
            victims.remove(v)
        return self.promote(r)

    def demote(self, r, tier=0):
        """Moves region r (on `to`) back to `tier`; True when the budget allows."""
        b = self.bytes(r)
        if self.action[r] != self.to or b > self.budget:
            return False
        self.action[r] = tier
        self.free += b
        self.budget -= b
        self.moved_bytes += b
        return True


def budget_from_rate(rate_mbps, info):
    """Bytes a rate of `rate_mbps` MB/s allows over the last interval (None: unlimited)."""
    if rate_mbps is None:
        return None
    return rate_mbps * 1e6 * float(info.get("interval_ns", 0.0)) * 1e-9


# --- The interface -----------------------------------------------------------------------


class Policy:
    """Base of the policies here: reset() records the layout; act() is each policy's rule."""

    name = "policy"

    def __init__(self, seed=0):
        self.seed = int(seed)
        self.layout = None

    def reset(self, env, obs, info):
        self.layout = Layout(env, obs, info)
        self.env = env
        self.start(env, obs, info)

    def start(self, env, obs, info):
        """Per-episode state; called by reset() once the layout is known."""

    def act(self, obs, info):
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}(name={self.name!r})"


# --- Reference points ----------------------------------------------------------------------


class DefaultPolicy(Policy):
    """Everything stays on the default tier (tier 0): speedup 0 by definition."""

    name = "default"

    def act(self, obs, info):
        return np.zeros(self.layout.num_regions, dtype=np.int64)


class RandomPolicy(Policy):
    """Every decision, each region on a tier drawn uniformly among those the action mask
    allows for it (the uniform-random agent of RL baselines, which pays for its migrations).
    Seeded: numpy's RandomState (its stream is frozen across numpy versions), reseeded with
    the policy's seed at every reset, so an episode does not depend on earlier ones."""

    name = "random"

    def start(self, env, obs, info):
        self.rng = np.random.RandomState(self.seed)

    def act(self, obs, info):
        mask = np.asarray(info["action_mask"]).reshape(self.layout.num_regions, self.layout.num_tiers)
        action = np.zeros(self.layout.num_regions, dtype=np.int64)
        for r in range(self.layout.num_regions):
            allowed = np.flatnonzero(mask[r])
            action[r] = allowed[self.rng.randint(len(allowed))] if len(allowed) else 0
        return action


def probe_config(config, profiles, profile):
    """The configuration of the oracle's probes of `profile`: the session's (`config`, as
    the server reports it: `profiles` joined with commas) serving that profile only, so that
    a session made with a pool of profile directories (tiergym.datasets' splits: hundreds,
    past a configuration value's 4096 bytes once joined) probes with one. Unchanged when the
    joined list does not split back into one item per profile (a comma in a path)."""
    config = dict(config)
    items = str(config.get("profiles") or "").split(",")
    if profile in profiles and len(items) == len(profiles) and all(items):
        config["profiles"] = [items[list(profiles).index(profile)]]
    return config


def knapsack(benefit, size, free, fast):
    """The oracle's static placement ([K] tiers): regions by benefit per byte, best first,
    on tier `fast` while they fit in its `free` bytes and their benefit is positive."""
    placement = np.zeros(len(benefit), dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_byte = np.where(size > 0, benefit / size, -np.inf)
    for r in np.argsort(-per_byte, kind="stable"):
        if benefit[r] <= 0:
            break
        if size[r] <= free:
            placement[r] = fast
            free -= size[r]
    return placement


class OraclePolicy(Policy):
    """Static offline placement that sees the whole run: the fast tier filled greedily by
    benefit per byte (a knapsack), as ecoHMEM's advisor fills it by the objects' access
    density (Jordà et al., "ecoHMEM: Improving object placement methodology for hybrid
    memory systems in HPC", CLUSTER 2022).

    The benefit of region i is measured on the environment itself: an episode of the same
    profile and configuration with region i alone moved to the fast tier at the first step
    and kept there; its return (time saved, its migration charged, as a fraction of the
    default run) is what putting region i there is worth. The paper estimator is linear in
    the page-to-tier assignment, so these benefits add up (tests/python/test_policies.py
    checks it on a pair of regions). Regions are taken by benefit per byte, best first,
    while they fit in the fast tier and their benefit is positive; the placement is applied
    at the first step and never changes. The K probe episodes run in one batch (a
    tiergym.VectorEnv on the same server) and are cached per server, configuration and
    profile.

    It uses the future of the run, which no deployed system knows: it is the reference an
    online policy is measured against. It is the best *static* placement up to the
    knapsack's greediness; a dynamic policy could beat it on a run whose hot set moves and
    whose every phase's hot set fits the fast tier (not the case of the test application
    `hotset`, on which it beats every online policy here)."""

    name = "oracle"
    _cache = {}

    def start(self, env, obs, info):
        self.placement = self.plan(env, info["profile"])

    def benefits(self, env, profile):
        """Return (fractional speedup) of each single-region placement on the fast tier."""
        import tiergym  # noqa: PLC0415

        key = (env.endpoint, tuple(sorted(env.config.items())), profile, self.layout.fast)
        if key in OraclePolicy._cache:
            return OraclePolicy._cache[key]
        k, fast = self.layout.num_regions, self.layout.fast
        out = np.zeros(k)
        chunk = 64
        for first in range(0, k, chunk):
            n = min(chunk, k - first)
            with tiergym.VectorEnv(n, address=env.endpoint,
                                   **probe_config(env.config, env.profiles, profile)) as probes:
                probes.reset(seed=0, options={"profile": profile})
                actions = np.zeros((n, k), dtype=np.int64)
                for i in range(n):
                    actions[i, first + i] = fast
                done = np.zeros(n, dtype=bool)
                total = np.zeros(n)
                while not done.all():
                    _, rewards, term, trunc, _ = probes.step(actions)
                    total += np.where(done, 0.0, rewards)
                    done |= term | trunc
                out[first:first + n] = total
        OraclePolicy._cache[key] = out
        return out

    def plan(self, env, profile):
        return knapsack(self.benefits(env, profile), self.layout.region_bytes,
                        self.layout.capacity_bytes[self.layout.fast], self.layout.fast)

    def act(self, obs, info):
        return self.placement.copy()


# --- Online heuristics -------------------------------------------------------------------


class GreedyPolicy(Policy):
    """Hottest regions (by decayed access share, the observation's history) on the fast tier
    within its capacity, everything else on the default tier, re-decided every interval
    without a migration budget (agents_examples/greedy_policy.py's example policy)."""

    name = "greedy"

    def __init__(self, seed=0, min_share=0.0):
        super().__init__(seed)
        self.min_share = min_share

    def act(self, obs, info):
        layout = self.layout
        view = View(obs, layout)
        budget = layout.capacity_bytes[layout.fast]
        action = np.zeros(layout.num_regions, dtype=np.int64)
        taken = 0.0
        # Hottest first; the last interval's share breaks ties between equal histories.
        for r in np.lexsort((-view.last, -view.history)):
            if view.history[r] <= self.min_share:
                break
            if taken + layout.region_bytes[r] > budget:
                continue  # does not fit: a smaller, colder region may
            action[r] = layout.fast
            taken += layout.region_bytes[r]
        return action


class CooledCountPolicy(Policy):
    """Base of HeMem and Memtis: a sampled access count per region, halved every
    `cooling_steps` decisions (before the new interval is counted) so that old accesses
    fade. Subclasses set `cooling_steps` and call cool_and_count() first in act()."""

    cooling_steps = 4

    def start(self, env, obs, info):
        self.count = np.zeros(self.layout.num_regions)
        self.decisions = 0

    def cool_and_count(self, obs):
        """Cools (every `cooling_steps` decisions), adds the last interval's access density
        to the counts, and returns the observation's View."""
        view = View(obs, self.layout)
        if self.decisions > 0 and self.decisions % self.cooling_steps == 0:
            self.count *= 0.5
        self.count += view.density(view.last)
        self.decisions += 1
        return view


class HeMemPolicy(CooledCountPolicy):
    """HeMem-like (Raybuck et al., "HeMem: Scalable Tiered Memory Management for Big Data
    Applications and Real NVM", SOSP 2021).

    HeMem counts PEBS samples per page; a page is hot once its count reaches a threshold;
    all counts are halved periodically ("cooling") so that old accesses fade; hot pages in
    the slow tier are promoted, and cold pages in the fast tier are demoted only to make
    room for them; the migration thread moves a bounded amount per period.

    Here, per region: count += access density of the last interval (1 = average byte);
    every `cooling_steps` decisions all counts are halved, so a steady density d keeps the
    count between d * P and 2 * d * P (P = cooling_steps). Hot: count >= hot_density * P.
    Each decision promotes hot regions on the default tier, hottest first; when one does not
    fit, cold (not hot) regions on the fast tier are demoted, coldest first, to make room.
    Hot regions never displace other hot regions. Moves stop when `rate_mbps` MB/s of
    application time is used up."""

    name = "hemem"

    def __init__(self, seed=0, hot_density=1.0, cooling_steps=4, rate_mbps=1000.0):
        super().__init__(seed)
        self.hot_density = hot_density
        self.cooling_steps = cooling_steps
        self.rate_mbps = rate_mbps

    def act(self, obs, info):
        layout = self.layout
        view = self.cool_and_count(obs)
        hot = self.count >= self.hot_density * self.cooling_steps
        plan = Planner(layout, view, info, layout.fast, budget_from_rate(self.rate_mbps, info))
        fast = layout.fast
        cold_on_fast = [r for r in np.argsort(self.count, kind="stable")
                        if plan.action[r] == fast and not hot[r]]
        for r in np.argsort(-self.count, kind="stable"):
            if not hot[r]:
                break
            if plan.action[r] != fast:
                plan.promote_making_room(r, cold_on_fast)
        return plan.action


class MemtisPolicy(CooledCountPolicy):
    """Memtis-like (Lee et al., "MEMTIS: Efficient Memory Tiering with Dynamic Page
    Classification and Page Size Determination", SOSP 2023).

    Memtis keeps an access histogram: pages binned by the log2 of their (periodically
    halved) sampled access counts, with the bytes in each bin; the hot threshold is the
    lowest bin such that the bytes at or above it fit the fast tier, so the hot set follows
    the fast tier's size instead of a fixed count; pages in the bin just below are "warm"
    and stay where they are; hot pages are promoted, cold ones demoted by its background
    migration thread.

    Here, per region: count as in HeMem (density accumulated, halved every
    `cooling_steps`), bin = floor(log2(1 + count)); histogram of region bytes per bin;
    threshold T = lowest bin whose bytes at and above it fit the fast tier's capacity.
    Regions in bins >= T are promoted (hottest first), regions in bins < T - 1 on the fast
    tier are demoted, warm ones (bin T - 1) move only to make room for hot ones. Moves stop
    when `rate_mbps` MB/s of application time is used up."""

    name = "memtis"

    def __init__(self, seed=0, cooling_steps=4, rate_mbps=1000.0, bins=16):
        super().__init__(seed)
        self.cooling_steps = cooling_steps
        self.rate_mbps = rate_mbps
        self.bins = bins

    def threshold(self, bins):
        """Lowest bin T such that the bytes in bins >= T fit the fast tier."""
        layout = self.layout
        per_bin = np.bincount(bins, weights=layout.region_bytes, minlength=self.bins)
        at_or_above = np.cumsum(per_bin[::-1])[::-1]
        capacity = layout.capacity_bytes[layout.fast]
        for t in range(1, self.bins):  # bin 0: never accessed, never hot
            if at_or_above[t] <= capacity:
                return t
        return self.bins

    def act(self, obs, info):
        layout = self.layout
        view = self.cool_and_count(obs)
        bins = np.minimum(np.floor(np.log2(1.0 + self.count)).astype(np.int64), self.bins - 1)
        t = self.threshold(bins)
        fast = layout.fast
        plan = Planner(layout, view, info, fast, budget_from_rate(self.rate_mbps, info))
        order = np.lexsort((-self.count, -bins))  # hottest first
        for r in order[::-1]:  # coldest first
            if plan.action[r] == fast and bins[r] < t - 1:
                plan.demote(r)
        warm_on_fast = [r for r in order[::-1] if plan.action[r] == fast and bins[r] == t - 1]
        for r in order:
            if bins[r] < t:
                break
            if plan.action[r] != fast:
                plan.promote_making_room(r, warm_on_fast)
        return plan.action


class DamosPolicy(Policy):
    """DAMOS-like (Linux DAMON-based Operation Schemes, SeongJae Park; the memory tiering
    schemes `migrate_hot` / `migrate_cold` of Linux 6.11+, Documentation/mm/damon/).

    DAMON reports, per monitoring region, how often it was found accessed in the last
    aggregation interval (nr_accesses) and for how long that pattern has held (age). A
    scheme applies an action to the regions matching an access pattern (ranges of
    nr_accesses and age), within a quota of bytes per reset interval, regions prioritised
    by a score when the quota is short. Tiering uses two: migrate_hot to the fast node for
    frequently accessed regions, migrate_cold to the slow node for regions idle long enough.

    Here, one aggregation interval = one decision; nr_accesses = the region's access
    density in the last interval; age = application time (the intervals' estimated times)
    since its density last crossed the hot or the cold bound. The bounds follow DAMON's
    memory tiering examples (damo's tiering script: migrate_cold at a 0 % access rate,
    migrate_hot at 5 % or more, 200 MB per 1 s quota interval): hot = any sampled access in
    the interval (density > hot_density, default 0), cold = none (density <= cold_density,
    default 0). migrate_cold: regions on the fast tier cold for at least `min_cold_age_s`
    seconds of application time, coldest and oldest first, within its quota. migrate_hot:
    hot regions on the default tier, by score (density times (1 + age in seconds): DAMOS's default
    prioritisation weighs frequency and age), within its quota and the fast tier's free
    bytes. No region is displaced to make room: only migrate_cold frees the fast tier.
    Quotas: `quota_mbps` MB/s of application time, for each scheme."""

    name = "damos"

    def __init__(self, seed=0, hot_density=0.0, cold_density=0.0, min_cold_age_s=2.0,
                 quota_mbps=1000.0):
        super().__init__(seed)
        self.hot_density = hot_density
        self.cold_density = cold_density
        self.min_cold_age_s = min_cold_age_s
        self.quota_mbps = quota_mbps

    def start(self, env, obs, info):
        k = self.layout.num_regions
        self.age_s = np.zeros(k)
        self.pattern = np.zeros(k, dtype=np.int64)  # -1 cold, 0 between, 1 hot

    def act(self, obs, info):
        layout = self.layout
        view = View(obs, layout)
        interval_s = float(info.get("interval_ns", 0.0)) * 1e-9
        if interval_s <= 0:
            return view.tier.copy()  # nothing monitored yet
        d = view.density(view.last)
        pattern = np.where(d > self.hot_density, 1, np.where(d <= self.cold_density, -1, 0))
        self.age_s = np.where(pattern == self.pattern, self.age_s + interval_s, interval_s)
        self.pattern = pattern
        fast = layout.fast
        quota = budget_from_rate(self.quota_mbps, info)
        # migrate_cold, with its own quota.
        cold = Planner(layout, view, info, fast, quota)
        for r in np.lexsort((-self.age_s, d)):
            if view.tier[r] == fast and pattern[r] == -1 and self.age_s[r] >= self.min_cold_age_s:
                cold.demote(r)
        # migrate_hot on what migrate_cold left, with its own quota.
        hot = Planner(layout, view, info, fast, quota)
        hot.action = cold.action.copy()
        hot.free = cold.free
        for r in np.argsort(-(d * (1 + self.age_s)), kind="stable"):
            if hot.action[r] != fast and pattern[r] == 1:
                hot.promote(r)
        return hot.action


class AutoNumaPolicy(Policy):
    """AutoNUMA-tiering-like (Linux NUMA balancing memory tiering mode,
    kernel.numa_balancing=2, Huang Ying et al., Linux 5.18-6.1: "NUMA balancing: optimize
    memory placement for memory tiering system"; demotion on reclaim, Dave Hansen et al.).

    The kernel periodically unmaps slow-tier pages; a page touched afterwards takes a hint
    fault, and is promoted when the fault came soon after the scan (hint-fault latency below
    a threshold: recently and frequently touched), at most `numa_balancing_promote_rate_
    limit_MBps`; the threshold is tuned automatically so that the candidates match the rate
    limit. Room in the fast tier is made by reclaim, which demotes the least recently used
    pages of the fast tier to the slow tier.

    Here: a region on the default tier touched in the last interval whose access density
    reaches the threshold is a candidate; candidates are promoted densest first (a dense
    region faults soonest) within `rate_mbps` MB/s of application time. The threshold
    doubles when the candidates exceed twice the budget and halves (down to
    `min_density`) when they are below half of it. When a candidate does not fit, the least
    recently touched regions of the fast tier are demoted (LRU order), never one touched in
    the last interval (the active list)."""

    name = "autonuma"

    def __init__(self, seed=0, rate_mbps=1000.0, min_density=0.25):
        super().__init__(seed)
        self.rate_mbps = rate_mbps
        self.min_density = min_density

    def start(self, env, obs, info):
        k = self.layout.num_regions
        self.last_touch = np.full(k, -1, dtype=np.int64)
        self.threshold = self.min_density
        self.decisions = 0

    def act(self, obs, info):
        layout = self.layout
        view = View(obs, layout)
        self.decisions += 1
        touched = view.last > 0
        self.last_touch[touched] = self.decisions
        d = view.density(view.last)
        fast = layout.fast
        budget = budget_from_rate(self.rate_mbps, info)
        plan = Planner(layout, view, info, fast, budget)
        candidates = [r for r in np.argsort(-d, kind="stable")
                      if view.tier[r] != fast and touched[r] and d[r] >= self.threshold]
        wanted = sum(plan.bytes(r) for r in candidates)
        if budget is not None and budget > 0:
            if wanted > 2 * budget:
                self.threshold *= 2
            elif wanted < budget / 2:
                self.threshold = max(self.min_density, self.threshold / 2)
        lru = [r for r in np.lexsort((view.history, self.last_touch))
               if view.tier[r] == fast and not touched[r]]
        for r in candidates:
            plan.promote_making_room(r, lru)
        return plan.action


class TppPolicy(Policy):
    """TPP-like (Maruf, Wang, Dhanotia, Weiner, Agarwal, Bhattacharya, Petersen, Chowdhury,
    Kanaujia, Chauhan, "TPP: Transparent Page Placement for CXL-Enabled Tiered-Memory",
    ASPLOS 2023; in Linux since 6.x as NUMA balancing's tiering mode with its demotion
    watermarks).

    TPP decouples allocation from reclamation: it demotes the fast node's inactive pages
    ahead of need, whenever its free memory falls below a demotion watermark, so that
    promotions and new allocations find room; it promotes a slow-tier page on a NUMA hint
    fault, but only when the page is on the active LRU list (referenced again since it was
    last aged), so that a page touched once does not ping-pong; a promotion that does not
    fit fails and waits for demotion. It looks at references (hint faults, LRU), not at
    access counts.

    Here: a region is referenced in an interval when it holds any of its sampled accesses
    (its hint fault), and active when referenced in the last two intervals. Each decision
    first demotes the fast tier's regions not referenced in the last interval, least
    recently referenced first, while its free room is below `headroom` of its capacity
    (the watermark); then promotes active regions of the default tier, densest first (a
    dense region faults soonest after a scan), while they fit the free room; nothing is
    displaced to make room. Moves stop when `rate_mbps` MB/s of application time is used."""

    name = "tpp"

    def __init__(self, seed=0, headroom=0.1, rate_mbps=1000.0):
        super().__init__(seed)
        self.headroom = headroom
        self.rate_mbps = rate_mbps

    def start(self, env, obs, info):
        k = self.layout.num_regions
        self.last_touch = np.full(k, -1, dtype=np.int64)
        self.referenced = np.zeros(k, dtype=bool)
        self.decisions = 0

    def act(self, obs, info):
        layout = self.layout
        view = View(obs, layout)
        self.decisions += 1
        touched = view.last > 0
        active = touched & self.referenced
        self.referenced = touched
        self.last_touch[touched] = self.decisions
        fast = layout.fast
        plan = Planner(layout, view, info, fast, budget_from_rate(self.rate_mbps, info))
        watermark = self.headroom * layout.capacity_bytes[fast]
        for r in np.lexsort((view.history, self.last_touch)):  # least recently referenced
            if plan.free >= watermark:
                break
            if plan.action[r] == fast and not touched[r]:
                plan.demote(r)
        for r in np.argsort(-view.density(view.last), kind="stable"):
            if plan.action[r] != fast and active[r]:
                plan.promote(r)
        return plan.action


class ColloidPolicy(CooledCountPolicy):
    """Colloid-like (Vuppalapati, Agarwal, "Tiered Memory Management: Access Latency is
    the Root Cause", SOSP 2024).

    Colloid places pages so that the tiers' *loaded* access latencies are equal, instead
    of filling the fast tier with the hottest pages: under load the default tier's latency
    rises above an alternate tier's, and then moving hot pages out of it helps. It measures
    each tier's loaded latency with CHA counters (queue occupancy over request rate,
    Little's law), computes the share of accesses to shift between the tiers from the
    latency gap, and moves the hottest pages (most accesses per byte migrated) until that
    share has moved; page hotness comes from the system it is built into (HeMem, MEMTIS,
    TPP).

    Here: hotness as HeMem's (density counts halved every `cooling_steps` decisions). No
    latency counter exists, so each tier's loaded latency is estimated from what the
    relative observation gives: the tier's idle latency (against the highest), and its
    utilisation u = the last interval's traffic of the regions on it over its bandwidth,
    through the queueing law of the synthetic contention model, L = L_idle (1 + kappa u^2 /
    (1 - u)), u at most 0.95 (traces/SYNTH.md section 9). With g = (L_default - L_fast) /
    (L_default + L_fast): when g > `epsilon` the hottest regions of the default tier are
    promoted (displacing the coldest of the fast tier when it is full, if they are colder)
    until their share of the last interval's accesses reaches g; when g < -`epsilon`, the fast tier's
    hottest regions are demoted until their share reaches -g. `rate_mbps` MB/s of
    application time bounds the moves. Reads observation='relative'."""

    name = "colloid"

    def __init__(self, seed=0, cooling_steps=4, rate_mbps=1000.0, epsilon=0.05, kappa=0.8):
        super().__init__(seed)
        self.cooling_steps = cooling_steps
        self.rate_mbps = rate_mbps
        self.epsilon = epsilon
        self.kappa = kappa

    def loaded_latency(self, view):
        """Per tier: the loaded latency estimate, in units of the highest idle latency."""
        layout = self.layout
        traffic = np.array([view.traffic_gbps[view.tier == t].sum()
                            for t in range(layout.num_tiers)])
        u = np.minimum(traffic / layout.bandwidth_gbps, 0.95)
        return view.latency_ratio * (1 + self.kappa * u * u / (1 - u))

    def act(self, obs, info):
        layout = self.layout
        self.cool_and_count(obs)
        view = RelativeView(obs, layout, self.name)
        fast = layout.fast
        plan = Planner(layout, view, info, fast, budget_from_rate(self.rate_mbps, info))
        if view.last.sum() <= 0:
            return plan.action  # nothing measured yet
        latency = self.loaded_latency(view)
        gap = (latency[0] - latency[fast]) / max(latency[0] + latency[fast], 1e-12)
        share = view.last / max(view.last.sum(), 1e-12)  # the accesses' distribution now
        moved = 0.0
        if gap > self.epsilon:
            coldest_on_fast = [r for r in np.argsort(self.count, kind="stable")
                               if plan.action[r] == fast]
            for r in np.argsort(-self.count, kind="stable"):
                if moved >= gap or self.count[r] <= 0:
                    break
                if plan.action[r] == fast:
                    continue
                victims = [v for v in coldest_on_fast if self.count[v] < self.count[r]]
                if plan.promote_making_room(r, victims):
                    moved += share[r]
                    coldest_on_fast = [v for v in coldest_on_fast if plan.action[v] == fast]
        elif gap < -self.epsilon:
            for r in np.argsort(-self.count, kind="stable"):
                if moved >= -gap:
                    break
                if plan.action[r] == fast and plan.demote(r):
                    moved += share[r]
        return plan.action


class ArmsPolicy(Policy):
    """ARMS-like (Yadalam, Kanellis, Swift, Venkataraman, "ARMS: Adaptive and Robust
    Memory Tiering System", arXiv 2508.04417, 2025).

    ARMS has no hotness threshold: it ranks pages by short-term and long-term moving
    averages of their sampled accesses (the short one follows phase changes, the long one
    ignores transient dips), takes as hot the top of the ranking that fits the fast tier,
    migrates a page only when the expected benefit of moving it exceeds the cost of the
    migration, and schedules migrations in batches within the bandwidth the application
    leaves free.

    Here: per region, short and long exponential moving averages of the access density
    (weights `short` and `long`, bias-corrected at the start); score = the larger of the
    two. The hot set is the regions by score, densest first, while they fit the fast tier.
    A hot region of the default tier is promoted (displacing, coldest first, fast-tier
    regions outside the hot set) when the time it saves over the long average's horizon
    (1 / `long` intervals) exceeds the migration time: saved = its traffic minus the
    victims' (moving averages of the relative observation's per-region traffic) x (1 /
    B_default - 1 / B_fast) x horizon; cost = the bytes moved / the migration bandwidth.
    Per decision the moves fit the migration bandwidth times the interval's time times
    the share of the default tier's bandwidth the application leaves free. Reads
    observation='relative'."""

    name = "arms"

    def __init__(self, seed=0, short=0.5, long=0.1):
        super().__init__(seed)
        self.short_weight = short
        self.long_weight = long

    def start(self, env, obs, info):
        k = self.layout.num_regions
        self.short = np.zeros(k)
        self.long = np.zeros(k)
        self.short_traffic = np.zeros(k)
        self.long_traffic = np.zeros(k)
        self.decisions = 0

    def act(self, obs, info):
        layout = self.layout
        view = RelativeView(obs, layout, self.name)
        fast = layout.fast
        interval_ns = float(info.get("interval_ns", 0.0))
        plan = Planner(layout, view, info, fast)
        if interval_ns <= 0:
            return plan.action  # nothing measured yet
        self.decisions += 1
        a, b = self.short_weight, self.long_weight
        d = view.density(view.last)
        self.short += a * (d - self.short)
        self.long += b * (d - self.long)
        self.short_traffic += a * (view.traffic_gbps - self.short_traffic)
        self.long_traffic += b * (view.traffic_gbps - self.long_traffic)
        n = self.decisions
        short = self.short / (1 - (1 - a) ** n)
        long = self.long / (1 - (1 - b) ** n)
        score = np.maximum(short, long)
        traffic = np.maximum(self.short_traffic / (1 - (1 - a) ** n),
                             self.long_traffic / (1 - (1 - b) ** n))
        # The hot set: by score, while it fits the fast tier.
        hot = np.zeros(layout.num_regions, dtype=bool)
        room = layout.capacity_bytes[fast]
        for r in np.argsort(-score, kind="stable"):
            if score[r] <= 0:
                break
            if layout.region_bytes[r] <= room:
                hot[r] = True
                room -= layout.region_bytes[r]
        # Bandwidth-aware batch: the migration bandwidth the application leaves free.
        used = min(1.0, view.traffic_gbps.sum() / layout.bandwidth_gbps[0])
        plan.budget = layout.migration_gbps[fast] * interval_ns * (1 - used)
        per_byte = 1 / layout.bandwidth_gbps[0] - 1 / layout.bandwidth_gbps[fast]  # ns per B
        horizon_ns = interval_ns / b
        victims = [r for r in np.argsort(score, kind="stable")
                   if plan.action[r] == fast and not hot[r]]
        for r in np.argsort(-score, kind="stable"):
            if not hot[r] or plan.action[r] == fast:
                continue
            need = layout.region_bytes[r] - plan.free
            chosen, freed = [], 0.0
            for v in victims:
                if freed >= need:
                    break
                chosen.append(v)
                freed += layout.region_bytes[v]
            gain = (traffic[r] - traffic[chosen].sum()) * per_byte * horizon_ns
            cost = (layout.region_bytes[r] + layout.region_bytes[chosen].sum()) / (
                layout.migration_gbps[fast])
            if gain > cost and plan.promote_making_room(r, victims):
                continue
        return plan.action


# --- The registry --------------------------------------------------------------------------

POLICIES = {
    "default": DefaultPolicy,
    "random": RandomPolicy,
    "oracle": OraclePolicy,
    "greedy": GreedyPolicy,
    "hemem": HeMemPolicy,
    "memtis": MemtisPolicy,
    "damos": DamosPolicy,
    "autonuma": AutoNumaPolicy,
    "tpp": TppPolicy,
    "colloid": ColloidPolicy,
    "arms": ArmsPolicy,
}
# Online policies: those that use only the past of the run.
ONLINE = ("greedy", "hemem", "memtis", "damos", "autonuma", "tpp", "colloid", "arms")
# Policies that read the relative observation (observation='relative').
NEEDS_RELATIVE = ("colloid", "arms")


def make_policy(name, seed=0):
    """A policy by registry name; "MODULE:FACTORY" (imported, called as FACTORY(seed=seed),
    or FACTORY() when it takes no seed); or "MODULE@PATH", a trained agent saved at PATH and
    loaded by MODULE.load_policy(PATH) (q_learning@q.npz, ppo_torch@ppo.pt). ValueError
    names the known policies."""
    if name in POLICIES:
        return POLICIES[name](seed=seed)
    if "@" in name:
        module_name, _, path = name.partition("@")
        if not os.path.isfile(path):
            raise ValueError(f"policy {name!r}: no file {path!r} (train one with "
                             f"agents_examples/{module_name}.py --save {path})")
        try:
            load = getattr(importlib.import_module(module_name), "load_policy")
        except (ImportError, AttributeError) as e:
            raise ValueError(f"policy {name!r}: cannot load 'load_policy' from module "
                             f"{module_name!r}: {e}") from None
        return load(path)
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as e:
            raise ValueError(f"policy {name!r}: cannot load {attr!r} from module "
                             f"{module_name!r}: {e}") from None
        try:
            return factory(seed=seed)
        except TypeError:
            return factory()
    raise ValueError(f"unknown policy {name!r} (known: {', '.join(POLICIES)}; or MODULE:FACTORY)")


def run_episode(env, policy, seed=0, profile=None, on_step=None):
    """Runs one episode of `policy`; returns a dict with the return (fractional speedup),
    the estimated runtime, the default runtime, bytes migrated, capacity refusals, steps and
    the placement in force at each step with that interval's estimated time
    ("schedule": [(action, interval_ns)]; in the placement action mode, where an action is
    a placement). on_step(step_index) is called after each step."""
    options = {"profile": profile} if profile is not None else None
    obs, info = env.reset(seed=seed, options=options)
    policy.reset(env, obs, info)
    total = 0.0
    migrated = 0
    refused = 0
    schedule = []
    steps = 0
    while True:
        action = np.asarray(policy.act(obs, info), dtype=np.int64)
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        migrated += int(info["migrated_bytes"])
        refused += len(info["refused_regions"])
        # What is in force (placement mode): the action minus the refused moves (those
        # stayed where they were). An index array: refused_regions is a tuple, which numpy
        # would take as one index per dimension.
        in_force = action.copy()
        refused_now = np.asarray(info["refused_regions"], dtype=np.int64)
        if len(refused_now) and in_force.ndim == 1:
            previous = schedule[-1][0] if schedule else np.zeros_like(action)
            in_force[refused_now] = previous[refused_now]
        schedule.append((in_force, float(info["interval_ns"])))
        steps += 1
        if on_step is not None:
            on_step(steps)
        if terminated or truncated:
            break
    return {
        "profile": info["profile"],
        "policy": policy.name,
        "speedup": total,
        "runtime_ns": float(info["elapsed_ns"]),
        "default_runtime_ns": float(info["default_total_ns"]),
        "migrated_bytes": migrated,
        "refused": refused,
        "steps": steps,
        "schedule": schedule,
    }
