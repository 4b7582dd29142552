"""PufferLib on tiergym (agents_examples/puffer_tiergym.py, pufferlib-core 3.0.19 from PyPI,
a test requirement): the advantage operator registered for torch 2.13 computes what
PufferLib's C++ kernel computes; importing the trainer leaves the process's SIGINT handler
and exception hook alone; TierPufferEnv fills PufferLib's buffers with tiergym's
observations and masks; PufferLib's trainer (PuffeRL) on TierPufferEnv through PufferLib's
vectorization learns: a short run beats random and its untrained self. Seconds each."""

import signal
import sys
import types

import numpy as np
import pytest
import torch

import fast_ppo
import puffer_tiergym as pt
import tiergym

from tiergym_testing import needs_binary


def kernel_loop(values, rewards, dones, importance, gamma, lam, rho_clip, c_clip):
    """extensions/pufferlib.cpp's puff_advantage_row, transcribed line by line."""
    adv = np.zeros_like(values)
    for row in range(values.shape[0]):
        last = 0.0
        for t in range(values.shape[1] - 2, -1, -1):
            nonterminal = 1.0 - dones[row, t + 1]
            rho = min(importance[row, t], rho_clip)
            c = min(importance[row, t], c_clip)
            delta = rho * (rewards[row, t + 1] + gamma * values[row, t + 1] * nonterminal
                           - values[row, t])
            last = delta + gamma * lam * c * last * nonterminal
            adv[row, t] = last
    return adv


def test_the_advantage_operator_computes_the_kernels_recurrence():
    pt.import_pufferl()
    rng = np.random.default_rng(0)
    shape = (6, 9)
    values, rewards = rng.normal(size=shape), rng.normal(size=shape)
    dones = (rng.random(shape) < 0.2).astype(np.float64)
    importance = rng.uniform(0.5, 1.5, size=shape)
    want = kernel_loop(values, rewards, dones, importance, 0.99, 0.9, 1.1, 0.8)
    tensors = [torch.tensor(x, dtype=torch.float32) for x in (values, rewards, dones, importance)]
    got = torch.zeros(shape)
    torch.ops.pufferlib.compute_puff_advantage(*tensors, got, 0.99, 0.9, 1.1, 0.8)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    assert (got[:, -1] == 0).all()


def test_importing_the_trainer_keeps_the_sigint_handler_and_the_exception_hook():
    handler, hook = signal.getsignal(signal.SIGINT), sys.excepthook
    sys.modules.pop("pufferlib.pufferl", None)
    pufferl = pt.import_pufferl()
    assert hasattr(pufferl, "PuffeRL")
    assert signal.getsignal(signal.SIGINT) is handler
    assert sys.excepthook is hook
    import pufferlib
    assert pufferlib.__version__ == pt.PUFFERLIB_CORE_VERSION


def test_tier_puffer_env_writes_observations_and_masks_into_pufferlibs_buffers():
    import pufferlib.vector
    env_class = pt.make_env_class()
    config = dict(tiergym.DEFAULT_TASK, profiles="lulesh")  # a profile loads in about a second
    vecenv = pufferlib.vector.make(env_class, env_kwargs=dict(num_envs=4, **config),
                                   backend=pufferlib.vector.Serial, num_envs=2, seed=3)
    reference = tiergym.InProcessVectorEnv(4, autoreset_mode=tiergym.SAME_STEP, **config)
    try:
        assert vecenv.num_agents == 8
        vecenv.async_reset(3)
        obs = vecenv.recv()[0]
        want, info = reference.reset(seed=3)
        d = reference.single_observation_space.shape[0]
        np.testing.assert_array_equal(obs[:4, :d], want)
        np.testing.assert_array_equal(obs[:4, d:], info["action_mask"].reshape(4, -1))
        rng = np.random.default_rng(2)
        for _ in range(3):
            actions = rng.integers(0, 3, size=(8, 16)).astype(np.int32)
            vecenv.send(actions)
            o, r, term, trunc, _, infos, ids, masks = vecenv.recv()
            w = reference.step(actions[:4].astype(np.int64))
            np.testing.assert_array_equal(o[:4, :d], w[0])
            np.testing.assert_array_equal(r[:4], (w[1] * 100.0).astype(np.float32))
            np.testing.assert_array_equal(ids, np.arange(8))
    finally:
        vecenv.close()
        reference.close()


@needs_binary
def test_pufferlibs_trainer_learns_on_tiergym():
    refs = fast_ppo.reference_returns(fast_ppo.Args(held_out=""), names=("random",))
    oracle = refs.pop("oracle")
    args = pt.parse_args(["--total-steps", "16384", "--num-envs", "64", "--horizon", "16",
                          "--eval-every", "4096", "--ent-coef", "0.01", "--seed", "1",
                          "--held-out", ""])
    policy, metrics = pt.train(args, oracle=oracle)
    curve = metrics["curve"]
    random_score = fast_ppo.fraction_of_oracle(refs["random"], oracle, ["minife", "lulesh"])
    best = max(p["train"] for p in curve[1:])
    assert metrics["steps"] >= 16384
    assert best > curve[0]["train"] + 0.1, curve
    assert best > random_score + 0.5, (curve, random_score)
