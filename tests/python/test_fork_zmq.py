"""Forking over ZeroMQ (the `fork` op, env/PROTOCOL.md): TierEnv.fork and VectorEnv.fork
against a real `tiergym serve`. A fork continues bit for bit as its original under the same
actions (across episode ends and unseeded resets, forks of forks, before the first reset),
through shared memory or the replies; what a fork does never reaches the original; forks
count against the server's session limits (refusals leave nothing behind); the
connection and a private server stay up until the original and every fork are closed; with
reconnect, a fork is made again after a server's death as its original is.
Skipped (with the reason) when the tiergym binary is not built."""

import os
import signal

import gymnasium
import numpy as np
import pytest

from test_fork import (CONFIG, check_a_chain_of_forks, check_a_vector_fork,
                       random_actions)
from tiergym_testing import needs_binary, server_fixture, small_profile

import tiergym
from tiergym.connection import Connection
from tiergym.errors import ServerError

LIMIT = 24  # sessions per connection on the module's server

server = server_fixture("--threads", "2", "--max-sessions-per-connection", str(LIMIT))


def sessions_open(server):
    c = Connection(server.endpoint)
    try:
        return c.call("stats")["sessions"]
    finally:
        c.close()


def assert_same_infos(a, b, where):
    assert a.keys() == b.keys(), where
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=f"{where}: info {key}")


@needs_binary
def test_a_tier_env_fork_continues_bit_for_bit_also_across_unseeded_resets(server):
    env = tiergym.make(address=server, **CONFIG)
    rng = np.random.default_rng(0)
    forks = []
    try:
        env.reset()  # unseeded: the seed drawn from entropy, the generator then forked
        for _ in range(3):
            env.step(random_actions(rng, 1)[0])
        forks.append(env.fork())
        forks.append(forks[0].fork())  # a fork of a fork
        np.testing.assert_array_equal(forks[1].action_masks(), env.action_masks())
        for t in range(30):  # past several episode ends
            action = random_actions(rng, 1)[0]
            mine = env.step(action)
            for k, f in enumerate(forks):
                theirs = f.step(action)
                assert mine[1:4] == theirs[1:4], f"fork {k}, step {t}"
                np.testing.assert_array_equal(mine[0], theirs[0], err_msg=f"fork {k}, step {t}")
                assert_same_infos(mine[4], theirs[4], f"fork {k}, step {t}")
            if mine[2] or mine[3]:  # the next episode from the forked generators
                obs, info = env.reset()
                for k, f in enumerate(forks):
                    o, i = f.reset()
                    np.testing.assert_array_equal(obs, o, err_msg=f"fork {k}, reset at {t}")
                    assert info["profile"] == i["profile"]
    finally:
        for f in forks:
            f.close()
        env.close()


@needs_binary
def test_a_fork_before_the_first_reset_draws_the_same_first_seed(server):
    env = tiergym.make(address=server, **CONFIG)
    try:
        with env.fork() as fork:
            obs, info = env.reset()
            o, i = fork.reset()
            np.testing.assert_array_equal(obs, o)
            assert info["profile"] == i["profile"]
    finally:
        env.close()


@needs_binary
def test_what_a_tier_env_fork_does_never_reaches_the_original(server):
    env, reference = tiergym.make(address=server, **CONFIG), tiergym.make(address=server, **CONFIG)
    rng = np.random.default_rng(1)
    try:
        env.reset(seed=3)
        reference.reset(seed=3)
        for _ in range(3):
            action = random_actions(rng, 1)[0]
            env.step(action)
            reference.step(action)
        with env.fork() as fork:
            done = False
            while not done:  # to the episode's end, all to the fast tier
                done = fork.step(np.full(CONFIG["num_regions"], 2))[2]
            fork.reset(seed=77)
            fork.step(np.full(CONFIG["num_regions"], 2))
        for t in range(10):
            action = random_actions(rng, 1)[0]
            a, b = env.step(action), reference.step(action)
            np.testing.assert_array_equal(a[0], b[0], err_msg=f"step {t}")
            assert a[1:4] == b[1:4], f"step {t}"
            if a[2] or a[3]:
                env.reset(seed=t)
                reference.reset(seed=t)
    finally:
        env.close()
        reference.close()


@needs_binary
@pytest.mark.parametrize("mode,shm", [("next_step", None), ("same_step", None),
                                      ("disabled", None), ("next_step", False)])
def test_a_vector_fork_continues_bit_for_bit_as_its_original(server, mode, shm):
    envs = tiergym.make_vec(tiergym.DEFAULT_TASK_ID, 3, address=server, autoreset_mode=mode,
                            shm=shm, **CONFIG)

    def check_forks(forks):
        assert len(set(forks.sessions) | set(envs.sessions)) == 6  # new sessions, each its own
        assert forks.shm == envs.shm == (shm is None)  # shared memory when the server is local

    try:
        check_a_vector_fork(envs, mode, np.random.default_rng(2), check_forks)
    finally:
        envs.close()


@needs_binary
def test_many_vector_forks_fall_back_to_replies_when_the_segments_are_taken(server):
    # 16 shared-memory segments per connection (the server's default): the original's and
    # 15 forks' take them, the later forks get their results in the replies.
    envs = tiergym.make_vec(tiergym.DEFAULT_TASK_ID, 1, address=server, **CONFIG)
    try:
        envs.reset(seed=9)
        assert envs.shm
        chain = check_a_chain_of_forks(envs, np.random.default_rng(3), 18)
        assert [f.shm for f in chain] == [True] * 15 + [False] * 3
        for f in chain:
            f.close()
    finally:
        envs.close()


@needs_binary
def test_forks_count_against_the_session_limits_and_refusals_leave_nothing(server):
    before = sessions_open(server)
    envs = tiergym.make_vec(tiergym.DEFAULT_TASK_ID, 4, address=server, **CONFIG)
    try:
        envs.reset(seed=0)
        forks = [envs.fork() for _ in range((LIMIT - 4) // 4)]  # the connection's limit
        assert sessions_open(server) == before + LIMIT
        with pytest.raises(ServerError, match="fork refused: this connection has") as e:
            envs.fork([0, 1])
        assert e.value.code == "RESOURCE_EXHAUSTED" and e.value.field == "op"
        assert sessions_open(server) == before + LIMIT  # nothing left behind
        forks.pop().close()
        with pytest.raises(ServerError, match="fork refused"):
            envs.fork([0, 1, 2, 3, 0])  # four fit, the fifth does not: the four closed again
        assert sessions_open(server) == before + LIMIT - 4
        with envs.fork([3, 3, 3, 3]) as again:  # room for four again
            again.step(random_actions(np.random.default_rng(4), 4))
        for f in forks:
            f.close()
    finally:
        envs.close()
    assert sessions_open(server) == before


@needs_binary
def test_fork_refuses_what_it_cannot_copy(server):
    with tiergym.make_vec(tiergym.DEFAULT_TASK_ID, 2, address=server, **CONFIG) as envs:
        with pytest.raises(gymnasium.error.ResetNeeded, match=r"fork\(\) before the first reset"):
            envs.fork()
        envs.reset(seed=0)
        with pytest.raises(ValueError, match=r"env_ids\[1\]: 5 is not an environment \(0..1\)"):
            envs.fork([0, 5])
        with pytest.raises(ValueError, match="at least one environment"):
            envs.fork([])
    env = tiergym.make(address=server, **CONFIG)
    env.close()
    with pytest.raises(gymnasium.error.ClosedEnvironmentError, match="closed"):
        env.fork()


@needs_binary
def test_a_private_server_stays_up_until_the_original_and_its_forks_are_closed():
    env = tiergym.make(**CONFIG)
    private = env._server
    env.reset(seed=1)
    fork = env.fork()
    envs = tiergym.make_vec(tiergym.DEFAULT_TASK_ID, 2, **CONFIG)
    vprivate = envs._server
    envs.reset(seed=1)
    vfork = envs.fork(1)
    try:
        env.close()
        assert private.alive()
        fork.step(np.zeros(CONFIG["num_regions"], dtype=np.int64))  # its session still served
        envs.close()
        assert vprivate.alive()
        vfork.step(np.zeros((1, CONFIG["num_regions"]), dtype=np.int64))
    finally:
        fork.close()
        vfork.close()
    assert not private.alive() and not vprivate.alive()


@needs_binary
def test_with_reconnect_a_fork_is_made_again_as_its_original_is(tmp_path):
    # The server dies (SIGKILL) under an environment and its fork: the fork's step meets the
    # loss (truncated, info["interrupted"]), the private server starts again, and both
    # sessions are made again there (new episodes: the forked state went with the server).
    args = ["--profiles", str(small_profile(tmp_path)), "--threads", "2", "--quiet"]
    env = tiergym.make(reconnect=True, server_args=args, num_regions=8, steps=6)
    private = env._server
    zeros = np.zeros(8, dtype=np.int64)
    fork = None
    try:
        env.reset(seed=3)
        env.step(zeros)
        fork = env.fork()
        os.kill(private.process.pid, signal.SIGKILL)
        private.process.wait(timeout=30)
        _, reward, terminated, truncated, info = fork.step(zeros)
        assert truncated and not terminated and reward == 0.0 and "interrupted" in info
        assert private.restarts == 1
        assert fork.interrupted_episodes == 1 and env.interrupted_episodes == 0
        a, b = env.reset(seed=4), fork.reset(seed=4)
        np.testing.assert_array_equal(a[0], b[0])
        for t in range(6):
            x, y = env.step(zeros), fork.step(zeros)
            assert x[1:4] == y[1:4] and "interrupted" not in y[4], f"step {t}"
    finally:
        if fork is not None:
            fork.close()
        env.close()
    assert not private.alive()  # stopped once both are closed
