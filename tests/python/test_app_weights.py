"""agents_examples/app_weights.py and fast_ppo.py's --reward-norm oracle: the in-process
oracle is policies.py's, bit for bit; the weights and their floor; the cache; each reward
weighted by the profile of the episode it belongs to (the ended one at a same-step reset);
a short weighted run learns. Seconds each."""

import dataclasses

import numpy as np
import pytest

import app_weights
import fast_ppo
import policies
import tiergym

from tiergym_testing import needs_binary

SMALL = dict(num_envs=64, num_steps=16, quiet=True, eval_every=4096, held_out="")


@needs_binary
def test_the_in_process_oracle_is_policies_oracle():
    config = dict(tiergym.DEFAULT_TASK, steps=20, profiles="minife,nekbone,lammps")
    ours = app_weights.oracle_returns(config, chunk=20)  # batches padded, the pool reused
    env = tiergym.TierEnv(**dict(config, action_mode="placement", observation="raw"))
    try:
        for app in ("minife", "nekbone", "lammps"):
            theirs = policies.run_episode(env, policies.make_policy("oracle"), seed=0,
                                          profile=app)["speedup"]
            assert ours[app] == pytest.approx(theirs, abs=1e-12), app
    finally:
        env.close()
    assert set(ours) == {"minife", "nekbone", "lammps"} and min(ours.values()) > 0.05


def test_weights_make_every_application_weigh_the_mean_and_are_floored():
    w = app_weights.reward_weights({"a": 0.4, "b": 0.1, "c": 0.0, "d": -0.1}, floor=0.5)
    mean = (0.4 + 0.1) / 4
    assert w["a"] == pytest.approx(mean / 0.4)
    assert w["b"] == pytest.approx(mean / 0.1)
    assert w["c"] == w["d"] == pytest.approx(2.0)  # 1 / floor: no unbounded weight
    with pytest.raises(ValueError, match="floor"):
        app_weights.reward_weights({"a": 0.4}, floor=0)
    with pytest.raises(ValueError, match="no application"):
        app_weights.reward_weights({"a": 0.0, "b": -0.2})


def test_oracle_returns_are_cached_by_configuration(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls = []

    def fake(config):
        calls.append(config)
        return {"minife": 0.1 * len(calls)}
    monkeypatch.setattr(app_weights, "oracle_returns", fake)
    first = app_weights.cached_oracle_returns({"profiles": "minife", "steps": 20})
    again = app_weights.cached_oracle_returns({"steps": 20, "profiles": "minife"})
    other = app_weights.cached_oracle_returns({"profiles": "minife", "steps": 40})
    assert first == again == {"minife": 0.1} and other == {"minife": 0.2}
    assert len(calls) == 2 and len(list((tmp_path / "tiergym" / "oracle").iterdir())) == 2


def test_a_reward_is_weighted_by_the_episode_it_ends():
    envs = tiergym.InProcessVectorEnv(4, autoreset_mode=tiergym.SAME_STEP,
                                      **dict(tiergym.DEFAULT_TASK, steps=3,
                                             profiles="minife,lulesh,nekbone"))
    try:
        index = {p: i for i, p in enumerate(envs.tier_spec["profiles"])}
        _, info = envs.reset(seed=1)
        started = fast_ppo.reward_profiles(info, index)
        for _ in range(3):
            _, _, terminated, truncated, info = envs.step(np.zeros((4, 16), dtype=np.int64))
            ended = fast_ppo.reward_profiles(info, index)
            if not (terminated | truncated).all():
                assert (ended == started).all()
        assert (terminated | truncated).all()
        assert (ended == started).all()  # the ended episodes', not the next ones'
        nxt = np.array([index[p] for p in info["profile"]])
        assert (nxt != started).any()  # seed 1 draws other profiles for the next episodes
    finally:
        envs.close()


def test_equal_weights_change_nothing_and_a_weighted_run_learns(monkeypatch, tmp_path):
    args = fast_ppo.Args(total_steps=24_576, policy="regions", seed=3, **SMALL)
    monkeypatch.setattr(app_weights, "cached_oracle_returns",
                        lambda config, progress=None: {"minife": 0.2, "lulesh": 0.2})
    short = dataclasses.replace(args, total_steps=4096)
    plain = fast_ppo.train(short)[1]["curve"]
    equal = fast_ppo.train(dataclasses.replace(short, reward_norm="oracle"))[1]["curve"]
    assert [p["returns"] for p in plain] == [p["returns"] for p in equal]
    monkeypatch.setattr(app_weights, "cached_oracle_returns",
                        lambda config, progress=None: {"minife": 0.02, "lulesh": 0.4})
    skewed = fast_ppo.train(dataclasses.replace(short, reward_norm="oracle"))[1]["curve"]
    assert [p["returns"] for p in skewed] != [p["returns"] for p in plain]
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # the real oracle, cached there
    oracle = app_weights.oracle_returns(fast_ppo.serving_config(args))
    _, metrics = fast_ppo.train(dataclasses.replace(args, reward_norm="oracle"), oracle=oracle)
    assert max(p["train"] for p in metrics["curve"][1:]) > 0.8, metrics["curve"]
    assert len(list((tmp_path / "tiergym" / "oracle").iterdir())) == 1


def test_reward_norm_arguments_are_checked():
    with pytest.raises(ValueError, match="--reward-norm"):
        fast_ppo.check_args(fast_ppo.Args(reward_norm="median"))
    with pytest.raises(ValueError, match="--reward-norm-floor"):
        fast_ppo.check_args(fast_ppo.Args(reward_norm="oracle", reward_norm_floor=0))
    with pytest.raises(ValueError, match="--ray-workers"):
        fast_ppo.check_args(fast_ppo.Args(reward_norm="oracle", ray_workers=2, num_envs=64))
