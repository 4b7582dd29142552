"""tiergym with Stable-Baselines3 and sb3-contrib (installed from PyPI by the test command):
SB3's env checker, PPO on SubprocVecEnv workers that train, save, load and evaluate, the
batched TierVecEnv adapter, and MaskablePPO with tiergym's action masks. Tiny budgets (a
few hundred steps of 8-region episodes): this checks that the pieces fit, not learning.
Every worker process and server is gone afterwards."""

import os
import time

import gymnasium
import numpy as np
import pytest
import torch
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.evaluation import evaluate_policy as evaluate_masked
from stable_baselines3 import PPO
from stable_baselines3.common.env_checker import check_env
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import SubprocVecEnv

import tiergym
from tiergym.sb3 import TierVecEnv
from tiergym_testing import command_line, needs_binary, server_fixture

pytestmark = needs_binary
ID = tiergym.ENV_ID
CONFIG = {"num_regions": 8, "steps": 8}
SMALL_HBM = dict(CONFIG, tier_capacity_mib="hbm:256")
PPO_ARGS = dict(n_steps=16, batch_size=16, n_epochs=1, seed=0, device="cpu")


@pytest.fixture(scope="module", autouse=True)
def one_thread_and_logs_in_tmp(tmp_path_factory):
    """One torch thread (2 cores, workers beside); SB3's logs in pytest's temporary
    directory (by default each model.learn leaves a /tmp/SB3-DATE folder)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    logdir = os.environ.get("SB3_LOGDIR")
    os.environ["SB3_LOGDIR"] = str(tmp_path_factory.mktemp("sb3-logs"))
    yield
    torch.set_num_threads(threads)
    if logdir is None:
        os.environ.pop("SB3_LOGDIR", None)
    else:
        os.environ["SB3_LOGDIR"] = logdir


server = server_fixture("--threads", "2", "--quiet")


def descendants():
    """Pids of this process's descendants, but multiprocessing's own helpers (forkserver,
    resource tracker), which live as long as this process."""
    parent = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out, frontier = [], [os.getpid()]
    while frontier:
        p = frontier.pop()
        for child, ppid in parent.items():
            if ppid == p:
                out.append(child)
                frontier.append(child)
    return [p for p in out if "multiprocessing" not in command_line(p)
            and command_line(p) != "(gone)"]


def assert_no_new_processes(before, seconds=20):
    deadline = time.monotonic() + seconds
    while True:
        left = set(descendants()) - set(before)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not left, [command_line(p) for p in left]


def test_sb3_env_checker_passes(server):
    for mode in ("placement", "move"):
        env = gymnasium.make(ID, address=server, action_mode=mode, **CONFIG)
        try:
            check_env(env, warn=True)
        finally:
            env.close()


def test_ppo_on_subproc_workers_trains_saves_loads_and_evaluates(server, tmp_path):
    before = descendants()
    # Workers started by forkserver make the environment by its id (registered in every
    # process) on their own private servers.
    venv = make_vec_env(ID, n_envs=2, vec_env_cls=SubprocVecEnv, seed=0, env_kwargs=CONFIG)
    try:
        model = PPO("MlpPolicy", venv, **PPO_ARGS)
        start = [p.detach().clone() for p in model.policy.parameters()]
        model.learn(total_timesteps=64)
        assert any(not torch.equal(a, b) for a, b in zip(start, model.policy.parameters()))
        path = tmp_path / "ppo_tiergym.zip"
        model.save(path)
    finally:
        venv.close()
    loaded = PPO.load(path, device="cpu")
    with gymnasium.make(ID, address=server, **CONFIG) as env:
        obs, _ = env.reset(seed=4)
        a1, _ = model.predict(obs, deterministic=True)
        a2, _ = loaded.predict(obs, deterministic=True)
        assert np.array_equal(a1, a2) and a1 in env.action_space
        mean, std = evaluate_policy(loaded, env, n_eval_episodes=2, deterministic=True)
        assert np.isfinite(mean) and -1 < mean < 1  # a fractional speedup
    assert_no_new_processes(before)


def test_batched_tier_vec_env_runs_ppo_and_reports_terminal_observations(server):
    venv = TierVecEnv(3, address=server, **CONFIG)
    try:
        obs = venv.reset()
        assert obs.shape == (3, venv.observation_space.shape[0])
        ended = []
        for _ in range(CONFIG["steps"]):
            obs, rewards, dones, infos = venv.step(np.ones((3, 8), dtype=np.int64))
            ended += [i for i, info in enumerate(infos) if "terminal_observation" in info]
            assert rewards.dtype == np.float32 and len(infos) == 3
        assert sorted(ended) == [0, 1, 2] and dones.all()
        assert infos[0]["step"] == CONFIG["steps"] and venv.reset_infos[0]["step"] == 0
        assert infos[0]["TimeLimit.truncated"] is False
        model = PPO("MlpPolicy", venv, **PPO_ARGS).learn(total_timesteps=48)
        mean, _ = evaluate_policy(model, venv, n_eval_episodes=3)
        assert np.isfinite(mean)
    finally:
        venv.close()


def test_maskable_ppo_uses_the_masks_and_masked_actions_always_fit(server):
    venv = TierVecEnv(2, address=server, **SMALL_HBM)
    try:
        model = MaskablePPO("MlpPolicy", venv, **PPO_ARGS)
        model.learn(total_timesteps=32)
        obs = venv.reset()
        refused = 0
        for _ in range(SMALL_HBM["steps"] * 2):
            masks = venv.env_method("action_masks")
            assert np.stack(masks).shape == (2, 8 * 2)
            actions, _ = model.predict(obs, action_masks=np.stack(masks))
            obs, _, _, infos = venv.step(actions)
            refused += sum(len(i["refused_regions"]) for i in infos)
        assert refused == 0
        mean, _ = evaluate_masked(model, venv, n_eval_episodes=2)
        assert np.isfinite(mean)
    finally:
        venv.close()
    # The single environment: MaskablePPO finds env.action_masks() through the wrappers.
    env = gymnasium.make(ID, address=server, **SMALL_HBM)
    try:
        MaskablePPO("MlpPolicy", env, **PPO_ARGS).learn(total_timesteps=16)
    finally:
        env.close()


def test_ppo_trains_through_a_sigkill_of_its_server(tmp_path):
    """reconnect=True: PPO on TierVecEnv keeps training when its private server is killed
    (SIGKILL) mid-rollout: the cut episodes end truncated with info["interrupted"] (one per
    sub-environment), the server is started again, and learn() reaches its budget."""
    import signal

    from stable_baselines3.common.callbacks import BaseCallback

    from tiergym_testing import small_profile

    args = ["--profiles", str(small_profile(tmp_path)), "--threads", "2", "--quiet"]
    venv = TierVecEnv(4, reconnect=True, server_args=args, **CONFIG)

    class KillOnceAndCount(BaseCallback):
        killed, interrupted = None, 0

        def _on_step(self):
            if self.num_timesteps >= 48 and self.killed is None:
                server = venv.venv._server
                self.killed = server.process.pid
                os.kill(self.killed, signal.SIGKILL)
                server.process.wait(timeout=30)
            self.interrupted += sum("interrupted" in info for info in self.locals["infos"])
            return True

    try:
        counter = KillOnceAndCount()
        start = time.monotonic()
        model = PPO("MlpPolicy", venv, **dict(PPO_ARGS, n_steps=32, batch_size=32))
        model.learn(total_timesteps=256, callback=counter)
        assert model.num_timesteps >= 256 and counter.killed is not None
        assert counter.interrupted == 4 == venv.venv.interrupted_episodes
        assert venv.venv._server.restarts == 1 and venv.venv._server.alive()
        assert time.monotonic() - start < 60
    finally:
        venv.close()
