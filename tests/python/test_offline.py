"""tiergym.offline with Minari (0.5, HDF5 storage, from PyPI by the test command): a policy's
episodes on a task, by name (the oracle, a heuristic; loaded from agents_examples), as an
object or as a callable, written into a dataset that minari.load_dataset opens; its
recorded environment spec makes the same environment (recover_environment), on which the
recorded actions replay bit for bit from the recorded seeds and profiles; the evaluation
environment holds the held-out applications; the reference scores make
minari.get_normalized_score the fraction of the oracle's time saved; the command's exit
statuses; and the behaviour-cloning example end to end."""

import json
import subprocess
import sys

import numpy as np
import pytest

import tiergym
from tiergym_testing import REPO, needs_binary

minari = pytest.importorskip("minari")
pytest.importorskip("h5py")
from tiergym import offline  # noqa: E402

pytestmark = needs_binary
SMALL = {"num_regions": 8, "steps": 10}
ORACLE_ID = "tiergym/TierPlacement-v1/oracle-small-v0"


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """MINARI_DATASETS_PATH for the module (one oracle dataset made for several tests)."""
    path = tmp_path_factory.mktemp("minari")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MINARI_DATASETS_PATH", str(path))
        lines = []
        dataset = offline.record(ORACLE_ID, "oracle", profiles="minife,lulesh", seeds=[0, 1],
                                 eval_profiles="nekbone", log=lines.append, **SMALL)
        yield path, dataset, lines


def test_the_oracles_dataset_opens_with_minari_and_says_what_made_it(datasets):
    path, recorded, lines = datasets
    assert len(lines) == 4 and lines[0].startswith("oracle on minife, seed 0: return +")
    dataset = minari.load_dataset(ORACLE_ID)
    assert dataset.total_episodes == 4 and dataset.total_steps == 40
    assert str(path) in str(dataset.storage.data_path)
    meta = dataset.storage.metadata
    made = json.loads(meta["tiergym"])
    assert made["env_id"] == "tiergym/TierPlacement-v1" and made["policy"] == "oracle"
    assert made["profiles"] == ["minife", "lulesh"] and made["seeds"] == [0, 1]
    assert made["version"] == tiergym.__version__
    assert made["config"]["num_regions"] == "8" and made["config"]["action_mode"] == "keep"
    assert meta["algorithm_name"] == "oracle"
    episode = next(dataset.iterate_episodes())
    regions, choices = 8, 3  # keep mode on knl: keep, ddr, hbm
    assert episode.observations.shape[0] == 11 and episode.actions.shape == (10, regions)
    assert episode.infos["action_mask"].shape == (11, regions, choices)
    assert set(offline.DEFAULT_INFO_KEYS) | {"refused"} == set(episode.infos)
    assert (episode.infos["refused"] == 0).all()  # the oracle plans within the capacity
    # The oracle moves at the first step and keeps its placement afterwards (keep mode: 0).
    assert episode.actions[0].any() and not episode.actions[1:].any()


def test_the_recovered_environment_replays_the_episodes_bit_for_bit(datasets):
    _, dataset, _ = datasets
    made = json.loads(dataset.storage.metadata["tiergym"])
    env = dataset.recover_environment()
    try:
        assert env.spec.id == "tiergym/TierPlacement-v1"
        assert env.unwrapped.config == made["config"]  # every key, as the server has it
        order = [(p, s) for p in made["profiles"] for s in made["seeds"]]
        for (profile, seed), episode in zip(order, dataset.iterate_episodes()):
            obs, _ = env.reset(seed=seed, options={"profile": profile})
            np.testing.assert_array_equal(obs, episode.observations[0])
            for t, action in enumerate(episode.actions):
                obs, reward, terminated, truncated, info = env.step(action)
                np.testing.assert_array_equal(obs, episode.observations[t + 1])
                assert reward == episode.rewards[t]
                assert terminated == episode.terminations[t]
            assert terminated
    finally:
        env.close()
    held_out = dataset.recover_environment(eval_env=True)
    try:
        assert held_out.unwrapped.config["profiles"] == "nekbone"
        assert held_out.unwrapped.config["num_regions"] == "8"
    finally:
        held_out.close()


def test_the_reference_scores_make_the_normalized_score_the_fraction_of_the_oracle(datasets):
    _, dataset, _ = datasets
    meta = dataset.storage.metadata
    returns = [float(np.sum(e.rewards)) for e in dataset.iterate_episodes()]
    assert meta["ref_min_score"] == 0.0  # the default placement saves no time
    assert meta["ref_max_score"] == pytest.approx(np.mean(returns))
    assert np.mean(minari.get_normalized_score(dataset, np.array(returns))) == pytest.approx(1)


def test_a_heuristic_by_name_is_measured_against_the_oracle(datasets):
    dataset = offline.record("tiergym/TierPlacement-v1/hemem-small-v0", "hemem",
                             profiles="lulesh", seeds=[0], **SMALL)
    meta = dataset.storage.metadata
    own = float(np.sum(next(dataset.iterate_episodes()).rewards))
    oracle = offline.episode_returns("oracle", profiles="lulesh", **SMALL)
    assert meta["ref_max_score"] == pytest.approx(oracle[0][2])
    assert 0 < own < oracle[0][2]  # a heuristic below the oracle, above nothing


def test_a_callable_and_a_placement_object_are_recorded_as_they_act(datasets):
    def keep_everything(obs, info):
        return np.zeros(8, dtype=np.int64)

    kept = offline.record("tiergym/TierPlacement-v1/keep-v0", keep_everything,
                          profiles="minife", reference=None, **SMALL)
    episode = next(kept.iterate_episodes())
    assert kept.storage.metadata["algorithm_name"] == "keep_everything"
    assert "ref_max_score" not in kept.storage.metadata
    assert not episode.actions.any() and float(np.sum(episode.rewards)) == 0.0

    class AllOnTier1:  # the interface of agents_examples/policies.py
        name = "all-hbm"

        def reset(self, env, obs, info):
            self.regions = env.num_regions

        def act(self, obs, info):
            return np.ones(self.regions, dtype=np.int64)

    # A placement task: the object's actions are recorded as they are (no twin).
    placed = offline.record("tiergym/TierPlacement-v0/all-hbm-v0", AllOnTier1(),
                            env_id="tiergym/TierPlacement-v0", profiles="minife",
                            reference=None, **SMALL)
    episode = next(placed.iterate_episodes())
    assert (episode.actions == 1).all()


def test_a_placement_policy_cannot_drive_the_move_mode(datasets):
    with pytest.raises(ValueError, match="cannot act in the 'move' action mode"):
        offline.record("tiergym/TierPlacement-v1/bad-v0", "hemem", action_mode="move",
                       profiles="minife", **SMALL)


def run_command(*args, env_path):
    import os
    env = dict(os.environ, MINARI_DATASETS_PATH=str(env_path))
    return subprocess.run([sys.executable, "-m", "tiergym.offline", *args], capture_output=True,
                          text=True, timeout=300, env=env)


def test_the_command_records_and_refuses_what_it_cannot(datasets, tmp_path):
    args = ["--policy", "damos", "--dataset-id", "tiergym/TierPlacement-v1/damos-v0",
            "--profiles", "minife", "--seeds", "0-1", "--set", "num_regions=8",
            "--set", "steps=10", "--quiet"]
    out = run_command(*args, env_path=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("tiergym/TierPlacement-v1/damos-v0: 2 episodes, 20 steps, "
                                 "reference (max) +"), out.stdout
    again = run_command(*args, env_path=tmp_path)
    assert again.returncode == 1 and "exists" in again.stderr and "delete_dataset" in again.stderr
    unknown = run_command("--policy", "nosuch", "--dataset-id", "tiergym/x/y-v0",
                          env_path=tmp_path)
    assert unknown.returncode == 1 and "unknown policy 'nosuch'" in unknown.stderr
    usage = run_command("--policy", "oracle", "--dataset-id", "a/b-v0", "--seeds", "x",
                        env_path=tmp_path)
    assert usage.returncode == 2 and "seeds" in usage.stderr


def test_behaviour_cloning_on_the_oracles_dataset_is_scored_on_held_out_applications(
        datasets, capsys):
    pytest.importorskip("torch")
    import bc_minari
    status = bc_minari.main(["--dataset-id", ORACLE_ID, "--epochs", "300"])
    out = capsys.readouterr().out
    assert status == 0
    lines = {line.split()[0]: line.split() for line in out.strip().split("\n")}
    # The training applications: the oracle's episodes learned back (its own returns).
    assert float(lines["minife"][3]) == pytest.approx(1, abs=0.02)
    assert float(lines["lulesh"][3]) == pytest.approx(1, abs=0.02)
    assert "nekbone" in lines and "normalized" in lines  # the held-out application, scored
