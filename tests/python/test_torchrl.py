"""tiergym with TorchRL (torchrl 0.14 and tensordict from PyPI, installed by the test
command): TorchRL's GymEnv and GymWrapper on tiergym's environments pass check_env_specs;
the in-process vector environment is a batched TorchRL environment whose rollouts hold
every step's own data; the action mask reaches the tensordict and TorchRL's ActionMask
(random actions keep to it, and it is the environment's mask step by step); the masked
per-region distribution; and a short PPO of agents_examples/torchrl_ppo.py (a collector,
GAE, ClipPPOLoss, Adam) that changes its policy and plays masked episodes."""

import numpy as np
import pytest

import tiergym
from tiergym_testing import needs_binary

torch = pytest.importorskip("torch")
pytest.importorskip("torchrl")

from torchrl.envs import GymEnv, GymWrapper  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402

from tiergym.torchrl import (MASK_KEY, MaskedMultiCategorical, make_env,  # noqa: E402
                             with_action_mask)

pytestmark = needs_binary
SMALL = dict(tiergym.DEFAULT_TASK, steps=6, num_regions=8)


@pytest.fixture(autouse=True)
def one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small tensors: threads only wait for each other
    yield
    torch.set_num_threads(threads)


def consistent(rollout):
    """Each step's observation is the previous step's next observation, except after an
    episode ended (then a reset's): the rollout holds every step's own data."""
    obs, nxt, done = rollout["observation"], rollout["next", "observation"], rollout["next", "done"]
    steps = rollout.batch_size[-1]
    for t in range(steps - 1):
        kept = ~done[..., t, 0]
        assert torch.equal(obs[..., t + 1, :][kept], nxt[..., t, :][kept]), t
    return True


def test_torchrls_gym_env_makes_the_default_task_by_id_and_checks_its_specs():
    env = GymEnv("tiergym/TierPlacement")  # TorchRL passes frameskip, which TierEnv refuses
    try:                                   # as a TypeError: TorchRL retries without it
        check_env_specs(env)
        assert env.action_spec.shape == (16, 3)  # one-hot per region: keep, ddr, hbm
    finally:
        env.close()


def test_gym_wrapper_on_a_tier_env_and_on_the_in_process_vector_env():
    single = GymWrapper(tiergym.make("tiergym/TierPlacement-v1", **SMALL))
    vector = GymWrapper(tiergym.InProcessVectorEnv(3, autoreset_mode="disabled", copy=True,
                                                   **SMALL))
    try:
        for env in (single, vector):
            check_env_specs(env)
        assert vector.batch_size == (3,)
        rollout = vector.rollout(14, break_when_any_done=False)  # past two episode ends
        assert rollout.batch_size == (3, 14)
        assert rollout["next", "done"].sum() >= 6 and consistent(rollout)
    finally:
        single.close()
        vector.close()


def test_the_gymnasium_enum_is_what_torchrl_reads_from_a_vector_env():
    import gymnasium
    mode = gymnasium.vector.AutoresetMode.DISABLED
    env = GymWrapper(tiergym.InProcessVectorEnv(2, autoreset_mode=mode, copy=True, **SMALL))
    try:
        assert env.batch_size == (2,)
    finally:
        env.close()
    with pytest.raises(RuntimeError, match="SAME_STEP or DISABLED"):
        GymWrapper(tiergym.InProcessVectorEnv(2, autoreset_mode="next_step", copy=True, **SMALL))


def test_in_process_info_columns_convert_to_tensors():
    # numpy's 'Q' (what nanobind makes of uint64) is refused by torch.as_tensor.
    with tiergym.InProcessVectorEnv(2, **SMALL) as envs:
        _, infos = envs.reset(seed=0)
        for key, column in infos.items():
            if isinstance(column, np.ndarray) and column.dtype != object:
                torch.as_tensor(column)


@pytest.mark.parametrize("kind", ["single", "inprocess", "server", "placement", "move"])
def test_random_actions_keep_to_the_action_mask(kind):
    kwargs = {"single": {}, "inprocess": {"num_envs": 3}, "server": {"num_envs": 2,
              "inprocess": False}, "placement": {"num_envs": 2, "action_mode": "placement",
              "tier_capacity_mib": "hbm:256"}, "move": {"action_mode": "move"}}[kind]
    env = make_env(**{**SMALL, **kwargs})
    try:
        check_env_specs(env)
        torch.manual_seed(0)
        rollout = env.rollout(14, break_when_any_done=False)
        mask, action = rollout[MASK_KEY], rollout["action"]
        assert mask.dtype == torch.bool
        allowed = mask.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        assert allowed.all()
        # Every state allows something in each row (a reset's info rows of the
        # sub-environments it left alone are empty: the mask is never read from them).
        assert mask.any(-1).all()
        if kind != "move":
            assert (~mask).any(), "the masks bind somewhere (the capacity is small)"
        consistent(rollout)
    finally:
        env.close()


def test_the_tensordicts_mask_is_the_environments_step_by_step():
    env = make_env(**SMALL)
    try:
        env.set_seed(7)
        torch.manual_seed(1)
        rollout = env.rollout(6)
    finally:
        env.close()
    replay = tiergym.make("tiergym/TierPlacement-v1", **SMALL)
    try:
        replay.reset(seed=7)
        _, info = replay.reset()  # TorchRL's rollout resets again, unseeded: the generator goes on
        for t in range(rollout.batch_size[0]):
            expected = np.asarray(info["action_mask"], dtype=bool)
            np.testing.assert_array_equal(rollout[MASK_KEY][t].numpy(), expected, err_msg=str(t))
            obs, _, _, _, info = replay.step(rollout["action"][t].numpy())
            np.testing.assert_array_equal(rollout["next", "observation"][t].numpy(), obs)
    finally:
        replay.close()


def test_the_masked_multi_categorical_is_one_distribution_over_the_regions():
    torch.manual_seed(0)
    logits = torch.randn(5, 4, 3)
    mask = torch.rand(5, 4, 3) > 0.4
    mask[..., 0] = True
    dist = MaskedMultiCategorical(logits=logits, mask=mask)
    sample = dist.sample((200,))
    assert sample.shape == (200, 5, 4)
    assert mask.expand(200, 5, 4, 3).gather(-1, sample.unsqueeze(-1)).all()
    masked = logits.masked_fill(~mask, float("-inf"))
    expected = torch.distributions.Categorical(logits=masked).log_prob(sample).sum(-1)
    assert dist.log_prob(sample).shape == (200, 5)
    torch.testing.assert_close(dist.log_prob(sample), expected)
    assert torch.equal(dist.deterministic_sample, masked.argmax(-1))
    assert dist.entropy().shape == (5,)


def test_a_short_ppo_with_torchrls_collector_and_loss_changes_its_policy():
    import torchrl_ppo
    args = torchrl_ppo.Args(steps=256, envs=4, batch=128, minibatch=64, epochs=2,
                            steps_per_episode=8, hidden=16)
    torch.manual_seed(0)
    env = make_env(num_envs=args.envs, profiles=args.train, steps=args.steps_per_episode)
    try:
        env.set_seed(0)
        actor, critic = torchrl_ppo.build(env, args.hidden)
        before = [p.detach().clone() for p in actor.parameters()]
        history = torchrl_ppo.train(args, env, actor, critic, log=lambda *a: None)
    finally:
        env.close()
    assert [h[0] for h in history] == [128, 256]
    assert all(np.isfinite(h[2]) for h in history)
    assert history[-1][1] is not None  # 8-step episodes ended and their returns were summed
    assert any(not torch.equal(b, p) for b, p in zip(before, actor.parameters()))
    # The trained policy plays a TierEnv of the task: deterministic, within the masks.
    task = tiergym.TierEnv(**dict(tiergym.DEFAULT_TASK, steps=8))
    try:
        predict = torchrl_ppo.greedy_predict(actor, task)
        obs, info = task.reset(seed=0, options={"profile": "nekbone"})
        for _ in range(8):
            action = predict(obs)
            mask = np.asarray(info["action_mask"], dtype=bool)
            assert mask[np.arange(len(action)), action].all()
            assert np.array_equal(action, predict(obs))
            obs, _, terminated, _, info = task.step(action)
        assert terminated
    finally:
        task.close()


def test_the_ppo_script_without_torchrl_says_how_to_install_it():
    import subprocess
    import sys
    from tiergym_testing import REPO
    code = ("import sys, runpy; sys.modules['torchrl'] = None; "
            f"sys.argv = ['torchrl_ppo.py']; runpy.run_path("
            f"{str(REPO / 'agents_examples' / 'torchrl_ppo.py')!r}, run_name='__main__')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=REPO / "agents_examples")  # its sibling modules
    assert out.returncode == 1 and "tiergym[torchrl]" in out.stderr, out.stderr
