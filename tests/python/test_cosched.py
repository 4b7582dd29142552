"""Co-scheduled tenants in Python (tiergym.cosched): PettingZoo's and Gymnasium's checkers,
and one tenant against the single-application environment."""

import gymnasium
import numpy as np
import pytest

import tiergym
from tiergym import cosched
from tiergym.inprocess import have_core

pytestmark = pytest.mark.skipif(not have_core(), reason="the extension tiergym._core is not built")

SMALL = {"num_regions": 8, "steps": 12}


def small_parallel(**kw):
    return cosched.parallel_env(scenario="knl-2", **{**SMALL, **kw})


def test_pettingzoo_parallel_api_test_passes():
    from pettingzoo.test import parallel_api_test
    parallel_api_test(small_parallel(tenant_start_steps="0,3"), num_cycles=40)


def test_pettingzoo_seed_test_passes():
    from pettingzoo.test import parallel_seed_test
    parallel_seed_test(lambda: small_parallel(start_jitter_steps=3), num_cycles=20)


def test_gymnasium_check_env_passes_on_the_scheduler_view():
    from gymnasium.utils.env_checker import check_env
    env = gymnasium.make(cosched.COSCHED_SCHEDULER_ID, scenario="knl-2", **SMALL)
    check_env(env.unwrapped, skip_render_check=True)
    obs, info = env.reset(seed=1)
    assert env.observation_space.contains(obs)
    assert len(info["tenants"]) == 2
    env.close()


def test_one_tenant_gives_the_single_application_rewards_bit_for_bit():
    for config in ({"num_regions": 8, "steps": 12},
                   {"num_regions": 16, "steps": 10, "action_mode": "keep",
                    "tier_capacity_mib": "hbm:300"}):
        single = tiergym.InProcessVectorEnv(1, profiles="lulesh", **config)
        node = cosched.parallel_env(scenario=None, tenants=["lulesh"], **config)
        try:
            single.reset(seed=3)
            node.reset(seed=3)
            rng = np.random.default_rng(3)
            agent = node.possible_agents[0]
            for _ in range(200):
                action = node.action_space(agent).sample()
                _, r1, term1, _, _ = single.step(action[None, :])
                _, r2, term2, _, infos = node.step({agent: action})
                assert r2[agent] == r1[0]  # bit for bit
                assert term2[agent] == term1[0]
                if term1[0]:
                    break
                rng.random()
            else:
                pytest.fail("the episode never ended")
        finally:
            single.close()


def test_co_runners_slow_each_other_and_the_global_weight_mixes_rewards():
    env = small_parallel(tier_capacity_mib="hbm:65536")
    own = small_parallel(tier_capacity_mib="hbm:65536", global_weight=1.0)
    env.reset(seed=0)
    own.reset(seed=0)
    hbm = {a: np.ones(env.action_space(a).shape, np.int64) for a in env.possible_agents}
    slowed = False
    while env.agents:
        _, rewards, _, _, infos = env.step(hbm)
        _, mixed, _, _, _ = own.step(hbm)
        slowed = slowed or any(np.max(i["slowdown"]) > 1.0 for i in infos.values())
        mean = np.mean([rewards[a] for a in rewards if infos[a]["active"]])
        for a in mixed:
            assert mixed[a] == pytest.approx(mean)
    assert slowed


def test_bundled_scenarios_load_by_name():
    for name in ("knl-2", "knl-4", "disagg-2", "disagg-4"):
        env = cosched.SchedulerEnv(scenario=name, steps=4, num_regions=4)
        obs, info = env.reset(seed=0)
        assert len(info["tenants"]) == len(cosched.SCENARIOS[name]["tenants"])
        assert obs.shape == env.observation_space.shape
        tiers = 3 if name.startswith("disagg") else 2
        assert len(info["tier_used_bytes"]) == tiers
    with pytest.raises(ValueError, match="unknown scenario"):
        cosched.scenario_config("nosuch")


def test_bad_configurations_name_the_key():
    with pytest.raises(ValueError, match="config key 'tenant_start_steps'"):
        small_parallel(tenant_start_steps="0")
    with pytest.raises(ValueError, match="config key 'interference'"):
        small_parallel(interference="x.json")
    with pytest.raises(ValueError, match="objective"):
        cosched.SchedulerEnv(objective="best")


def test_a_malformed_apps_csv_is_an_error_naming_its_line(tmp_path, monkeypatch):
    path = tmp_path / "apps.csv"
    path.write_text("app,read_gbps,write_gbps\nminife,32.5,5.8\nlulesh,fast,1\n")
    monkeypatch.setattr(cosched, "_bundled_data", lambda name: path)
    with pytest.raises(ValueError, match=rf"{path}:3: expected app,read_gbps,write_gbps"):
        cosched.bundled_read_pct()
    path.write_text("app,read_gbps,write_gbps\nminife,32.5,5.8\n")
    assert cosched.bundled_read_pct() == pytest.approx({"minife": 100 * 32.5 / 38.3})


def test_the_bundled_applications_read_shares_are_the_default():
    # apps.csv's read / (read + write) bandwidth: minife 85 %, lulesh 65 %.
    config = cosched.scenario_config("knl-2")
    shares = [float(v) for v in config["tenant_read_pct"]]
    assert shares == pytest.approx([84.9, 64.9], abs=0.2)
    # A tenant the bundled data does not know reads only; an override stays.
    assert cosched.scenario_config(None, tenants=["minife", "/some/dir"])[
        "tenant_read_pct"] == [str(shares[0]), "100.0"]
    assert cosched.scenario_config("knl-2", tenant_read_pct="70,70")["tenant_read_pct"] == "70,70"
    assert "tenant_read_pct" not in cosched.scenario_config(None, tenants=["/a", "/b"])
    # They change the slowdowns: the co-runners' curves are read at their read share.
    def first_slowdowns(**kw):
        env = small_parallel(**kw)
        env.reset(seed=0)
        _, _, _, _, infos = env.step({})
        return [tuple(i["slowdown"]) for i in infos.values()]
    assert first_slowdowns() != first_slowdowns(tenant_read_pct="100,100")


def test_a_waiting_tenants_bad_action_is_refused_naming_it():
    env = small_parallel(tenant_start_steps="0,3")
    env.reset(seed=0)
    bad = np.zeros(8, np.int64)
    bad[2] = 7
    with pytest.raises(ValueError, match=r"actions\[1\]"):
        env.step({"lulesh": bad})
    env.step({"lulesh": np.ones(8, np.int64)})  # valid: checked, then ignored


def test_the_reference_policies_evaluate_and_print_every_tenant(capsys):
    import cosched_evaluate
    assert cosched_evaluate.main(["--scenarios", "knl-2", "--steps", "6", "--regions", "4"]) == 0
    out = capsys.readouterr().out
    for policy in ("default", "blind", "aware", "oracle"):
        assert f"\n{policy} " in out
    assert "minife=" in out and "lulesh=" in out
    with pytest.raises(SystemExit):
        cosched_evaluate.main(["--scenarios", "nosuch"])


def test_the_policy_plot_draws_a_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    import cosched_evaluate
    path = tmp_path / "policies.png"
    assert cosched_evaluate.main(["--scenarios", "knl-2", "--steps", "4", "--regions", "4",
                                  "--plot", str(path)]) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot: {path}" in capsys.readouterr().out


def test_the_state_is_every_tenants_observation():
    env = small_parallel()
    observations, _ = env.reset(seed=2)
    state = env.state()
    assert env.state_space.contains(state)
    np.testing.assert_array_equal(state, np.concatenate([observations[a]
                                                         for a in env.possible_agents]))
