"""agents_examples/learning_benchmark.py as a user runs it, at a tiny budget (8 regions,
6 decisions, a few hundred steps), in both protocols: the curves, the oracle-relative
scores per set and the heuristics land in the JSON and the plot, usage errors exit 2.
Seconds; what the agents reach at full budget is the README's table, not a test."""

import io
import json
import subprocess
import sys
import types

import numpy as np
import pytest
import tiergym

from tiergym_testing import REPO, needs_binary

import learning_benchmark as lb  # agents_examples/ (pytest's pythonpath)

pytestmark = needs_binary
SCRIPT = str(REPO / "agents_examples" / "learning_benchmark.py")


def test_fraction_of_oracle_is_the_mean_of_the_ratios():
    oracle = {"a": 0.2, "b": 0.1}
    assert lb.fraction_of_oracle({"a": 0.1, "b": 0.1}, oracle, ["a", "b"]) == pytest.approx(0.75)
    assert lb.fraction_of_oracle({"a": -0.2, "b": 0.1}, oracle, ["a"]) == pytest.approx(-1.0)


def test_rllib_timers_are_found_anywhere_in_a_result():
    result = {"timers": {"env_runner_sampling_timer": 1.5, "learner_update_timer": 3,
                         "synch_weights": 0.1},
              "env_runners": {"env_step_timer": 0.001, "episode_return_mean": 0.1,
                              "env_to_module_connector": {"mean": 0.002, "count": 7}}}
    assert lb.rllib_timers(result) == {
        "timers/env_runner_sampling_timer": 1.5, "timers/learner_update_timer": 3.0,
        "env_runners/env_step_timer": 0.001,
        "env_runners/env_to_module_connector/mean": 0.002,
        "env_runners/env_to_module_connector/count": 7.0}


def test_the_vectorized_multicategorical_is_sb3s_distribution():
    torch = pytest.importorskip("torch")
    from stable_baselines3.common.distributions import MultiCategoricalDistribution
    torch.manual_seed(0)
    logits, unequal = torch.randn(6, 4 * 3), torch.randn(6, 2 + 3)
    actions = torch.randint(0, 3, (6, 4)).float()
    plain = MultiCategoricalDistribution([3] * 4).proba_distribution(logits)
    plain_unequal = MultiCategoricalDistribution([2, 3]).proba_distribution(unequal)
    expected = (plain.log_prob(actions), plain.entropy(), plain.mode(),
                plain_unequal.log_prob(actions[:, :2].clamp(max=1)), plain_unequal.entropy())
    saved = dict(vars(MultiCategoricalDistribution))
    try:
        assert lb.vectorize_multicategorical()
        check_vectorized(MultiCategoricalDistribution, logits, unequal, actions, expected)
    finally:  # other tests of this process get SB3 as it is
        for name in ("proba_distribution", "log_prob", "entropy", "sample", "mode",
                     "_tiergym_vectorized"):
            if name in saved:
                setattr(MultiCategoricalDistribution, name, saved[name])
            elif hasattr(MultiCategoricalDistribution, name):
                delattr(MultiCategoricalDistribution, name)


def check_vectorized(dist_class, logits, unequal, actions, expected):
    import torch
    fast = dist_class([3] * 4).proba_distribution(logits)
    assert isinstance(fast.distribution, torch.distributions.Categorical)
    assert torch.allclose(fast.log_prob(actions), expected[0])
    assert torch.allclose(fast.entropy(), expected[1])
    assert torch.equal(fast.mode(), expected[2])
    sample = fast.sample()
    assert sample.shape == (6, 4) and int(sample.max()) <= 2
    # Unequal numbers of choices keep SB3's own list of Categoricals.
    other = dist_class([2, 3]).proba_distribution(unequal)
    assert isinstance(other.distribution, list)
    assert torch.allclose(other.log_prob(actions[:, :2].clamp(max=1)), expected[3])
    assert torch.allclose(other.entropy(), expected[4])


def test_sb3_learns_in_one_call_so_dqn_explores_over_the_whole_budget():
    # SB3 decays DQN's exploration over exploration_fraction of a learn call's
    # total_timesteps: evaluations must not split the budget into several learn calls.
    pytest.importorskip("stable_baselines3")
    import gymnasium
    from stable_baselines3 import DQN
    model = DQN("MlpPolicy", gymnasium.make("CartPole-v1"), seed=0, learning_starts=1000,
                exploration_fraction=0.5, exploration_final_eps=0.05)
    seen, progressed = [], []

    def evaluate():
        seen.append((model.num_timesteps, model.exploration_rate))
        return {"x": 0.0}

    train_s = lb.learn_with_evaluations(model, 400, 100, evaluate,
                                        lambda done, returns, s: progressed.append(done))
    assert [steps for steps, _ in seen] == [0, 100, 200, 300, 400]
    assert progressed == [100, 200, 300, 400] and train_s > 0
    # Linear from 1 to 0.05 over the first 200 of the 400 steps: 0.525 at step 100 (the
    # last step's rate, after step 99); chunks of 100 would have reached 0.05 by then.
    assert seen[1][1] == pytest.approx(1 - 0.95 * 99 / 200, abs=0.01)
    assert seen[3][1] == pytest.approx(0.05)


def test_a_tiny_run_writes_curves_scores_and_a_plot(tmp_path):
    out = subprocess.run(
        [sys.executable, SCRIPT, "--protocol", "two-apps", "--agents", "sb3-a2c,sb3-dqn",
         "--seeds", "0,1",
         "--steps", "48", "--eval-every", "24", "--config", "num_regions=8",
         "--config", "steps=6", "--heuristics", "random,greedy",
         "--json", str(tmp_path / "b.json"), "--plot", str(tmp_path / "b.png")],
        capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads((tmp_path / "b.json").read_text())
    assert result["protocol"] == "two-apps"
    assert result["task"]["action_mode"] == "keep" and result["task"]["num_regions"] == "8"
    assert set(result["heuristics"]) == {"random", "greedy"}
    assert set(result["oracle"]) == {"minife", "lulesh", "nekbone", "lammps"}
    assert all(v > 0 for v in result["oracle"].values())
    assert len(result["runs"]) == 4
    for run in result["runs"]:
        steps = [p["steps"] for p in run["curve"]]
        assert steps[0] == 0 and steps[-1] >= 48 and steps == sorted(steps)
        assert set(run["curve"][-1]["returns"]) == set(result["oracle"])
        assert run["steps_per_s"] > 0
    summary = result["summary"]
    assert summary["sb3-a2c"]["seeds"] == 2 and summary["sb3-dqn"]["seeds"] == 2
    assert (tmp_path / "b.png").stat().st_size > 10_000
    assert "fraction of the oracle's time saved" in out.stdout
    assert "sb3-a2c seed 1" in out.stderr  # progress


def test_the_generalization_protocol_scores_every_set(tmp_path):
    """Trained on procedural applications, evaluated on procedural ones (some trained on,
    some never seen), on a program on another machine and on a real program (the bundled
    recording of LAMMPS, projected on first use). (The bundled programs on knl are served
    by name as in the two-apps protocol; left out here to keep the test quick.)"""
    out = subprocess.run(
        [sys.executable, SCRIPT, "--agents", "sb3-a2c", "--seeds", "0", "--steps", "12",
         "--eval-every", "12", "--config", "num_regions=8", "--config", "steps=6",
         "--train-split", "procedural-train-v1:2",
         "--sets", "train=procedural-train-v1:2,test=procedural-test-v1:2,"
                   "machine=machine-xeonmax-v2:1,real=real-v1:1",
         "--heuristics", "arms", "--json", str(tmp_path / "g.json"),
         "--plot", str(tmp_path / "g.png")],
        capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads((tmp_path / "g.json").read_text())
    assert result["protocol"] == "generalization"
    assert result["task"]["observation"] == "relative"
    assert list(result["sets"]) == ["train", "test", "machine", "real"]
    assert result["sets"]["real"]["apps"] == ["lammps-melt"]
    assert result["sets"]["real"]["machine"] == "knl"
    assert result["sets"]["machine"]["machine"] == "xeonmax"
    assert result["sets"]["machine"]["apps"] == ["minife"]
    assert result["sets"]["test"]["apps"] == ["procedural-v1-1000000", "procedural-v1-1000001"]
    assert result["sets"]["test"]["pooled"] and not result["sets"]["machine"]["pooled"]
    for label, info in result["sets"].items():
        assert set(result["oracle"][label]) == set(info["apps"])
        assert set(result["heuristics"][label]) == {"arms"}
    assert result["oracle"]["machine"]["minife"] > 0
    (run,) = result["runs"]
    assert [p["steps"] for p in run["curve"]][0] == 0
    assert set(run["curve"][-1]["returns"]) == set(result["sets"])
    summary = result["summary"]["sb3-a2c"]
    assert set(summary) >= {"train", "test", "machine", "real", "seeds"}
    assert (tmp_path / "g.png").stat().st_size > 10_000
    assert "machine-xeonmax-v2" in out.stdout and "arms" in out.stdout


def test_the_reference_agent_trains_on_a_split_and_is_scored_on_every_set():
    """The reference agent (fast_ppo) in the generalization protocol, at a tiny budget: it
    trains on procedural applications, and every evaluation (the first before any update)
    holds a return for every application of every set, from the benchmark's evaluator."""
    pytest.importorskip("torch")
    task = dict(lb.GENERAL_TASK, num_regions="8", steps="6")
    sets = lb.parse_sets("train=procedural-train-v1:2,machine=machine-xeonmax-v2:1")
    train_dataset, n = tiergym.datasets.parse_entry("procedural-train-v1:2")
    agent = dict(library="reference", kwargs=dict(policy="regions", num_envs=4, num_steps=3,
                                                  num_minibatches=1, env_threads=1))
    done = []
    curve, train_s, wall_s = lb.train_reference_general(
        agent, task, train_dataset.config(n), sets, seed=0, steps=24, eval_every=12,
        progress=lambda steps, returns, train_s: done.append(steps), curve=[])
    assert [p["steps"] for p in curve] == [0, 12, 24] and done == [12, 24]
    for point in curve:
        assert {label: set(r) for label, r in point["returns"].items()} == {
            s.label: set(s.apps) for s in sets}
    assert 0 < train_s <= wall_s


def test_cem_fill_load_trains_and_is_scored_on_its_own_observation():
    """cem-fill-load's task is the protocol's with observation=relative-load (the load of
    each region appended); it trains and selects on it, and every evaluation holds every
    set's applications."""
    pytest.importorskip("torch")
    agent = lb.AGENTS["cem-fill-load"]
    task = lb.agent_task(dict(lb.GENERAL_TASK, num_regions="8", steps="6"), agent)
    assert task["observation"] == "relative-load" and lb.GENERAL_TASK["observation"] == "relative"
    tiny = dict(agent, kwargs=dict(agent["kwargs"], population=4, apps_per_generation=2,
                                   env_threads=1))
    sets = lb.parse_sets("train=procedural-train-v1:2,machine=machine-xeonmax-v2:1")
    train_dataset, n = tiergym.datasets.parse_entry("procedural-train-v1:2")
    oracle = {s.label: {a: 1.0 for a in s.apps} for s in sets}
    curve, _, _ = lb.train_reference_general(
        tiny, task, train_dataset.config(n), sets, seed=0, steps=96, eval_every=48,
        progress=lambda *a: None, curve=[], oracle=oracle)
    assert [p["steps"] for p in curve] == [0, 48, 96, 96]
    assert "selected_steps" in curve[-1]
    for point in curve:
        assert {label: set(r) for label, r in point["returns"].items()} == {
            s.label: set(s.apps) for s in sets}


def tiny_reference_run(**kwargs):
    """A reference agent's run of 36 steps, evaluated every 12 on a set train and a set
    machine (every oracle return 1), with kwargs among its fast_ppo arguments:
    (curve, a callable running it on the sets after the first)."""
    pytest.importorskip("torch")
    task = dict(lb.GENERAL_TASK, num_regions="8", steps="6")
    sets = lb.parse_sets("train=procedural-train-v1:2,machine=machine-xeonmax-v2:1")
    train_dataset, n = tiergym.datasets.parse_entry("procedural-train-v1:2")
    agent = dict(library="reference", kwargs=dict(policy="regions", num_envs=4, num_steps=3,
                                                  num_minibatches=1, env_threads=1, **kwargs))
    oracle = {s.label: {a: 1.0 for a in s.apps} for s in sets}
    run = dict(agent=agent, task=task, train_config=train_dataset.config(n), seed=0,
               steps=36, eval_every=12, progress=lambda *a: None)
    curve, _, _ = lb.train_reference_general(sets=sets, curve=[], oracle=oracle, **run)
    assert [p["steps"] for p in curve] == [0, 12, 24, 36, 36]
    return curve, lambda: lb.train_reference_general(sets=sets[1:], curve=[], oracle=oracle,
                                                     **run)


def test_select_best_chooses_by_the_train_set_only():
    """select_best (ppo-regions-best): the last point repeats the evaluation best on the set
    train; without a set train the run is refused before it starts."""
    curve, without_train = tiny_reference_run(select_best=True)
    best = max(curve[1:-1], key=lambda p: sum(p["returns"]["train"].values()))
    assert curve[-1]["selected_steps"] == best["steps"]
    assert curve[-1]["returns"] == best["returns"]
    with pytest.raises(ValueError, match="'train'"):
        without_train()


def test_ensemble_top_averages_the_checkpoints_best_on_the_train_set():
    """ensemble_top (ppo-regions-ens3): the last point is the ensemble of the checkpoints
    best on the set train, named by ensemble_steps, and evaluated on every set."""
    curve, without_train = tiny_reference_run(ensemble_top=2)
    ranked = sorted(curve[1:-1], key=lambda p: -sum(p["returns"]["train"].values()))
    assert curve[-1]["ensemble_steps"] == [p["steps"] for p in ranked[:2]]
    assert set(curve[-1]["returns"]) == {"train", "machine"}
    assert "ppo-regions-ens3" in lb.AGENTS
    with pytest.raises(ValueError, match="'train'"):
        without_train()


def test_set_scores_pool_procedural_sets_and_average_programs():
    procedural = types.SimpleNamespace(apps=["p1", "p2"], pooled=True)
    programs = types.SimpleNamespace(apps=["a", "b"], pooled=False)
    oracle = {"p1": 0.2, "p2": 0.0, "a": 0.2, "b": 0.1}
    returns = {"p1": 0.1, "p2": -0.1, "a": 0.1, "b": 0.1}
    assert lb.set_score(returns, oracle, procedural) == pytest.approx(0.0)
    assert lb.set_score(returns, oracle, programs) == pytest.approx(0.75)


def test_a_real_set_is_scored_in_time_saved_where_the_oracle_saves_nothing():
    """On knl the oracle leaves the real programs on DDR (it saves 0): a fraction of its
    time saved is undefined there, so a real set's score is the time saved in % of the
    all-slow runtime: 0 for the oracle, below 0 for a policy that loses time, and the table
    prints the oracle's row beside the heuristics'."""
    real = lb.EvalSet("real", tiergym.datasets.get("real-v1"), 2)
    assert real.saved and not real.pooled
    apps = real.apps
    oracle = {apps[0]: 0.0, apps[1]: 0.0}
    losing = {apps[0]: -0.01, apps[1]: -0.16}
    assert lb.set_score(oracle, oracle, real) == 0.0
    assert lb.set_score(losing, oracle, real) == pytest.approx(-8.5)
    assert lb.set_score({apps[0]: 0.02, apps[1]: 0.0}, oracle, real) == pytest.approx(1.0)
    assert np.isfinite(lb.set_score(losing, oracle, real))
    assert lb.score_name(real) == "% of the all-slow runtime saved"
    programs = lb.EvalSet("programs", tiergym.datasets.get("bundled-v1"), 1)
    assert not programs.saved
    assert real.describe()["score"] != programs.describe()["score"]
    out = io.StringIO()
    summary = {"agent": {"steps": 10, "seeds": 1, "wall_s": 1.0, "steps_per_s": 10.0,
                         "programs": [0.5, 0.0], "real": [-2.0, 0.0]}}
    heuristics = {"programs": {"hemem": {"minife": 0.1}}, "real": {"hemem": losing}}
    lb.print_sets_table(summary, heuristics, {"programs": {"minife": 0.2}, "real": oracle},
                        [programs, real], out=out)
    lines = out.getvalue().splitlines()
    assert "real: % of the all-slow runtime saved" in lines[0]
    assert lines[-2].split() == ["hemem", "0.500", "-8.500"]
    assert lines[-1].split() == ["oracle", "1.000", "0.000"]


def test_the_plot_draws_an_agent_and_its_tuned_configuration(tmp_path):
    pytest.importorskip("matplotlib")
    oracle = {"a": 0.2, "b": 0.1}
    runs = [{"agent": name, "seed": seed, "curve": [
        {"steps": steps, "returns": {"a": 0.1 * k + 0.01 * seed, "b": 0.05 * k}}
        for k, steps in enumerate((0, 100, 200))]}
        for name in ("sb3-ppo", "sb3-ppo-tuned", "sb3-dqn-tuned") for seed in (0, 1)]
    lb.plot(str(tmp_path / "p.png"), runs, {"random": {"a": 0.0, "b": -0.01}}, oracle,
            ["a"], ["b"], "title")
    assert (tmp_path / "p.png").stat().st_size > 10_000


def test_usage_errors_exit_2():
    for args in (["--agents", "sb3-sac"], ["--seeds", "x"], ["--config", "oops"],
                 ["--heuristics", "oracle"], ["--sets", "test=nope-v1"],
                 ["--agents", "rllib-ppo"]):
        out = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 2, (args, out.stderr)
        assert "learning_benchmark.py: error:" in out.stderr
