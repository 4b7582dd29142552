"""Forking episodes in process (InProcessVectorEnv.fork, the C++ Environment::Fork under it):
a fork starts at its original's state (observations, masks) and, under the same actions,
continues bit for bit as the original does, in every autoreset mode and across episode
ends, also after many forks (forks of forks); what a fork does never reaches the original;
errors name what to fix; and the lookahead search of agents_examples/lookahead.py, whose
real episode gets exactly its forks' rewards."""

import re

import numpy as np
import pytest

import tiergym
from tiergym.inprocess import have_core

pytestmark = pytest.mark.skipif(not have_core(), reason="the extension tiergym._core is not built")
CONFIG = dict(tiergym.DEFAULT_TASK, steps=7, num_regions=8, tier_capacity_mib="hbm:128")


def make(n, mode="same_step"):
    return tiergym.make_vec(tiergym.DEFAULT_TASK_ID, n, inprocess=True, copy=True,
                            autoreset_mode=mode, **CONFIG)


def random_actions(rng, rows):
    return rng.integers(0, 3, size=(rows, CONFIG["num_regions"]))


def assert_same(a, b, where):
    for x, y, name in zip(a, b, ("obs", "rewards", "terminations", "truncations")):
        np.testing.assert_array_equal(x, y, err_msg=f"{where}: {name}")


def check_a_vector_fork(envs, mode, rng, check_forks=None):
    """Forks sub-environments [2, 0, 2] of three-environment `envs` after 4 steps and checks
    20 steps of the forks against their originals (past the ends of the 7-step episodes;
    resets alike in the `disabled` mode); then check_forks(forks), before they are closed."""
    envs.reset(seed=5)
    for _ in range(4):
        envs.step(random_actions(rng, 3))
    ids = [2, 0, 2]
    with envs.fork(ids) as forks:
        assert forks.num_envs == 3 and forks.autoreset_mode is envs.autoreset_mode
        np.testing.assert_array_equal(forks.action_masks(), envs.action_masks()[ids])
        for t in range(20):
            actions = random_actions(rng, 3)
            original = envs.step(actions)
            forked = forks.step(actions[ids])
            assert_same([x[ids] for x in original[:4]], forked[:4], f"step {t}")
            np.testing.assert_array_equal(forked[4]["step"], original[4]["step"][ids])
            np.testing.assert_array_equal(forks.action_masks(), envs.action_masks()[ids])
            if mode == "disabled":
                ended = original[2] | original[3]
                if ended.any():
                    seeds = [int(s) for s in rng.integers(0, 99, 3)]
                    envs.reset(seed=seeds, options={"reset_mask": ended})
                    forks.reset(seed=[seeds[i] for i in ids], options={"reset_mask": ended[ids]})
        if check_forks is not None:
            check_forks(forks)


@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
def test_a_fork_continues_bit_for_bit_as_its_original(mode):
    envs = make(3, mode)
    try:
        check_a_vector_fork(envs, mode, np.random.default_rng(0))
    finally:
        envs.close()


def check_a_chain_of_forks(envs, rng, length):
    """Forks the last fork of one-environment `envs` after each of `length` steps, all
    stepped alike, then checks 10 more steps of every fork against the original. The forks,
    which the caller closes."""
    chain = []
    try:
        for _ in range(length):
            actions = random_actions(rng, 1)
            envs.step(actions)
            for f in chain:
                f.step(actions)
            chain.append((chain[-1] if chain else envs).fork(0))
        for t in range(10):
            actions = random_actions(rng, 1)
            original = envs.step(actions)
            for i, f in enumerate(chain):
                assert_same(original[:4], f.step(actions)[:4], f"fork {i}, step {t}")
    except BaseException:
        for f in chain:
            f.close()
        raise
    return chain


def test_forks_of_forks_stay_bit_identical():
    envs = make(1)
    try:
        envs.reset(seed=9)
        for f in check_a_chain_of_forks(envs, np.random.default_rng(1), 30):
            f.close()
    finally:
        envs.close()


def test_what_a_fork_does_never_reaches_the_original():
    envs, reference = make(2), make(2)
    rng = np.random.default_rng(2)
    try:
        envs.reset(seed=3)
        reference.reset(seed=3)
        for _ in range(3):
            actions = random_actions(rng, 2)
            envs.step(actions)
            reference.step(actions)
        forks = envs.fork()  # every sub-environment
        for _ in range(10):
            forks.step(np.full((2, CONFIG["num_regions"]), 2))  # all to the fast tier
        forks.reset(seed=77)
        forks.close()
        for t in range(10):
            actions = random_actions(rng, 2)
            assert_same(envs.step(actions)[:4], reference.step(actions)[:4], f"step {t}")
    finally:
        envs.close()
        reference.close()


def test_fork_refuses_what_it_cannot_copy():
    envs = tiergym.make_vec(tiergym.DEFAULT_TASK_ID, 2, inprocess=True, batch_size=1, **CONFIG)
    try:
        envs.reset(seed=0)
        with pytest.raises(ValueError, match=r"env_ids\[1\]: 5 is not an environment \(0..1\)"):
            envs.fork([0, 5])
        envs.async_reset(seed=0)
        envs.recv()
        with pytest.raises(ValueError, match="1 steps sent and not received"):
            envs.fork()
        envs.recv()
        with pytest.raises(ValueError, match="fork\\(\\) after recv\\(\\)"):
            envs.fork()  # the rows are the last batch's
        envs.step(np.zeros((2, CONFIG["num_regions"]), dtype=np.int64))
        assert envs.fork(1).num_envs == 1
    finally:
        envs.close()


def test_lookahead_search_gets_its_forks_rewards(capsys):
    import lookahead
    status = lookahead.main(["--apps", "lulesh", "--steps", "12", "--horizon", "4"])
    out = capsys.readouterr().out
    assert status == 0
    assert re.search(r"lookahead 4: \d+ forked episodes in [0-9.]+ s; the real episode's reward "
                     r"differed from its fork's 0 times", out), out
    row = next(line.split() for line in out.splitlines() if line.startswith("lulesh"))
    assert float(row[1]) > 0 and float(row[3]) > 0.5, out  # time saved, of the oracle's
