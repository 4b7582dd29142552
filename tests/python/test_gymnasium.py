"""tiergym with Gymnasium itself (installed from PyPI by the test command): registration in
every process, gymnasium.make / make_vec in its three modes, Gymnasium's env checker,
vector environments that agree with Gymnasium's own batching (spaces, info dtypes, masks,
autoreset), spawn workers, action masks, seeding from entropy, the package's command and
version, and errors that say what to fix. Small episodes keep it to seconds."""

import os
import pickle
import re
import socket
import subprocess
import sys
import textwrap
import time

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector.utils import batch_space

import tiergym
from tiergym_testing import BINARY, needs_binary, server_fixture

pytestmark = needs_binary
ID = tiergym.ENV_ID
CONFIG = {"num_regions": 8, "steps": 6}
SMALL_HBM = {"num_regions": 8, "steps": 6, "tier_capacity_mib": "hbm:256"}


server = server_fixture("--threads", "2", "--quiet")


def run_python(code, timeout=180, cwd=None):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)


# --- The package ----------------------------------------------------------------------------

def test_the_id_is_registered_in_a_process_that_never_imports_tiergym(tmp_path):
    out = run_python("""
        import sys, gymnasium
        print("tiergym/TierPlacement-v0" in gymnasium.registry, "tiergym" in sys.modules)
        """, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "False"]


def test_the_readme_snippet_works_from_any_directory(tmp_path):
    out = run_python("""
        import gymnasium, tiergym
        e = gymnasium.make("tiergym/TierPlacement-v1", num_regions=8, steps=4)
        obs, info = e.reset(seed=0)
        e.step(e.action_space.sample())
        e.close()
        print(tiergym.find_binary())
        """, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert os.path.join("tiergym", "_bin", "tiergym") in out.stdout or os.environ.get(
        "TIERGYM_BIN") or os.environ.get("TIERGYM_BIN_DIR")


def test_the_command_and_the_module_agree_on_the_version():
    command = os.path.join(os.path.dirname(sys.executable), "tiergym")
    assert os.access(command, os.X_OK), "the console command is installed beside python"
    out = subprocess.run([command, "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == f"tiergym {tiergym.__version__}"
    assert re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", tiergym.__version__)
    out = subprocess.run([command, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "serve" in out.stdout


def test_the_server_reports_the_same_version(server):
    connection = tiergym.Connection(server.endpoint)
    try:
        assert connection.hello["server"] == f"tiergym {tiergym.__version__}"
    finally:
        connection.close()


# --- gymnasium.make and the single environment -----------------------------------------------

def test_gymnasium_env_checker_passes(server):
    env = gymnasium.make(ID, address=server, **CONFIG)
    try:
        check_env(env.unwrapped, skip_render_check=True)
        assert isinstance(env.unwrapped, gymnasium.Env)
        assert isinstance(env.observation_space, gymnasium.spaces.Box)
        assert isinstance(env.action_space, gymnasium.spaces.MultiDiscrete)
    finally:
        env.close()
    with gymnasium.make(ID, address=server, action_mode="move", **CONFIG) as env:
        check_env(env.unwrapped, skip_render_check=True)
        assert isinstance(env.action_space, gymnasium.spaces.Discrete)


def test_render_mode_is_accepted_and_ansi_renders(server):
    env = gymnasium.make(ID, address=server, render_mode="ansi", **CONFIG)
    try:
        env.reset(seed=0, options={"profile": "lulesh"})
        text = env.render()
        assert text.startswith("lulesh step 0: 00000000")
    finally:
        env.close()
    with pytest.raises(TypeError, match="render_mode 'human'"):
        tiergym.TierEnv(address=server, render_mode="human", **CONFIG)


def test_step_after_close_says_the_environment_is_closed(server):
    env = tiergym.TierEnv(address=server, **CONFIG)
    env.reset(seed=0)
    env.close()
    with pytest.raises(gymnasium.error.ClosedEnvironmentError, match="closed"):
        env.step(np.zeros(8, dtype=np.int64))
    venv = tiergym.VectorEnv(2, address=server, **CONFIG)
    venv.reset(seed=0)
    venv.close()
    with pytest.raises(gymnasium.error.ClosedEnvironmentError):
        venv.step(np.zeros((2, 8), dtype=np.int64))


def test_float_actions_are_refused_unless_whole(server):
    with tiergym.TierEnv(address=server, **CONFIG) as env:
        env.reset(seed=0)
        action = np.zeros(8)
        action[3] = 0.7
        with pytest.raises(ValueError, match=r"action\[3\]: 0.7 is not a whole number"):
            env.step(action)
        env.step(np.ones(8))  # 1.0 is tier 1
    with tiergym.TierEnv(address=server, action_mode="move", **CONFIG) as env:
        env.reset(seed=0)
        with pytest.raises(ValueError, match="whole number"):
            env.step(2.5)


def test_info_step_counts_the_intervals_done(server):
    with tiergym.TierEnv(address=server, **CONFIG) as env:
        _, info = env.reset(seed=0)
        assert info["step"] == 0
        for k in range(1, CONFIG["steps"] + 1):
            _, _, terminated, _, info = env.step(np.zeros(8, dtype=np.int64))
            assert info["step"] == k
        assert terminated


def test_unseeded_resets_are_seeded_from_entropy(server):
    envs = [tiergym.TierEnv(address=server, **CONFIG) for _ in range(2)]
    try:
        draws = [[e.reset()[1]["profile"] for _ in range(12)] for e in envs]
        assert draws[0] != draws[1]  # the same seed would give the same 12 profiles
    finally:
        for e in envs:
            e.close()
    with tiergym.VectorEnv(4, address=server, **CONFIG) as venv:
        columns = np.array([venv.reset()[1]["profile"] for _ in range(8)])
        assert len({tuple(columns[:, i]) for i in range(4)}) > 1
    # A seed still gives the same episode.
    with tiergym.TierEnv(address=server, **CONFIG) as env:
        a = [env.reset(seed=9)[0] for _ in range(2)]
        assert np.array_equal(a[0], a[1])


def test_masks_are_int8_and_joint_so_masked_random_actions_fit(server):
    with tiergym.TierEnv(address=server, **SMALL_HBM) as env:
        env.action_space.seed(0)
        for seed in range(3):
            obs, info = env.reset(seed=seed, options={"profile": "lulesh"})
            done = False
            while not done:
                assert info["action_mask"].dtype == np.int8
                action = env.action_space.sample(mask=tuple(info["action_mask"]))
                assert np.array_equal(env.action_masks(), info["action_mask"].astype(bool).ravel())
                obs, _, terminated, truncated, info = env.step(action)
                assert info["refused_regions"] == ()  # the mask is joint: everything fits
                done = terminated or truncated
        # Without the mask the same capacity refuses moves.
        env.reset(seed=0, options={"profile": "lulesh"})
        _, _, _, _, info = env.step(np.ones(8, dtype=np.int64))
        assert len(info["refused_regions"]) > 0


def test_an_env_pickles_as_its_constructor_call(server):
    env = tiergym.TierEnv(address=server, **CONFIG)
    try:
        copy = pickle.loads(pickle.dumps(env))
        try:
            assert copy.session != env.session and copy.endpoint == env.endpoint
            assert copy.observation_space == env.observation_space
            copy.reset(seed=1)
        finally:
            copy.close()
    finally:
        env.close()


# --- Addresses --------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_host_port_addresses_and_fast_failures():
    port = free_port()
    proc = subprocess.Popen([BINARY, "serve", "--endpoint", f"tcp://127.0.0.1:{port}",
                             "--quiet", "--parent-pid", str(os.getpid())],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout.readline().decode().startswith("listening on")
        with tiergym.TierEnv(address=f"localhost:{port}", **CONFIG) as env:
            assert env.endpoint == f"tcp://localhost:{port}"
            env.reset(seed=0)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    start = time.monotonic()
    with pytest.raises(tiergym.ServerUnavailable, match="connection refused"):
        tiergym.TierEnv(address=f"localhost:{free_port()}", **CONFIG)
    assert time.monotonic() - start < 5  # not the 60 s request timeout
    with pytest.raises(ValueError, match="tcp://HOST:PORT"):
        tiergym.TierEnv(address="localhost:http", **CONFIG)


# --- Vector environments ----------------------------------------------------------------------

def random_masked_steps(venv, steps, seed):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        yield venv.step(rng.integers(0, 2, venv.action_space.shape))


def test_make_vec_gives_the_batched_vector_env_on_one_server():
    venv = gymnasium.make_vec(ID, num_envs=3, **CONFIG)  # vector_entry_point is the default
    try:
        inner = venv.unwrapped
        assert isinstance(inner, tiergym.VectorEnv) and inner.num_envs == 3
        assert inner._server is not None and len(set(inner.sessions)) == 3
        obs, infos = venv.reset(seed=0)
        assert obs.shape == (3, inner.single_observation_space.shape[0])
    finally:
        venv.close()
    venv = gymnasium.make_vec(ID, num_envs=2, vectorization_mode="vector_entry_point", **CONFIG)
    venv.close()


def test_vector_spaces_and_info_dtypes_match_gymnasiums_batching(server):
    """The batched VectorEnv against Gymnasium's SyncVectorEnv over TierEnvs, on a small
    fast tier where sub-environments refuse different numbers of moves."""
    n = 3
    sync = gymnasium.vector.SyncVectorEnv(
        [lambda: gymnasium.make(ID, address=server, **SMALL_HBM) for _ in range(n)])
    ours = tiergym.VectorEnv(n, address=server, **SMALL_HBM)
    try:
        assert ours.action_space == sync.action_space == batch_space(ours.single_action_space, n)
        assert ours.observation_space == sync.observation_space
        o1, i1 = sync.reset(seed=5)
        o2, i2 = ours.reset(seed=5)
        assert np.array_equal(o1, o2)
        refused_counts = set()
        rng = np.random.default_rng(0)
        for _ in range(CONFIG["steps"] + 2):  # through an autoreset (next_step in both)
            actions = rng.integers(0, 2, (n, 8))
            r1, r2 = sync.step(actions), ours.step(actions)
            for a, b in zip(r1[:4], r2[:4]):
                assert np.array_equal(a, b) and a.dtype == b.dtype
            info1, info2 = r1[4], r2[4]
            assert set(info1) == set(info2)
            for key in info1:
                assert info1[key].dtype == info2[key].dtype, key
                assert info1[key].shape == info2[key].shape, key
                if info1[key].dtype != object:
                    assert np.array_equal(info1[key], info2[key]), key
                else:
                    assert list(info1[key]) == list(info2[key]), key
            refused_counts |= {len(r) for r in info2["refused_regions"]}
        assert len(refused_counts) > 1  # rows of different lengths were stacked
    finally:
        sync.close()
        ours.close()


def test_async_vector_env_and_a_sub_environment_error_then_close(server):
    """AsyncVectorEnv (fork) over TierEnvs on one server; an error in a sub-environment is
    raised, and close() returns at once afterwards."""
    venv = gymnasium.vector.AsyncVectorEnv(
        [lambda: gymnasium.make(ID, address=server, **SMALL_HBM) for _ in range(2)])
    try:
        venv.reset(seed=0)
        for _ in random_masked_steps(venv, 3, 0):
            pass
        bad = np.zeros((2, 8), dtype=np.int64)
        bad[1, 2] = 5
        with pytest.raises(Exception, match=r"action\[2\]"):
            venv.step(bad)
    finally:
        start = time.monotonic()
        venv.close()
        assert time.monotonic() - start < 30


def test_spawned_workers_make_the_env_by_id_without_importing_tiergym(tmp_path):
    out = run_python("""
        import gymnasium, numpy as np
        if __name__ == "__main__":
            fns = [lambda: gymnasium.make("tiergym/TierPlacement-v0", num_regions=8, steps=3)] * 2
            venv = gymnasium.vector.AsyncVectorEnv(fns, context="spawn")
            venv.reset(seed=0)
            for _ in range(4):
                obs, r, term, trunc, info = venv.step(np.ones((2, 8), dtype=np.int64))
            venv.close()
            print("ok", obs.shape)
        """, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "ok (2, 36)" in out.stdout


def test_same_step_final_info_masks_only_the_ended_sub_environments(server):
    venv = tiergym.VectorEnv(address=server, autoreset_mode="same_step", num_regions=8,
                             configs=[{"steps": 2}, {"steps": 3}])
    try:
        venv.reset(seed=0)
        ones = np.ones((2, 8), dtype=np.int64)
        venv.step(ones)
        _, _, term, _, infos = venv.step(ones)
        assert list(term) == [True, False]
        assert list(infos["_final_info"]) == [True, False]
        assert list(infos["_final_obs"]) == [True, False]
        assert list(infos["final_info"]["_step"]) == [True, False]
        assert infos["final_info"]["step"][0] == 2 and infos["final_obs"][1] is None
    finally:
        venv.close()


def test_reset_mask_resets_only_the_masked_sub_environments(server):
    with tiergym.VectorEnv(address=server, autoreset_mode="disabled", num_regions=8,
                           configs=[{"steps": 2}, {"steps": 4}]) as venv:
        assert venv.metadata["autoreset_mode"] == gymnasium.vector.AutoresetMode.DISABLED
        venv.reset(seed=0)
        ones = np.ones((2, 8), dtype=np.int64)
        venv.step(ones)
        obs, _, term, _, _ = venv.step(ones)
        assert list(term) == [True, False]
        with pytest.raises(tiergym.ServerError, match="episode ended"):
            venv.step(ones)  # disabled: an ended sub-environment needs a reset
        new, infos = venv.reset(seed=3, options={"reset_mask": np.array([True, False])})
        assert np.array_equal(new[1], obs[1]) and not np.array_equal(new[0], obs[0])
        assert list(infos["_step"]) == [True, False] and infos["step"][0] == 0
        _, _, _, _, infos = venv.step(ones)
        assert list(infos["step"]) == [1, 3]


def test_each_sub_environment_may_have_its_own_configuration(server):
    with tiergym.VectorEnv(address=server, num_regions=8, steps=4,
                           configs=[{"profiles": "minife"}, {"profiles": "lulesh"},
                                    {"profiles": "lulesh", "tier_capacity_mib": "hbm:256"}]) as v:
        _, infos = v.reset(seed=0)
        assert list(infos["profile"]) == ["minife", "lulesh", "lulesh"]
        assert v.tier_specs[2]["tier_capacity_bytes"][1] == 256 << 20
    venv = gymnasium.make_vec(ID, num_envs=2, address=server, steps=4,
                              configs=[{"num_regions": 8}, {"num_regions": 8}])
    venv.close()
    with pytest.raises(ValueError, match=r"configs\[1\].*share their spaces"):
        tiergym.VectorEnv(address=server, configs=[{"num_regions": 8}, {"num_regions": 16}])
    # The same through Gymnasium's own vector envs: a list of kwargs, one env each.
    kwargs = [dict(CONFIG, profiles="minife"), dict(CONFIG, profiles="nekbone")]
    sync = gymnasium.vector.SyncVectorEnv(
        [lambda k=k: gymnasium.make(ID, address=server, **k) for k in kwargs])
    try:
        assert list(sync.reset(seed=0)[1]["profile"]) == ["minife", "nekbone"]
    finally:
        sync.close()


def test_the_mask_can_ride_in_a_dict_observation(server):
    from tiergym.wrappers import ActionMaskObservation
    env = ActionMaskObservation(gymnasium.make(ID, address=server, **SMALL_HBM))
    try:
        check_env(env, skip_render_check=True)  # the wrapper's Dict space
        obs, info = env.reset(seed=0, options={"profile": "lulesh"})
        assert obs in env.observation_space
        assert np.array_equal(obs["action_mask"], info["action_mask"].reshape(-1))
        mask = obs["action_mask"].reshape(8, 2)
        obs, _, _, _, info = env.step(env.action_space.sample(mask=tuple(mask)))
        assert obs in env.observation_space and info["refused_regions"] == ()
    finally:
        env.close()


# --- The default task ----------------------------------------------------------------------

def test_the_default_task_id_and_its_keep_mode_and_masks(server):
    import _tiergym_gymnasium
    assert _tiergym_gymnasium.DEFAULT_TASK_ID == tiergym.DEFAULT_TASK_ID
    assert _tiergym_gymnasium.DEFAULT_TASK == tiergym.DEFAULT_TASK
    env = gymnasium.make(tiergym.DEFAULT_TASK_ID, address=server, num_regions=8, steps=6)
    try:
        check_env(env.unwrapped, skip_render_check=True)
        assert env.unwrapped.config["action_mode"] == "keep"
        assert env.unwrapped.config["tier_capacity_mib"] == "hbm:512"
        assert env.action_space == gymnasium.spaces.MultiDiscrete([3] * 8)  # keep, ddr, hbm
        assert env.observation_space.shape == (8 * 7 + 4,)
        obs, info = env.reset(seed=0, options={"profile": "lammps"})
        assert info["action_mask"].shape == (8, 3) and info["action_mask"][:, 0].all()
        # Keeping everything moves nothing; masked random actions always fit.
        obs, _, _, _, info = env.step(np.zeros(8, dtype=np.int64))
        assert info["migrated_bytes"] == 0
        for _ in range(4):
            obs, _, _, _, info = env.step(env.action_space.sample(mask=tuple(info["action_mask"])))
            assert info["refused_regions"] == ()
        assert env.unwrapped.action_masks().shape == (8 * 3,)
    finally:
        env.close()
    with tiergym.make(tiergym.DEFAULT_TASK_ID, address=server, num_regions=8, steps=6,
                      action_mode="move") as env:  # keyword arguments override the task's
        assert isinstance(env.action_space, gymnasium.spaces.Discrete)
    from tiergym.wrappers import ActionMaskObservation
    wrapped = ActionMaskObservation(gymnasium.make(tiergym.DEFAULT_TASK_ID, address=server,
                                                   num_regions=8, steps=6))
    try:
        obs, info = wrapped.reset(seed=1)
        assert obs["action_mask"].shape == (8 * 3,) and obs in wrapped.observation_space
    finally:
        wrapped.close()
    envs = gymnasium.make_vec(tiergym.DEFAULT_TASK_ID, num_envs=2, address=server,
                              num_regions=8, steps=6)
    try:
        assert isinstance(envs, tiergym.VectorEnv)
        envs.reset(seed=0)
        assert envs.action_masks().shape == (2, 8 * 3)
    finally:
        envs.close()


def test_the_unversioned_id_is_the_default_task_and_v0_keeps_the_servers_defaults(server):
    import warnings
    import _tiergym_gymnasium
    assert _tiergym_gymnasium.V0_TASK == tiergym.V0_TASK
    # Gymnasium resolves an id without a version to the highest registered one (it warns).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = gymnasium.make(tiergym.TASK_NAME, address=server, num_regions=8, steps=6)
    try:
        assert env.spec.id == tiergym.DEFAULT_TASK_ID
        assert env.unwrapped.config["action_mode"] == "keep"
        assert env.unwrapped.config["tier_capacity_mib"] == "hbm:512"
    finally:
        env.close()
    with tiergym.make(tiergym.TASK_NAME, address=server, num_regions=8, steps=6) as env:
        assert env.config["observation"] == "normalized"
    # v0 spells out the server's defaults: if one of them changes, v0 must not move with it.
    defaults = {name: default for name, default, _ in tiergym.config_keys(server)}
    for key, value in tiergym.V0_TASK.items():
        assert defaults[key] == str(value), key
    assert defaults["tier_capacity_mib"] == ""  # v0: all of knl's HBM
    assert gymnasium.spec(tiergym.ENV_ID).kwargs == tiergym.V0_TASK
    with gymnasium.make(tiergym.ENV_ID, address=server, steps=6) as env:
        assert env.action_space == gymnasium.spaces.MultiDiscrete([2] * 64)


# --- Gymnasium's enums where strings are taken; objects whose construction failed -----------

@pytest.mark.parametrize("inprocess", [False, True])
@pytest.mark.parametrize("name, member", [
    ("next_step", gymnasium.vector.AutoresetMode.NEXT_STEP),
    ("same_step", gymnasium.vector.AutoresetMode.SAME_STEP),
    ("disabled", gymnasium.vector.AutoresetMode.DISABLED)])
def test_the_autoreset_mode_is_taken_as_a_name_an_enum_or_the_enums_value(server, inprocess,
                                                                           name, member):
    where = {"inprocess": True} if inprocess else {"address": server}
    made = [tiergym.make_vec(tiergym.ENV_ID, 2, autoreset_mode=mode, num_regions=8,
                             configs=[{"steps": 2}, {"steps": 3}], **where)
            for mode in (name, member, member.value)]
    try:
        ones = np.ones((2, 8), dtype=np.int64)
        runs = []
        for venv in made:
            # As Gymnasium's own vector environments: the attribute is the enum member.
            assert venv.autoreset_mode is member and venv.metadata["autoreset_mode"] is member
            obs, _ = venv.reset(seed=0)
            steps = [obs.copy()]
            for _ in range(2):  # the first sub-environment ends at the second step
                obs, rewards, term, trunc, infos = venv.step(ones)
                steps += [obs.copy(), rewards.copy(), term.copy(),
                          infos.get("_final_obs", np.zeros(2, bool)).copy()]
            runs.append(steps)
        for other in runs[1:]:
            assert all(np.array_equal(a, b) for a, b in zip(runs[0], other))
    finally:
        for venv in made:
            venv.close()


def test_an_unknown_autoreset_mode_names_the_choices():
    with pytest.raises(ValueError, match=r"autoreset_mode must be one of \['disabled', "
                                         r"'next_step', 'same_step'\] or a gymnasium"):
        tiergym.make_vec(tiergym.ENV_ID, 2, inprocess=True, autoreset_mode="SameSteps")


def test_the_sb3_vec_env_takes_a_vector_env_made_with_the_enum(server):
    from tiergym.sb3 import TierVecEnv
    venv = tiergym.VectorEnv(2, address=server, num_regions=8, steps=3,
                             autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP)
    vec = TierVecEnv(venv)
    try:
        assert vec.reset().shape == (2, venv.single_observation_space.shape[0])
    finally:
        vec.close()


@pytest.mark.parametrize("make", [
    'tiergym.VectorEnv(2, autoreset_mode="bogus")',
    'tiergym.make_vec(tiergym.ENV_ID, 2, inprocess=True, autoreset_mode="bogus")',
    'tiergym.VectorEnv(2, num_regions=8, bogus_key=1)',  # refused by the server
    'tiergym.make_vec(tiergym.ENV_ID, 2, inprocess=True, num_regions=8, bogus_key=1)',  # core
    'tiergym.VectorEnv(0)',
    'tiergym.TierEnv(num_regions=8, bogus_key=1)',
    'tiergym.TierEnv(render_mode="human")',
], ids=["zmq-mode", "inprocess-mode", "zmq-key", "inprocess-key", "no-envs", "env-key",
        "render-mode"])
def test_an_object_whose_construction_failed_closes_quietly(make):
    # What the garbage collector runs on the half-made object (Gymnasium's VectorEnv.__del__
    # closes it) must raise nothing: "Exception ignored in __del__" on stderr is a failure.
    out = run_python(f"""
        import gc, tiergym
        try:
            {make}
        except (TypeError, ValueError, tiergym.TierGymError) as e:
            print("refused:", type(e).__name__)
        gc.collect()
        print("collected")
        """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("refused:") and out.stdout.endswith("collected\n")
    assert out.stderr == "", out.stderr


def test_an_unknown_configuration_key_is_a_type_error_and_a_server_error(server):
    # The TypeError Python raises for an unexpected keyword argument, which libraries
    # probing a constructor catch (TorchRL's GymEnv retries without `frameskip`).
    with pytest.raises(TypeError, match="unexpected keyword argument 'frameskip'") as e:
        tiergym.TierEnv(address=server, frameskip=4)
    assert isinstance(e.value, tiergym.ServerError) and e.value.field == "config.frameskip"
    assert "unknown configuration key (known: profiles" in str(e.value)
    again = pickle.loads(pickle.dumps(e.value))  # across processes (AsyncVectorEnv, Ray)
    assert type(again) is type(e.value) and str(again) == str(e.value)
    with pytest.raises(TypeError, match="unexpected keyword argument 'frameskip'.* was raised"):
        gymnasium.make("tiergym/TierPlacement-v1", address=server, frameskip=4)
