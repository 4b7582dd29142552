"""Learners that outlive their server (reconnect=True): the server is killed (SIGKILL) in
the middle of episodes; the step that meets the loss is truncated with info["interrupted"],
the sessions are made again (on a private server started again, or on a new server at the
same address), the episodes go on, and nothing hangs. Single environments, the vector
environment in its three autoreset modes (and its shared-memory path: the dead server's
segment is unmapped, no file of it is left) and a co-scheduling node (Stable-Baselines3's
PPO through the loss: test_sb3.py; RLlib's: test_rllib.py). Without reconnect, or when no
server comes back, the error says so. The servers serve one small profile, so that they
start in a fraction of a second."""

import os
import signal
import threading
import time

import numpy as np
import pytest

import tiergym
from tiergym import cosched
from tiergym_testing import BINARY, SKIP_REASON, needs_binary, small_profile

pytestmark = needs_binary

CONFIG = {"num_regions": 8, "steps": 6}


@pytest.fixture(scope="module")
def args(tmp_path_factory):
    """`tiergym serve` arguments: one small profile, two threads."""
    if BINARY is None:
        pytest.skip(SKIP_REASON)
    profile = small_profile(tmp_path_factory.mktemp("reconnect"))
    return ["--profiles", str(profile), "--threads", "2", "--quiet"]


def kill(server):
    """SIGKILL the private server's process and wait for it to be gone."""
    pid = server.process.pid
    os.kill(pid, signal.SIGKILL)
    server.process.wait(timeout=30)
    return pid


def zeros(env):
    return np.zeros(env.action_space.shape, dtype=np.int64)


def test_a_single_env_carries_on_through_the_death_of_its_private_server(args):
    env = tiergym.make(reconnect=True, server_args=args, **CONFIG)
    try:
        obs, info = env.reset(seed=3)
        obs, *_ = env.step(zeros(env))
        endpoint = env.endpoint
        dead = kill(env._server)
        start = time.monotonic()
        cut, reward, terminated, truncated, info = env.step(zeros(env))
        assert time.monotonic() - start < 30
        assert truncated and not terminated and reward == 0.0
        assert np.array_equal(cut, obs)  # the last observation seen
        assert f"pid {dead}" in info["interrupted"] and "exited" in info["interrupted"]
        assert env.interrupted_episodes == 1
        assert env._server.restarts == 1 and env._server.alive()
        assert env.endpoint == endpoint  # started again at the same endpoint
        # An ordinary episode on the new server, the same handle.
        again, _ = env.reset(seed=3)
        steps = 0
        while True:
            _, _, terminated, truncated, info = env.step(zeros(env))
            steps += 1
            assert "interrupted" not in info
            if terminated or truncated:
                break
        assert steps == CONFIG["steps"] and not truncated
    finally:
        env.close()


def test_a_new_server_at_the_same_address_is_waited_for(args):
    server = tiergym.Server(args=args)  # owned here, not by the environment
    env = tiergym.make(address=server.endpoint, reconnect={"give_up_after_s": 30,
                                                           "max_backoff_s": 0.2}, **CONFIG)
    try:
        env.reset(seed=1)
        kill(server)
        later = threading.Timer(1.0, server.ensure_running)  # a new one a second later
        later.start()
        start = time.monotonic()
        _, _, _, truncated, info = env.step(zeros(env))
        later.join()
        assert truncated and "went away" in info["interrupted"]
        assert 0.9 < time.monotonic() - start < 30
        env.reset(seed=1)
        _, _, _, truncated, _ = env.step(zeros(env))
        assert not truncated
        stats = env._connection.call("stats")
        assert stats["sessions"] == 1  # made again, not twice
    finally:
        env.close()
        server.close()


def test_without_reconnect_or_when_no_server_comes_back_the_error_says_so(args):
    server = tiergym.Server(args=args)
    plain = tiergym.make(address=server.endpoint, timeout=120, **CONFIG)
    hopeful = tiergym.make(address=server.endpoint, reconnect={"give_up_after_s": 1}, **CONFIG)
    try:
        plain.reset(seed=0)
        hopeful.reset(seed=0)
        kill(server)
        start = time.monotonic()
        with pytest.raises(tiergym.ServerUnavailable) as e:
            plain.step(zeros(plain))
        assert "went away" in str(e.value) and "reconnect=True" in str(e.value)
        with pytest.raises(tiergym.ServerUnavailable) as e:
            hopeful.step(zeros(hopeful))
        assert "no tiergym server came back within 1.0 s" in str(e.value)
        assert time.monotonic() - start < 30  # neither waited for its request timeout
    finally:
        plain.close()
        hopeful.close()
        server.close()


def shm_files(pid):
    return [n for n in os.listdir("/dev/shm") if n.startswith(f"tiergym-{pid}-")]


def mapped_segments(pid):
    with open("/proc/self/maps") as f:
        return [line for line in f if f"/tiergym-{pid}-" in line]


@pytest.mark.parametrize("mode", ["same_step", "next_step", "disabled"])
def test_the_vector_env_through_shared_memory_carries_on(mode, args):
    n = 3
    envs = tiergym.VectorEnv(n, autoreset_mode=mode, shm=True, reconnect=True,
                             server_args=args, **CONFIG)
    try:
        obs, _ = envs.reset(seed=11)
        for _ in range(2):
            obs, *_ = envs.step(envs.action_space.sample())
        assert envs.shm and mapped_segments(envs._server.process.pid)
        dead = kill(envs._server)
        cut, rewards, terminations, truncations, infos = envs.step(envs.action_space.sample())
        assert truncations.all() and not terminations.any() and not rewards.any()
        assert all("exited" in r for r in infos["interrupted"]) and infos["_interrupted"].all()
        assert envs.interrupted_episodes == n
        if mode == "same_step":
            assert all(np.array_equal(infos["final_obs"][i], obs[i]) for i in range(n))
            assert infos["final_info"]["_interrupted"].all()
            assert not np.array_equal(cut, obs)  # the new episodes' first observations
        else:
            assert np.array_equal(cut, obs)
        if mode == "disabled":
            envs.reset()
        elif mode == "next_step":
            first, rewards, terminations, truncations, _ = envs.step(envs.action_space.sample())
            assert not (terminations | truncations).any() and not rewards.any()
        # Episodes go on to their end on the new server, through a new segment.
        for _ in range(CONFIG["steps"]):
            _, _, terminations, truncations, infos = envs.step(envs.action_space.sample())
            assert "interrupted" not in infos
        assert envs.shm
        # The dead server's segment is unmapped here, and no file of it is left.
        assert not mapped_segments(dead) and not shm_files(dead)
    finally:
        envs.close()


def test_a_cosched_node_carries_on(args):
    env = cosched.SchedulerEnv("knl-2", address="private", reconnect=True, server_args=args,
                               tenants=["minife", "minife"], num_regions=4, steps=4)
    try:
        env.reset(seed=0)
        env.step(env.action_space.sample())
        kill(env.node.core._server)
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert truncated and not terminated and reward == 0.0 and "exited" in info["interrupted"]
        env.reset(seed=0)
        _, _, _, truncated, info = env.step(env.action_space.sample())
        assert not truncated and "interrupted" not in info
    finally:
        env.close()
