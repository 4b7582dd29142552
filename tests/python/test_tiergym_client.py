"""The Python client (env/python/tiergym) against a real `tiergym serve`: the Gymnasium
contract (more with Gymnasium itself in test_gymnasium.py), seeding, vector autoreset in both modes, server loss, errors naming the field, and
an end-to-end episode. Skipped (with the reason) when the tiergym binary is not built."""

import os
import signal
import sys
import time

import numpy as np
import pytest

from tiergym_testing import needs_binary, server_fixture

import tiergym

# Small episodes keep the suite fast; the bundled profiles are served.
CONFIG = {"num_regions": 8, "steps": 6}


server = server_fixture("--threads", "2")


@pytest.fixture
def env(server):
    e = tiergym.make(tiergym.ENV_ID, address=server, **CONFIG)
    yield e
    e.close()


def run_episode(env, seed, policy):
    obs, info = env.reset(seed=seed)
    trajectory = [(obs, 0.0, info["profile"])]
    total = 0.0
    while True:
        obs, reward, terminated, truncated, info = env.step(policy(obs))
        trajectory.append((obs, reward, info["profile"]))
        total += reward
        if terminated or truncated:
            return total, info, trajectory


def all_fast(env):
    return lambda obs: np.ones(env.num_regions, dtype=np.int64)


# --- Gymnasium contract --------------------------------------------------------------------

@needs_binary
def test_reset_and_step_follow_the_gymnasium_signatures(env):
    obs, info = env.reset(seed=0)
    assert isinstance(obs, np.ndarray) and obs.dtype == np.float32
    assert obs in env.observation_space
    assert isinstance(info, dict) and info["profile"] in env.profiles
    action = env.action_space.sample()
    assert action in env.action_space
    result = env.step(action)
    assert len(result) == 5
    obs, reward, terminated, truncated, info = result
    assert obs in env.observation_space
    assert type(reward) is float
    assert type(terminated) is bool and type(truncated) is bool
    assert info["action_mask"].shape == (env.num_regions, len(env.tiers))
    assert info["tier_used_bytes"].dtype == np.uint64


@needs_binary
def test_every_observation_of_an_episode_is_in_the_observation_space(env):
    env.action_space.seed(5)
    _, _, trajectory = run_episode(env, 5, lambda obs: env.action_space.sample())
    for obs, _, _ in trajectory:
        assert env.observation_space.contains(obs)


@needs_binary
def test_same_seed_same_episode(env):
    env.action_space.seed(1)
    actions = [env.action_space.sample() for _ in range(CONFIG["steps"])]
    runs = []
    for _ in range(2):
        it = iter(actions)
        runs.append(run_episode(env, 42, lambda obs: next(it)))
    for (o1, r1, p1), (o2, r2, p2) in zip(runs[0][2], runs[1][2]):
        assert np.array_equal(o1, o2) and r1 == r2 and p1 == p2


@needs_binary
def test_the_seed_picks_the_profile_and_options_override_it(env):
    profiles = {env.reset(seed=s)[1]["profile"] for s in range(12)}
    assert len(profiles) > 1  # the seed draws among the served profiles
    for name in env.profiles:
        assert env.reset(seed=0, options={"profile": name})[1]["profile"] == name
    assert env.reset(options={"profile": 0})[1]["profile"] == env.profiles[0]


@needs_binary
def test_an_end_to_end_episode_returns_the_fractional_speedup(env):
    total, info, trajectory = run_episode(env, 3, all_fast(env))
    assert len(trajectory) == CONFIG["steps"] + 1
    speedup = (info["default_total_ns"] - info["elapsed_ns"]) / info["default_total_ns"]
    assert total == pytest.approx(speedup, rel=1e-9, abs=1e-12)
    assert total > 0  # the bundled applications run faster with everything in HBM
    estimate = env.estimate(info["profile"], '{"default": "hbm"}')
    assert estimate["runtime_ns"] < estimate["default_runtime_ns"]
    # The same measure as an episode's return: time saved over the default run.
    assert estimate["speedup"] == pytest.approx(
        1 - estimate["runtime_ns"] / estimate["default_runtime_ns"])


@needs_binary
def test_the_spec_describes_tiers_and_regions_for_placements(env):
    spec = env.tier_spec
    tiers = len(env.tiers)
    assert spec["tier_capacity_bytes"].dtype == np.uint64
    assert spec["tier_capacity_bytes"].shape == (tiers,)
    assert env.tiers == ["ddr", "hbm"] and spec["tier_capacity_bytes"][1] == 16 << 30  # knl
    assert spec["tier_migration_gbps"].shape == (tiers,) and (spec["tier_migration_gbps"] > 0).all()
    assert spec["tier_bandwidth_gbps"][1] > spec["tier_bandwidth_gbps"][0]  # hbm over ddr
    bounds = spec["region_bounds"]
    assert bounds.shape == (len(env.profiles), env.num_regions, 2)
    for p, profile in enumerate(env.profiles):
        starts, ends = bounds[p, :, 0], bounds[p, :, 1]
        assert (starts <= ends).all() and (ends[:-1] <= starts[1:]).all()  # sorted, disjoint
        obs, info = env.reset(options={"profile": profile})
        assert int((ends - starts).sum()) == int(info["tier_used_bytes"].sum())
    # A region's range is a placement the estimator takes: region 0 of the first profile on
    # hbm, as a static placement, estimates the same as the episode that moves it at once.
    profile = env.profiles[0]
    start, end = bounds[0, 0]
    placement = {"default": "ddr", "ranges": [{"start": start, "end": end, "tier": "hbm"}]}
    estimate = env.estimate(profile, placement)
    env.reset(options={"profile": profile})
    action = np.zeros(env.num_regions, dtype=np.int64)
    action[0] = 1
    total = 0.0
    while True:
        _, reward, terminated, truncated, info = env.step(action)
        total += reward + info["migration_ns"] / info["default_total_ns"]  # without migration
        if terminated or truncated:
            break
    assert total == pytest.approx(estimate["speedup"], rel=1e-6, abs=1e-9)


@needs_binary
def test_a_tier_capacity_is_a_configuration_key(server):
    with tiergym.make(tiergym.ENV_ID, address=server, tier_capacity_mib="hbm:256",
                      **CONFIG) as small:
        assert small.tier_spec["tier_capacity_bytes"][1] == 256 << 20
        small.reset(seed=0, options={"profile": "lulesh"})
        _, _, _, _, info = small.step(np.ones(small.num_regions, dtype=np.int64))
        assert len(info["refused_regions"]) > 0 and info["tier_used_bytes"][1] <= 256 << 20
    venv = tiergym.VectorEnv(2, address=server, tier_capacity_mib="hbm:256", **CONFIG)
    try:
        assert venv.tiers == ["ddr", "hbm"] and venv.num_regions == CONFIG["num_regions"]
        assert venv.tier_spec["tier_capacity_bytes"][1] == 256 << 20
    finally:
        venv.close()


@needs_binary
def test_errors_name_the_field(env):
    env.reset(seed=0)
    with pytest.raises(tiergym.ServerError) as e:
        env.step(np.zeros(3, dtype=np.int64))
    assert e.value.code == "INVALID_ARGUMENT" and e.value.field == "action"
    bad = np.zeros(env.num_regions, dtype=np.int64)
    bad[5] = 7
    with pytest.raises(tiergym.ServerError) as e:
        env.step(bad)
    assert e.value.field == "action[5]" and "out of range" in e.value.message
    with pytest.raises(tiergym.ServerError) as e:
        env.reset(options={"profile": "no-such-app"})
    assert e.value.field == "options.profile"
    # The session is still usable.
    env.reset(seed=0)
    env.step(np.zeros(env.num_regions, dtype=np.int64))


@needs_binary
def test_step_after_the_end_needs_a_reset(env):
    run_episode(env, 0, all_fast(env))
    with pytest.raises(tiergym.ServerError) as e:
        env.step(np.zeros(env.num_regions, dtype=np.int64))
    assert e.value.code == "FAILED_PRECONDITION" and e.value.field == "session"


@needs_binary
def test_bad_configuration_is_refused_with_the_key(server):
    with pytest.raises(tiergym.ServerError) as e:
        tiergym.make(address=server, num_regions=0)
    assert e.value.field == "config.num_regions"
    with pytest.raises(tiergym.ServerError) as e:
        tiergym.make(address=server, num_regoins=8)
    assert e.value.field == "config.num_regoins"
    with pytest.raises(ValueError):
        tiergym.make("tiergym/Other-v0")


@needs_binary
def test_move_mode_uses_a_discrete_space(server):
    with tiergym.make(address=server, action_mode="move", **CONFIG) as env:
        assert env.action_space.n == env.num_regions * len(env.tiers) + 1
        obs, info = env.reset(seed=2)
        assert info["action_mask"].shape == (env.action_space.n,)
        obs, reward, *_ = env.step(env.num_regions * len(env.tiers))  # the no-op
        assert reward == pytest.approx(0.0, abs=1e-12)


@needs_binary
def test_config_keys_are_listed(server):
    names = [k[0] for k in tiergym.config_keys(server)]
    assert "num_regions" in names and "steps" in names and "profiles" in names


@needs_binary
def test_a_server_handle_is_shared_by_copies_and_pickles_as_its_endpoint(server):
    import copy
    import pickle
    # gymnasium.make deep-copies keyword arguments such as address=server.
    assert copy.deepcopy({"address": server})["address"] is server
    assert copy.copy(server) is server
    # Sent to another process, the handle is the endpoint: environments there use it.
    assert pickle.loads(pickle.dumps(server)) == server.endpoint


# --- Vector environments -----------------------------------------------------------------

@needs_binary
def test_vector_env_matches_single_envs_and_seeds_each_env(server):
    n = 3
    with tiergym.VectorEnv(n, address=server, **CONFIG) as venv:
        assert venv.metadata["autoreset_mode"] in ("next_step", getattr(
            getattr(sys.modules.get("gymnasium.vector"), "AutoresetMode", None), "NEXT_STEP", None))
        assert venv.observation_space.shape == (n, venv.single_observation_space.shape[0])
        obs, infos = venv.reset(seed=10)
        assert obs.shape == venv.observation_space.shape and infos["_profile"].all()
        singles = [tiergym.make(address=server, **CONFIG) for _ in range(n)]
        try:
            for i, e in enumerate(singles):
                o, info = e.reset(seed=10 + i)
                assert np.array_equal(o, obs[i]) and info["profile"] == infos["profile"][i]
            actions = np.stack([np.arange(venv.tier_spec["num_regions"]) % 2] * n)
            obs, rewards, term, trunc, infos = venv.step(actions)
            for i, e in enumerate(singles):
                o, r, t, u, _ = e.step(actions[i])
                assert np.array_equal(o, obs[i]) and r == rewards[i] and t == term[i]
        finally:
            for e in singles:
                e.close()


@needs_binary
def test_vector_next_step_autoreset(server):
    with tiergym.VectorEnv(2, address=server, num_regions=8, steps=2) as venv:
        venv.reset(seed=0)
        ones = np.ones((2, 8), dtype=np.int64)
        _, _, term, _, _ = venv.step(ones)
        assert not term.any()
        _, rewards, term, _, infos = venv.step(ones)
        assert term.all()
        # The next step resets: first observations, reward 0, not terminated, action ignored.
        obs, rewards, term, trunc, infos = venv.step(ones * 5)  # out of range, yet ignored
        assert not term.any() and not trunc.any()
        assert np.all(rewards == 0) and np.all(infos["step"] == 0)
        assert obs in venv.observation_space
        obs, rewards, term, trunc, infos = venv.step(ones)  # the new episodes go on
        assert not term.any()


@needs_binary
def test_vector_same_step_autoreset(server):
    with tiergym.VectorEnv(2, address=server, autoreset_mode="same_step", num_regions=8,
                           steps=2) as venv:
        assert venv.metadata["autoreset_mode"] in ("same_step", getattr(
            getattr(sys.modules.get("gymnasium.vector"), "AutoresetMode", None), "SAME_STEP", None))
        venv.reset(seed=0)
        ones = np.ones((2, 8), dtype=np.int64)
        _, _, _, _, infos = venv.step(ones)
        assert "final_obs" not in infos
        obs, rewards, term, trunc, infos = venv.step(ones)
        assert term.all() and np.all(rewards != 0)
        assert infos["_final_obs"].all()
        for i in range(2):
            final = infos["final_obs"][i]
            assert final.shape == obs[i].shape and not np.array_equal(final, obs[i])
        # info["step"]: decision intervals done so far (PROTOCOL.md), 2 at the end.
        assert np.all(infos["final_info"]["step"] == 2) and np.all(infos["step"] == 0)
        # obs already belongs to the new episodes: stepping goes on without a reset.
        _, _, term, _, _ = venv.step(ones)
        assert not term.any()


# --- Private servers, close(), server loss -------------------------------------------------

@needs_binary
def test_private_server_is_stopped_by_close_which_is_idempotent():
    env = tiergym.make(**CONFIG)
    server = env._server
    endpoint = env.endpoint
    assert server.alive() and endpoint.startswith("ipc://")
    env.reset(seed=0)
    env.close()
    env.close()
    assert not server.alive()
    assert not os.path.exists(endpoint[len("ipc://"):])


@needs_binary
def test_a_dead_server_raises_a_clear_exception_at_once():
    env = tiergym.make(timeout=120, **CONFIG)
    try:
        env.reset(seed=0)
        os.kill(env._server.process.pid, signal.SIGKILL)
        start = time.monotonic()
        with pytest.raises(tiergym.ServerUnavailable) as e:
            env.step(np.zeros(env.num_regions, dtype=np.int64))
        assert time.monotonic() - start < 60  # not the 120 s timeout
        assert "exited" in str(e.value)
    finally:
        env.close()


@needs_binary
def test_a_remote_server_that_does_not_answer_times_out(tmp_path):
    with pytest.raises(tiergym.ServerUnavailable) as e:
        tiergym.make(address=f"ipc://{tmp_path}/nobody.sock", timeout=0.5)
    assert "does not exist" in str(e.value) and "nobody.sock" in str(e.value)
    # A socket file that nobody answers on: the timeout, naming the endpoint.
    import zmq
    silent = zmq.Context.instance().socket(zmq.ROUTER)
    silent.bind(f"ipc://{tmp_path}/silent.sock")
    try:
        start = time.monotonic()
        with pytest.raises(tiergym.ServerUnavailable) as e:
            tiergym.make(address=f"ipc://{tmp_path}/silent.sock", timeout=0.5)
        assert "no reply" in str(e.value) and "silent.sock" in str(e.value)
        assert time.monotonic() - start < 5
    finally:
        silent.close(linger=0)


@needs_binary
def test_server_stopped_under_a_connected_env():
    private = tiergym.Server()
    env = tiergym.make(address=private.endpoint, timeout=1.0, **CONFIG)
    env.reset(seed=0)
    private.close()
    with pytest.raises(tiergym.ServerUnavailable):
        env.step(np.zeros(env.num_regions, dtype=np.int64))
    env.close()  # does not hang on the dead server
