"""agents_examples/bc_regions.py (a warm start of fast_ppo's per-region policy cloned from
a heuristic's placement) and coverage.py (the held-out programs among the training pool):
the teacher's placements are its episodes' (policies.py over a server), the labels say
where the teacher keeps each region, a fit learns them, fast_ppo starts from the clone;
the coverage statistics on hand-made cases. Seconds to a minute each."""

import dataclasses

import numpy as np
import pytest
import torch

import bc_regions
import coverage
import fast_ppo
import policies
import tiergym

from tiergym_testing import needs_binary

TASK = dict(tiergym.DEFAULT_TASK, steps=12, observation="relative")


@needs_binary
def test_the_teacher_s_placements_are_its_own_episodes_placements():
    config = dict(TASK, profiles="minife,nekbone,lammps")
    profiles, placements = bc_regions.teacher_placements(config, "hemem")
    assert profiles == ["minife", "nekbone", "lammps"] and placements.shape == (3, 12, 16)
    env = tiergym.TierEnv(**dict(config, action_mode="placement"))
    try:
        for i, app in enumerate(profiles):
            result = policies.run_episode(env, policies.make_policy("hemem"), seed=0,
                                          profile=app)
            theirs = np.stack([a for a, _ in result["schedule"]])
            assert (theirs == placements[i]).all(), app
    finally:
        env.close()
    assert (placements[:, -1] != 0).any()  # HeMem-like promotes within 12 decisions


@needs_binary
def test_labels_are_the_teacher_s_tiers_and_the_clone_learns_them():
    config = dict(TASK, profiles="minife,nekbone,lammps")
    profiles, placements = bc_regions.teacher_placements(config, "hemem")
    bc = bc_regions.BCArgs(episodes=2, noise=0.3, epochs=30, learning_rate=3e-3)
    obs, masks, labels, returns, changes, steps = bc_regions.collect(config, profiles,
                                                                     placements, bc)
    assert steps == 2 * 3 * 12 and obs.shape[0] == 2 * 3 * 12 == len(returns)
    # placement labels: 1 + the teacher's tier at that step, unless that move is masked
    expected = 1 + np.tile(placements.transpose(1, 0, 2), (2, 1, 1))      # [2T, n, K]
    expected = expected.reshape(-1, placements.shape[2])
    allowed = np.take_along_axis(masks, expected[..., None], -1)[..., 0]
    assert (labels == np.where(allowed, expected, 0)).all()
    # the returns-to-go of the first step are the episodes' returns x 100
    assert returns.shape == (len(obs),)
    keep = dataclasses.replace(bc, label="keep")
    _, _, keep_labels, _, keep_changes, _ = bc_regions.collect(config, profiles, placements,
                                                               keep)
    assert 0 < (keep_labels != 0).mean() < 0.5  # keep where the region already is
    assert ((keep_labels != 0) == keep_changes).all()
    # changes: the label's tier is not the one the region is on (the first episode is the
    # teacher's own: its labels change a region only where the teacher moves it)
    assert 0 < changes.mean() < 0.5 and (labels[changes] != 0).all()
    envs = tiergym.InProcessVectorEnv(1, **dict(config, profiles="minife"))
    layout = fast_ppo.Layout(envs.tier_spec, envs.num_regions, envs.single_action_space)
    torch.manual_seed(0)
    policy = fast_ppo.POLICIES["regions"](layout, envs.single_observation_space.shape[0], 64)
    envs.close()
    before = (fast_ppo.greedy_actions(policy, obs, masks) == labels)[changes].mean()
    accuracy, on_changes = bc_regions.fit(policy, obs, masks, labels, returns, changes, bc)
    assert accuracy > 0.6 and on_changes > max(0.5, before + 0.2)


@needs_binary
def test_fast_ppo_starts_from_the_clone(tmp_path):
    args = fast_ppo.Args(train="minife,lammps", held_out="", policy="regions", num_envs=8,
                         num_steps=4, total_steps=32, eval_every=32, quiet=True,
                         config="steps=12,observation=relative")
    path = tmp_path / "bc.pt"
    result = bc_regions.pretrain(args, bc_regions.BCArgs(episodes=1, epochs=2), str(path))
    assert result["env_steps"] == 2 * 12 * 2 and path.stat().st_size > 0
    saved = torch.load(path, weights_only=False)["state_dict"]
    started = dataclasses.replace(args, init_from=str(path), total_steps=16,
                                  learning_rate=1e-12, anneal_lr=False)
    policy, _ = fast_ppo.train(started)
    for name, value in policy.state_dict().items():  # an update of lr 1e-12 changes ~nothing
        assert torch.allclose(value, saved[name], atol=1e-6), name


def test_coverage_statistics_on_a_flat_and_a_peaked_heat():
    size = np.array([1.0, 1.0, 2.0, 4.0])
    flat = np.tile(size / size.sum(), (10, 1))
    s = coverage._stats(flat, size, capacity=2.0)
    assert s["hot_density"] == pytest.approx(1.0) and s["top_density"] == pytest.approx(1.0)
    assert s["footprint"] == pytest.approx(4.0)
    peaked = np.tile([0.7, 0.1, 0.1, 0.1], (10, 1))
    s = coverage._stats(peaked, size, capacity=2.0)
    assert s["hot_density"] == pytest.approx(0.8 / (2 / 8))  # regions 0 and 1 fit
    assert s["top_density"] == pytest.approx(0.7 / (1 / 8)) and s["hot_change"] == 0.0
    moving = np.vstack([np.tile([0.5, 0.3, 0.2, 0.0], (5, 1)),   # densest: 0, 1, 2
                        np.tile([0.5, 0.0, 0.0, 0.5], (5, 1))])  # 0 (3 does not fit)
    assert coverage._stats(moving, size, capacity=4.0)["hot_change"] == pytest.approx(0.75)
    assert coverage.percentile([1, 2, 3, 4], 2.5) == 50.0
    assert coverage.percentile([1, 2, 3, 4], 0) == 0.0 and coverage.percentile([1, 2], 2) == 75.0


@needs_binary
def test_coverage_places_the_programs_among_a_pool(capsys):
    result = coverage.measure(dict(tiergym.DEFAULT_TASK, steps=10), "procedural-train-v1:4",
                              ["bundled-v1:2"], progress=lambda line: None)
    assert len(result["pool"]) == 4 and set(result["held_out"]["bundled-v1:2"]) == {
        "minife", "lulesh"}
    for stats in list(result["pool"].values()) + list(result["held_out"]["bundled-v1:2"].values()):
        assert set(stats) == set(coverage.STATS) and stats["footprint"] > 1
        assert stats["traffic"] > 0 and stats["hot_density"] > 0
    coverage.print_table(result)
    assert "minife" in capsys.readouterr().out
