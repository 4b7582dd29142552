"""The machines from measured Mess curves (traces/SYNTH.md, "Machines from measured
curves") served end to end: `tiergym trace synth --machine ddr5cxl`, the placement
environment over ZeroMQ (a private server given machine="ddr5cxl" serves the bundled
profiles recorded there) and in process, and the co-scheduled node, whose tenants share
the socket's DDR5 and may spill onto the CXL expander."""

import json
import subprocess

import gymnasium
import numpy as np
import pytest

from tiergym_testing import BINARY, needs_binary
import tiergym
from tiergym import cosched
from tiergym.inprocess import have_core

needs_core = pytest.mark.skipif(not have_core(), reason="the extension tiergym._core is not built")

# No capacity override: ddr5cxl's default tier is its DDR5 (the default task's "hbm:512"
# names a tier it does not have).
TASK = dict(machine="ddr5cxl", tier_capacity_mib="", num_regions=8, steps=6,
            action_mode="placement")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh tiergym cache: the bundled profiles are generated for ddr5cxl there."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


@needs_binary
def test_trace_synth_writes_a_ddr_and_a_cxl_run(tmp_path):
    done = subprocess.run([BINARY, "trace", "synth", "--app", "lulesh", "--machine", "ddr5cxl",
                           "--samples", "5000", "--out", str(tmp_path)],
                          capture_output=True, text=True, check=True)
    profile = tmp_path / "lulesh" / "profile"
    assert sorted(p.name for p in profile.iterdir()) == ["cxl.csv", "ddr.csv"]
    # The summary: the run on the 26.8 GB/s, 158 ns expander is the slower one.
    seconds = {}
    for line in done.stdout.splitlines():
        name, _, rest = line.strip().partition(": ")
        if name in ("ddr", "cxl"):
            seconds[name] = float(rest.split(" s,")[0])
    assert seconds["cxl"] > 1.5 * seconds["ddr"], done.stdout
    runs = (tmp_path / "lulesh" / "runs" / "runs.csv").read_text().splitlines()
    assert runs[0] == "name,placement,runtime_ns" and len(runs) > 10
    placement = json.loads((tmp_path / "lulesh" / "runs" / runs[1].split(",")[1]).read_text())
    assert "cxl" in json.dumps(placement)


def spill_rewards(env, regions):
    """Episode returns with 0, 1 and all regions on the expander (tier 1)."""
    out = []
    for k in (0, 1, regions):
        env.reset(seed=0)
        action = np.r_[np.ones(k, np.int64), np.zeros(regions - k, np.int64)]
        total, done = 0.0, False
        while not done:
            _, reward, term, trunc, _ = env.step(action)
            total += float(np.asarray(reward).ravel()[0])
            done = bool(np.asarray(term).ravel()[0] or np.asarray(trunc).ravel()[0])
        out.append(total)
    return out


@needs_binary
def test_the_environment_serves_ddr5cxl_over_zeromq(cache):
    env = gymnasium.make(tiergym.DEFAULT_TASK_ID, profiles=["lulesh"], **TASK)
    try:
        spec = env.unwrapped.tier_spec
        np.testing.assert_allclose(spec["tier_bandwidth_gbps"], [263.57, 26.759])
        assert list(spec["tier_capacity_bytes"]) == [128 << 30, 256 << 30]
        none, one, every = spill_rewards(env, 8)
        # Everything on the DDR5 is the default (0); the expander only costs time here.
        assert none == 0.0 and every < one <= 0.0
    finally:
        env.close()
    # The bundled profiles were generated for this machine, in the cache.
    assert any(p.name.startswith("ddr5cxl-") for p in (cache / "tiergym" / "profiles-v1").iterdir())


@needs_binary
def test_the_default_task_on_ddr5cxl_says_which_tiers_it_has(cache):
    with pytest.raises(tiergym.ServerError, match=r"has no tier 'hbm' \(tiers: ddr, cxl\); "
                                                  r"name one of them, e\.g\. \"cxl:512\""):
        gymnasium.make(tiergym.DEFAULT_TASK_ID, machine="ddr5cxl", profiles=["lulesh"])


@needs_core
def test_the_environment_serves_ddr5cxl_in_process(cache):
    envs = tiergym.InProcessVectorEnv(1, profiles="lulesh", **TASK)
    try:
        np.testing.assert_allclose(envs.tier_spec["tier_bandwidth_gbps"], [263.57, 26.759])
        none, one, every = spill_rewards(envs, 8)
        assert none == 0.0 and every < one <= 0.0
    finally:
        envs.close()


@needs_core
def test_co_scheduled_tenants_share_the_ddr5_and_one_gains_from_the_expander(cache):
    # Two bandwidth-hungry tenants on one socket slow each other on its DDR5; a region of
    # lulesh's on the expander takes traffic off the DDR5: lulesh gains.
    def returns(k):
        node = cosched.parallel_env(scenario=None, machine="ddr5cxl", tenants=["minife", "lulesh"],
                                    num_regions=16, steps=30, action_mode="placement")
        try:
            node.reset(seed=0)
            total = dict.fromkeys(node.possible_agents, 0.0)
            slowdown = 1.0
            while node.agents:
                action = {a: np.zeros(16, np.int64) for a in node.agents}
                for a in action:
                    action[a][:k] = 1
                _, rewards, _, _, infos = node.step(action)
                for a in rewards:
                    total[a] += rewards[a]
                slowdown = max([slowdown] + [float(np.max(i["slowdown"])) for i in infos.values()])
            return total, slowdown
        finally:
            node.close()

    shared, slowdown = returns(0)
    spilled, _ = returns(1)
    assert slowdown > 1.5
    lulesh = [a for a in shared if a.startswith("lulesh")][0]
    assert spilled[lulesh] > shared[lulesh]
