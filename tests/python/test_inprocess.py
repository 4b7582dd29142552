"""tiergym.InProcessVectorEnv (env/python/tiergym/inprocess.py, the extension tiergym._core):
the same episodes as tiergym.VectorEnv through `tiergym serve` for the same seeds and
actions, bit for bit, over full episodes in the three autoreset modes (partial resets,
per-environment configurations and profiles included); chosen with one argument through
tiergym.VectorEnv and gymnasium.make_vec; EnvPool-style send/recv; outputs without copies;
errors that name what to fix."""

import gymnasium
import numpy as np
import pytest

from tiergym_testing import BINARY, SKIP_REASON, server_fixture
import tiergym
from tiergym import inprocess

CORE_REASON = ""
try:
    inprocess.load_core()
except ImportError as e:  # pragma: no cover - depends on the build
    CORE_REASON = f"the extension is not built (TIERGYM_BUILD_PYTHON_EXT needs nanobind): {e}"

needs_core = pytest.mark.skipif(bool(CORE_REASON), reason=CORE_REASON)
needs_both = pytest.mark.skipif(bool(CORE_REASON) or BINARY is None,
                                reason=CORE_REASON or SKIP_REASON)

# Short episodes over the bundled profiles, with a small fast tier so that some moves are
# refused for capacity (refused_regions is exercised).
CONFIG = dict(num_regions=16, steps=9, tier_capacity_mib="hbm:2048", profiles="minife,lulesh")
# Episodes of different lengths and capacities per sub-environment.
CONFIGS = [{"steps": 9}, {"steps": 5}, {"steps": 9, "tier_capacity_mib": "hbm:1024"},
           {"steps": 7}, {"steps": 9}]


server = server_fixture("--threads", "2")


def assert_info_equal(a, b, where):
    assert sorted(a) == sorted(b), where
    for key in a:
        x, y = a[key], b[key]
        if key in ("refused_regions", "final_obs"):
            # (tiergym.VectorEnv's final_obs is a 2-D object array when every row ended;
            # compare row by row.)
            assert len(x) == len(y), (where, key)
            for i, (u, v) in enumerate(zip(x, y)):
                if u is None or v is None:
                    assert u is None and v is None, (where, key, i)
                else:
                    u = np.asarray(u, dtype=np.float32 if key == "final_obs" else None)
                    v = np.asarray(v, dtype=np.float32 if key == "final_obs" else None)
                    np.testing.assert_array_equal(u, v, err_msg=f"{where} {key}[{i}]")
                    assert u.dtype == v.dtype, (where, key)
        elif key == "final_info":
            assert_info_equal(x, y, f"{where} final_info")
        else:
            assert x.dtype == y.dtype, (where, key, x.dtype, y.dtype)
            assert x.shape == y.shape, (where, key)
            assert np.array_equal(x, y), (where, key)


def copy_infos(infos):
    return {k: (copy_infos(v) if isinstance(v, dict) else np.array(v, copy=True))
            for k, v in infos.items()}


def assert_same_vector_env(local, remote):
    for name in ("single_observation_space", "single_action_space", "observation_space",
                 "action_space"):
        assert getattr(local, name) == getattr(remote, name), name
    assert local.metadata == remote.metadata
    assert local.num_envs == remote.num_envs
    assert local.configs == remote.configs
    assert local.tiers == remote.tiers and local.profiles == remote.profiles
    for key, value in remote.tier_spec.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(local.tier_spec[key], value, err_msg=key)
        else:
            assert local.tier_spec[key] == value, key

def assert_same_steps(env, reference, mode, check_step=None):
    """Steps two vector environments of len(CONFIGS) sub-environments, just reset alike,
    with the same random actions for 30 steps (three autoresets each and more; in DISABLED
    mode partial resets of the ended ones, some with a seed and a profile of their own) and
    asserts the same outputs and masks every time, and that episodes ended, moves were
    refused and partial resets happened. check_step(out) runs on each of env's results."""
    n = len(CONFIGS)
    rng = np.random.default_rng(5)
    ended = refused = partial = 0
    for t in range(30):
        actions = rng.integers(0, 2, size=(n, CONFIG["num_regions"]))
        r = reference.step(actions)
        out = env.step(actions)
        assert_same_outputs(out, r, f"step {t}")
        np.testing.assert_array_equal(env.action_masks(), reference.action_masks())
        if check_step is not None:
            check_step(out)
        done = r[2] | r[3]
        ended += int(done.sum())
        refused += sum(len(x) > 0 for x in r[4]["refused_regions"])
        if mode == tiergym.DISABLED and done.any():
            options = {"reset_mask": done, "profile": ["minife", "lulesh"] * 2 + ["minife"]}
            seed = [int(rng.integers(0, 1000)) if i % 2 else None for i in range(n)]
            assert_same_outputs(env.reset(seed=seed, options=options),
                                reference.reset(seed=seed, options=options), f"reset {t}")
            partial += int(not done.all())
    assert ended >= 2 * n
    assert refused > 0
    if mode == tiergym.DISABLED:
        assert partial > 0


def assert_same_outputs(l, r, where):
    """One reset's (obs, infos) or one step's five outputs, bit for bit, same dtypes."""
    l = list(l)
    names = ("obs", "rewards", "terminations", "truncations", "infos")[-len(l):]
    if len(l) == 2:
        names = ("obs", "infos")
    for name, x, y in zip(names, l, r):
        if name == "infos":
            assert_info_equal(copy_infos(x), y, f"{where} infos")
        else:
            x = np.array(x, copy=True)
            assert x.dtype == y.dtype, (where, name, x.dtype, y.dtype)
            np.testing.assert_array_equal(x, y, err_msg=f"{where} {name}")


@needs_both
@pytest.mark.parametrize("mode", [tiergym.NEXT_STEP, tiergym.SAME_STEP, tiergym.DISABLED])
@pytest.mark.parametrize("threads", [1, 2])
def test_episodes_are_bit_identical_to_the_server_path(server, mode, threads):
    n = len(CONFIGS)
    remote = tiergym.VectorEnv(n, address=server, autoreset_mode=mode, configs=CONFIGS,
                               **CONFIG)
    local = tiergym.make_vec(tiergym.ENV_ID, n, inprocess=True, autoreset_mode=mode,
                             threads=threads, configs=CONFIGS, **CONFIG)
    try:
        assert isinstance(local, tiergym.InProcessVectorEnv)
        assert_same_vector_env(local, remote)
        seeds = [11, None, 13, 14, 15]
        # Env 1 is seeded from entropy on both sides (an unseeded first reset), so its
        # episode may differ; the others are the same. Then env 1 gets a seed and the
        # others go on with their generators.
        lo, _ = local.reset(seed=seeds)
        ro, _ = remote.reset(seed=seeds)
        np.testing.assert_array_equal(lo[[0, 2, 3, 4]], ro[[0, 2, 3, 4]])
        same = [None, 12, None, None, None]
        assert_same_outputs(local.reset(seed=same, options={"profile": 1}),
                            remote.reset(seed=same, options={"profile": 1}), "reset again")
        np.testing.assert_array_equal(local.action_masks(), remote.action_masks())
        assert_same_steps(local, remote, mode)
    finally:
        remote.close()
        local.close()


@needs_both
def test_configuration_values_keep_their_types_as_on_the_server_path(server):
    # A real number with more digits than a text detour would keep, and a list of
    # profiles: the same configurations in force and the same episodes as the server's.
    typed = dict(CONFIG, history_decay=0.123456789, profiles=["minife", "lulesh"])
    remote = tiergym.VectorEnv(2, address=server, **typed)
    local = tiergym.make_vec(tiergym.ENV_ID, 2, inprocess=True, **typed)
    rounded = tiergym.make_vec(tiergym.ENV_ID, 2, inprocess=True,
                               **dict(typed, history_decay=0.123457))
    try:
        assert local.configs == remote.configs
        assert local.config["history_decay"] == "0.123456789"
        assert local.config["profiles"] == "minife,lulesh"
        outs = [env.reset(seed=[3, 4]) for env in (local, remote, rounded)]
        assert_same_outputs(outs[0], outs[1], "reset")
        rng = np.random.default_rng(2)
        differs = False
        for t in range(CONFIG["steps"]):
            actions = rng.integers(0, 2, size=(2, CONFIG["num_regions"]))
            outs = [env.step(actions) for env in (local, remote, rounded)]
            assert_same_outputs(outs[0], outs[1], f"step {t}")
            differs = differs or not np.array_equal(outs[0][0], outs[2][0])
        assert differs  # the digits a text detour would lose change the episode
    finally:
        for env in (local, remote, rounded):
            env.close()
    core = inprocess.load_core()
    with pytest.raises(TypeError, match=r"config\.num_regions: expected a string, integer, "
                                        "number, bool or list of strings, got complex"):
        core.VectorCore([{"num_regions": 1j}])
    with pytest.raises(TypeError, match=r"config\.profiles\[1\]: expected a string, got int"):
        core.VectorCore([{"profiles": ["minife", 3]}])


@needs_core
def test_make_vec_with_inprocess_true_gives_the_in_process_env():
    envs = gymnasium.make_vec(tiergym.ENV_ID, num_envs=3, inprocess=True, threads=2, **CONFIG)
    try:
        assert isinstance(envs, tiergym.InProcessVectorEnv)
        assert envs.num_envs == 3 and envs.threads == 2
        assert envs.spec.id == tiergym.ENV_ID
        obs, _ = envs.reset(seed=0)
        assert envs.observation_space.contains(obs.copy())
        envs.step(envs.action_space.sample())
    finally:
        envs.close()


@needs_core
def test_gymnasiums_vector_env_checks_pass():
    from gymnasium.utils.env_checker import data_equivalence
    for mode in (tiergym.NEXT_STEP, tiergym.SAME_STEP, tiergym.DISABLED):
        a = tiergym.InProcessVectorEnv(2, autoreset_mode=mode, copy=True, **CONFIG)
        b = tiergym.InProcessVectorEnv(2, autoreset_mode=mode, copy=True, **CONFIG)
        try:
            assert data_equivalence(a.reset(seed=3), b.reset(seed=3))
            actions = a.action_space.sample()
            assert a.action_space.contains(actions)
            assert data_equivalence(a.step(actions), b.step(actions))
        finally:
            a.close()
            b.close()


@needs_core
def test_make_vec_with_inprocess_true_is_the_in_process_one():
    envs = tiergym.make_vec(tiergym.ENV_ID, 2, inprocess=True, **CONFIG)
    try:
        assert isinstance(envs, tiergym.InProcessVectorEnv)
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (2, envs.single_observation_space.shape[0])
    finally:
        envs.close()
    with pytest.raises(ValueError, match="no address"):
        tiergym.make_vec(tiergym.ENV_ID, 2, address="tcp://127.0.0.1:1", inprocess=True)
    # The task's preset comes first, the keyword arguments over it.
    envs = tiergym.make_vec(tiergym.DEFAULT_TASK_ID, 1, inprocess=True, steps=5)
    try:
        assert envs.config["num_regions"] == str(tiergym.DEFAULT_TASK["num_regions"])
        assert envs.config["action_mode"] == tiergym.DEFAULT_TASK["action_mode"]
        assert envs.config["steps"] == "5"
    finally:
        envs.close()
    with pytest.raises(ValueError, match="unknown environment id"):
        tiergym.make_vec("tiergym/Nothing-v0", 1, inprocess=True)


@needs_core
def test_the_old_spelling_vector_env_inprocess_true_still_works_deprecated():
    with pytest.warns(DeprecationWarning, match="tiergym.make_vec"):
        envs = tiergym.VectorEnv(2, inprocess=True, **CONFIG)
    try:
        assert isinstance(envs, tiergym.InProcessVectorEnv)
        envs.reset(seed=0)
    finally:
        envs.close()
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="no address"):
        tiergym.VectorEnv(2, "tcp://127.0.0.1:1", inprocess=True)


@needs_core
def test_outputs_are_preallocated_and_returned_without_a_copy():
    envs = tiergym.InProcessVectorEnv(3, **CONFIG)
    try:
        o0, _ = envs.reset(seed=1)
        first = o0.copy()
        o1, r1, *_ = envs.step(np.zeros((3, 16), dtype=np.int64))
        assert np.shares_memory(o0, o1)  # the same array, rewritten in place
        assert not np.array_equal(o1, first)
    finally:
        envs.close()
    envs = tiergym.InProcessVectorEnv(3, copy=True, **CONFIG)
    try:
        o0, _ = envs.reset(seed=1)
        o1, *_ = envs.step(np.zeros((3, 16), dtype=np.int64))
        assert not np.shares_memory(o0, o1)
        np.testing.assert_array_equal(o0, first)
    finally:
        envs.close()


@needs_core
@pytest.mark.parametrize("mode", [tiergym.NEXT_STEP, tiergym.SAME_STEP])
def test_send_recv_gives_each_environment_its_synchronous_episode(mode):
    n, batch = 6, 4
    sync = tiergym.InProcessVectorEnv(n, autoreset_mode=mode, copy=True, **CONFIG)
    pool = tiergym.InProcessVectorEnv(n, autoreset_mode=mode, threads=2, batch_size=batch,
                                      copy=True, **CONFIG)
    try:
        # The synchronous trajectories: per env, its actions and rows.
        rngs = [np.random.default_rng(100 + i) for i in range(n)]
        actions = [[rngs[i].integers(0, 2, size=16) for _ in range(12)] for i in range(n)]
        want = [[] for _ in range(n)]
        obs, _ = sync.reset(seed=20)
        for i in range(n):
            want[i].append((obs[i], 0.0, False, False))
        for t in range(11):
            obs, rew, term, trunc, _ = sync.step(np.stack([actions[i][t] for i in range(n)]))
            for i in range(n):
                want[i].append((obs[i], rew[i], term[i], trunc[i]))
        pool.async_reset(seed=20)
        got = [[] for _ in range(n)]
        while pool.in_flight:
            # The last steps: fewer in flight than batch_size (which environments end
            # first is the threads' doing), so recv() takes those.
            pool.batch_size = min(batch, pool.in_flight)
            obs, rew, term, trunc, infos = pool.recv()
            assert obs.shape == (pool.batch_size, 16 * 4 + 4)
            ids = infos["env_id"]
            send_ids, send_actions = [], []
            for row, i in enumerate(ids):
                got[i].append((obs[row], rew[row], term[row], trunc[row]))
                k = len(got[i]) - 1
                if k < 11:
                    send_ids.append(i)
                    send_actions.append(actions[i][k])
            if send_ids:
                pool.send(np.stack(send_actions), send_ids)
        assert [len(g) for g in got] == [12] * n
        for i in range(n):
            for k, (w, g) in enumerate(zip(want[i], got[i])):
                np.testing.assert_array_equal(g[0], w[0], err_msg=f"env {i} step {k}")
                assert (g[1], g[2], g[3]) == (w[1], w[2], w[3]), (i, k)
    finally:
        sync.close()
        pool.close()


@needs_core
def test_errors_name_what_to_fix():
    envs = tiergym.InProcessVectorEnv(2, **CONFIG)
    try:
        with pytest.raises(gymnasium.error.ResetNeeded):
            envs.step(np.zeros((2, 16), dtype=np.int64))
        envs.reset(seed=0, options={"profile": "lulesh"})
        bad = np.zeros((2, 16), dtype=np.int64)
        bad[1, 3] = 5
        with pytest.raises(ValueError, match=r"actions\[1\]\[3\]: tier 5 out of range \[0, 2\)"):
            envs.step(bad)
        with pytest.raises(ValueError):
            envs.step(np.zeros((2, 15), dtype=np.int64))
        with pytest.raises(ValueError, match="unknown profile"):
            envs.reset(options={"profile": "nope"})
        with pytest.raises(ValueError, match="3 seeds for 2 environments"):
            envs.reset(seed=[1, 2, 3])
        with pytest.raises(ValueError, match=r"actions\[0\]\[0\]: 0.5 is not a whole number"):
            envs.step(np.full((2, 16), 0.5))
    finally:
        envs.close()
    envs = tiergym.InProcessVectorEnv(2, autoreset_mode=tiergym.DISABLED, **CONFIG)
    try:
        with pytest.raises(ValueError, match="the first reset resets every"):
            envs.reset(options={"reset_mask": np.array([True, False])})
        envs.reset(seed=0)
        for _ in range(CONFIG["steps"]):
            envs.step(np.zeros((2, 16), dtype=np.int64))
        with pytest.raises(RuntimeError, match="env 0 has no episode running"):
            envs.step(np.zeros((2, 16), dtype=np.int64))
    finally:
        envs.close()
    envs.close()
    envs.close()  # idempotent
    with pytest.raises(gymnasium.error.ClosedEnvironmentError, match="closed"):
        envs.step(np.zeros((2, 16), dtype=np.int64))
    with pytest.raises(ValueError, match="config.bogus: unknown configuration key"):
        tiergym.InProcessVectorEnv(1, bogus=1)
    with pytest.raises(ValueError, match="config.num_regions"):
        tiergym.InProcessVectorEnv(1, num_regions=0)
    with pytest.raises(ValueError, match="configs has 1 entries for 2"):
        tiergym.InProcessVectorEnv(2, configs=[{}])
    with pytest.raises(ValueError, match="env 1: its spaces differ"):
        tiergym.InProcessVectorEnv(configs=[{"num_regions": 8}, {"num_regions": 16}])
    with pytest.raises(TypeError, match="timeout: the in-process vector environment has no"):
        tiergym.make_vec(tiergym.ENV_ID, 1, inprocess=True, timeout=3)


@needs_core
def test_is_a_gymnasium_vector_env():
    envs = tiergym.InProcessVectorEnv(2, autoreset_mode=tiergym.SAME_STEP, **CONFIG)
    try:
        assert isinstance(envs, gymnasium.vector.VectorEnv)
        assert envs.metadata["autoreset_mode"] == gymnasium.vector.AutoresetMode.SAME_STEP
        obs, _ = envs.reset(seed=0)
        assert envs.observation_space.contains(obs.copy())
        masks = envs.action_masks()
        assert masks.dtype == np.bool_ and masks.shape == (2, 16 * 2)
    finally:
        envs.close()


@needs_core
def test_sb3s_vec_env_runs_over_the_in_process_env():
    pytest.importorskip("stable_baselines3")
    from tiergym.sb3 import TierVecEnv
    venv = TierVecEnv(2, inprocess=True, **CONFIG)
    try:
        assert venv.venv.copy  # SB3 keeps the last observation across a step
        first = venv.reset()
        obs, rewards, dones, infos = venv.step(np.zeros((2, 16), dtype=np.int64))
        assert not np.shares_memory(first, obs)
        assert obs.shape == (2, 16 * 4 + 4) and len(infos) == 2
    finally:
        venv.close()
    with pytest.raises(ValueError, match="copy=True"):
        TierVecEnv(tiergym.InProcessVectorEnv(1, autoreset_mode=tiergym.SAME_STEP, **CONFIG))


@needs_both
@pytest.mark.parametrize("action_mode", ["keep", "move"])
def test_the_keep_and_move_modes_masks_and_episodes_are_the_servers(server, action_mode):
    # The mask's shape follows the action: [regions, 1 + tiers] in keep mode (the row of
    # the default task), [regions * tiers + 1] in move mode.
    config = dict(CONFIG, action_mode=action_mode)
    remote = tiergym.VectorEnv(3, address=server, autoreset_mode="same_step", **config)
    local = tiergym.make_vec(tiergym.ENV_ID, 3, inprocess=True, autoreset_mode="same_step",
                             **config)
    try:
        assert_same_outputs(local.reset(seed=4), remote.reset(seed=4), "reset")
        tiers = len(local.tiers)
        shape = (3, 16, 1 + tiers) if action_mode == "keep" else (3, 16 * tiers + 1)
        assert local.reset(seed=4)[1]["action_mask"].shape == shape
        remote.reset(seed=4)
        local.action_space.seed(1)
        for t in range(12):  # past the end of the first episodes (9 steps)
            actions = local.action_space.sample()
            assert_same_outputs(local.step(actions), remote.step(actions), f"step {t}")
            np.testing.assert_array_equal(local.action_masks(), remote.action_masks())
    finally:
        remote.close()
        local.close()
