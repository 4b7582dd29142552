"""The learning agents (agents_examples/q_learning.py, ppo_torch.py), their shared protocol
(learning_common.py) and the RLlib env_creator (rllib_env.py): the knapsack that keeps
placements within capacity, training, save / load giving the same actions, the policy
interface, and that the Q-learner learns a placement that beats random on applications it
never trained on. Small episodes (8-16 regions, 8-20 steps): seconds each. Skipped (with
the reason) without the tiergym binary; torch (2.13) is a test requirement."""

import re
import subprocess
import sys
import types

import numpy as np
import pytest

from tiergym_testing import REPO, needs_binary, server_fixture

import learning_common as lc  # agents_examples/ (pytest's pythonpath)
import ppo_torch
import q_learning as ql
import rllib_env
import tiergym
# torch is a test requirement (tiergym[test] pins torch 2.13): the PPO tests never skip.

TRAIN = ["minife", "lulesh"]
HELD_OUT = ["nekbone", "lammps"]


server = server_fixture("--threads", "1", "--quiet")


def small_config(regions, steps):
    """knl with 512 MiB of HBM: none of the bundled applications fits it."""
    args = types.SimpleNamespace(machine="knl", fast_mib=512, num_regions=regions, steps=steps)
    return lc.env_config(args)


def episode_actions(env, policy, profile, seed=0):
    obs, info = env.reset(seed=seed, options={"profile": profile})
    policy.reset(env, obs, info)
    actions, refused = [], 0
    while True:
        action = policy.act(obs, info)
        actions.append(np.array(action))
        obs, _, terminated, truncated, info = env.step(action)
        refused += len(info["refused_regions"])
        if terminated or truncated:
            return actions, refused


# --- Pieces without a server ---------------------------------------------------------------

def fake_env(regions, tiers=2):
    return types.SimpleNamespace(num_regions=regions, tiers=["ddr", "hbm", "x"][:tiers],
                                 tier_spec={"obs_region_features": 4,
                                            "obs_global_offset": regions * 4})


def observation(tier, last, history, size, fill=(0.5, 0.5), progress=0.5, speed=0.5):
    regions = np.stack([tier, last, history, size], axis=1).astype(np.float32)
    return np.concatenate([regions.ravel(), np.asarray(fill, np.float32), [progress, speed]])


def test_obs_view_splits_one_observation_and_a_batch():
    env = fake_env(3)
    obs = observation([0, 1, 0], [0.1, 0.2, 0.7], [0.2, 0.3, 0.5], [0.5, 0.25, 0.25],
                      fill=(0.4, 0.9), progress=0.25, speed=0.6)
    v = lc.ObsView(env, obs)
    assert list(v.tier) == [0, 1, 0] and list(v.size) == [0.5, 0.25, 0.25]
    assert v.progress == pytest.approx(0.25) and v.fill[1] == pytest.approx(0.9)
    b = lc.ObsView(env, np.stack([obs, obs]))
    assert b.tier.shape == (2, 3) and b.progress.shape == (2,)


def test_fit_capacity_grants_by_score_within_the_room():
    size = np.array([0.3, 0.3, 0.2, 0.2])
    # All four ask for tier 1, room 0.5: the best scores first, a smaller one fills the gap.
    action = lc.fit_capacity([1, 1, 1, 1], [0.9, 0.1, 0.8, 0.5], size, [10.0, 0.55])
    assert list(action) == [1, 0, 1, 0]
    # What is not requested stays on the default tier whatever its score.
    assert list(lc.fit_capacity([0, 1, 0, 0], [9, 0, 9, 9], size, [10.0, 0.55])) == [0, 1, 0, 0]
    # A region that fits only by float rounding is not granted.
    assert list(lc.fit_capacity([1, 0, 0, 0], [1, 0, 0, 0], size, [10.0, 0.3])) == [0, 0, 0, 0]


def test_q_greedy_knapsack_takes_the_best_advantage_per_byte_within_capacity():
    env = fake_env(4)
    model = ql.QModel(2, 5)
    model.w[1] = [1.0, 0.0, 0.0, 0.0]  # worth its decayed access share on the fast tier
    model.w_move = 0.0
    obs = observation([0, 0, 0, 0], [0] * 4, [0.4, 0.3, 0.2, 0.1], [0.4, 0.2, 0.2, 0.2])
    view = lc.ObsView(env, obs)
    cost = np.zeros(2)
    # Densities 1, 1.5, 1, 0.5: region 1 first, then 0 does not fit in 0.55, then 2.
    action, q = model.greedy(view, [10.0, 0.55], cost)
    assert list(action) == [0, 1, 1, 0]
    assert q == pytest.approx(model.q(view, action, cost))
    assert q == pytest.approx(0.3 + 0.2)
    # Nothing is placed where the advantage is not positive.
    model.w[1] = [-1.0, 0, 0, 0]
    assert list(model.greedy(view, [10.0, 0.55], cost)[0]) == [0, 0, 0, 0]
    # A migration cost keeps a region where it is: region 0 already on the fast tier wins
    # over region 1 (denser, but it would have to move).
    model.w[1] = [1.0, 0, 0, 0]
    model.w_move = -1.0
    stay = lc.ObsView(env, observation([1, 0, 0, 0], [0] * 4, [0.4, 0.3, 0.2, 0.1],
                                       [0.4, 0.2, 0.2, 0.2]))
    assert list(model.greedy(stay, [10.0, 0.45], np.array([1.0, 1.0]))[0]) == [1, 0, 0, 0]


def test_q_greedy_on_a_batch_equals_one_view_at_a_time():
    env = fake_env(6)
    rng = np.random.default_rng(3)
    model = ql.QModel(2, 5, w=[[0, 0, 0, 0], rng.normal(size=4)], w_move=-0.5)
    obs = np.stack([observation(rng.integers(0, 2, 6), rng.random(6) / 6, rng.random(6) / 6,
                                np.full(6, 1 / 6)) for _ in range(5)])
    cap = np.array([[10.0, c] for c in (0.2, 0.4, 0.5, 0.9, 0.0)])
    cost = np.array([[0.3, 0.3]] * 5)
    batch_actions, batch_q = model.greedy(lc.ObsView(env, obs), cap, cost)
    for i in range(5):
        a, q = model.greedy(lc.ObsView(env, obs[i]), cap[i], cost[i])
        assert list(a) == list(batch_actions[i]) and q == pytest.approx(batch_q[i])
        assert (lc.ObsView(env, obs[i]).size * a).sum() <= cap[i, 1] + 1e-9


def test_rllib_env_imports_without_ray():
    code = ("import sys; sys.modules['ray'] = None; "  # any import of ray now fails
            "import rllib_env; print(callable(rllib_env.env_creator))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=str(REPO / "agents_examples"))
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr


def test_rllib_env_maps_worker_index_to_a_server():
    cfg = {"addresses": ["tcp://a:1", "tcp://b:2"]}
    assert [rllib_env.server_address(cfg, i) for i in range(4)] == [
        "tcp://a:1", "tcp://b:2", "tcp://a:1", "tcp://b:2"]
    assert rllib_env.server_address({"addresses": "tcp://a:1,tcp://b:2"}, 3) == "tcp://b:2"
    ports = {"host": "node7", "base_port": 5555, "servers": 3}
    assert [rllib_env.server_address(ports, i) for i in (0, 1, 2, 3, 5)] == [
        "tcp://node7:5555", "tcp://node7:5556", "tcp://node7:5557", "tcp://node7:5555",
        "tcp://node7:5557"]
    assert rllib_env.server_address({}, 4) is None  # a private server per worker
    with pytest.raises(ValueError):
        rllib_env.server_address(cfg, -1)


# --- Against a server ----------------------------------------------------------------------

class EnvContext(dict):
    """What RLlib passes to an env_creator: the env_config dict plus worker attributes."""

    def __init__(self, config, worker_index, vector_index=0):
        super().__init__(config)
        self.worker_index = worker_index
        self.vector_index = vector_index


@needs_binary
def test_rllib_env_creator_connects_worker_to_its_server(server):
    ctx = EnvContext({"addresses": ["ipc:///nonexistent/x.sock", server.endpoint],
                      "tiergym": {"num_regions": 8, "steps": 4}, "timeout": 30}, worker_index=1)
    env = rllib_env.env_creator(ctx)
    try:
        assert env.endpoint == server.endpoint and env.num_regions == 8
        obs, info = env.reset(seed=0)
        assert obs in env.observation_space
    finally:
        env.close()


@needs_binary
def test_small_machine_makes_placement_matter(server):
    with tiergym.make(address=server, **small_config(8, 6)) as env:
        cap = lc.capacity_bytes(env)
        assert cap[1] == 512 * 2**20
        obs, info = env.reset(seed=0, options={"profile": "minife"})
        assert info["tier_used_bytes"].sum() > cap[1]  # the footprint does not fit
        assert lc.migration_gbps(env)[1] > 0


@needs_binary
def test_q_learning_beats_random_on_held_out_apps(server):
    """Deterministic (fixed seeds): 8 short episodes on minife and lulesh, then the greedy
    policy on nekbone and lammps. An untrained model places nothing (return 0), so beating
    random by a margin needs what was learnt."""
    with tiergym.make(address=server, **small_config(16, 12)) as env:
        learner = ql.QLearner(len(env.tiers), 5, seed=0)
        untrained = lc.evaluate(env, [ql.QLearningPolicy(learner.model)], HELD_OUT, [0])
        assert all(v == pytest.approx(0, abs=1e-12) for v in untrained["q_learning"].values())
        returns = learner.train(env, TRAIN, 8)
        assert len(returns) == 8 and all(np.isfinite(returns))
        table = lc.evaluate(env, [ql.QLearningPolicy(learner.model), lc.RandomPolicy(0)],
                            HELD_OUT, [0, 1])
        for app in HELD_OUT:
            assert table["q_learning"][app] > table["random"][app] + 0.03, table
        # Within capacity: the environment refused nothing.
        _, refused = episode_actions(env, ql.QLearningPolicy(learner.model), "lammps")
        assert refused == 0


@needs_binary
def test_q_learning_script_trains_saves_and_a_loaded_policy_acts_the_same(server, tmp_path):
    weights = tmp_path / "q.npz"
    common = [sys.executable, str(REPO / "agents_examples" / "q_learning.py"),
              "--address", server.endpoint, "--num-regions", "8", "--steps", "8",
              "--eval-seeds", "1"]
    out = subprocess.run(common + ["--episodes", "3", "--save", str(weights)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert len(re.findall(r"episode +\d+ +\w+ +epsilon [0-9.]+ +return [-+][0-9.]+",
                          out.stderr)) == 3
    for app in HELD_OUT:
        assert re.search(rf"held out {app}: q_learning [-+][0-9.]+ vs random [-+][0-9.]+",
                         out.stdout), out.stdout
    assert weights.is_file()
    loaded_out = subprocess.run(common + ["--load", str(weights)], capture_output=True,
                                text=True, timeout=300)
    assert loaded_out.returncode == 0, loaded_out.stderr
    table = lambda s: [l for l in s.splitlines() if "(train)" in l or "(held out)" in l]
    assert table(loaded_out.stdout) == table(out.stdout)  # same weights, same episodes

    policy = ql.load_policy(str(weights))
    again = ql.load_policy(str(weights))
    assert policy.name == "q_learning" and policy.settings["episodes"] == 3
    with tiergym.make(address=server, **small_config(8, 8)) as env:
        a, _ = episode_actions(env, policy, "nekbone")
        b, _ = episode_actions(env, again, "nekbone")
        assert all(np.array_equal(x, y) for x, y in zip(a, b))
        assert all(x in env.action_space for x in a)


def test_q_learning_load_refuses_weights_of_other_features(tmp_path):
    path = tmp_path / "bad.npz"
    np.savez(path, w=np.zeros((2, 3)), w_move=0.0, theta=np.zeros(5), settings="{}",
             gain_features=np.array(["a", "b", "c"]))
    with pytest.raises(ValueError, match="features"):
        ql.load_policy(str(path))


# --- PPO -----------------------------------------------------------------------------------

def test_ppo_script_without_torch_says_so_and_exits_0():
    script = str(REPO / "agents_examples" / "ppo_torch.py")
    code = ("import sys, runpy; sys.modules['torch'] = None; "  # any import of torch fails
            f"sys.argv = ['ppo_torch.py']; runpy.run_path({script!r}, run_name='__main__')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=str(REPO / "agents_examples"))
    assert out.returncode == 0, out.stderr
    assert "torch is not installed" in out.stdout and "tiergym[torch]" in out.stdout


@needs_binary
def test_ppo_trains_saves_and_a_loaded_policy_acts_the_same(server, tmp_path):
    ppo_torch.torch.set_num_threads(1)
    config = small_config(8, 8)
    with tiergym.VectorEnv(2, address=server, autoreset_mode="same_step",
                           profiles=",".join(TRAIN), **config) as envs:
        envs.tiers = list(envs.tier_spec["tiers"])
        envs.num_regions = int(envs.tier_spec["num_regions"])
        ppo = ppo_torch.PPO(envs, seed=0, lr=1e-3)
        before = [p.detach().clone() for p in ppo.net.parameters()]
        finished = ppo.train(2, 8)
        assert len(finished) == 4  # 2 envs x 16 steps of 8-step episodes
        assert {p for p, _ in finished} <= set(TRAIN)
        assert any(not ppo_torch.torch.equal(a, b) for a, b in zip(before, ppo.net.parameters()))
        path = tmp_path / "ppo.pt"
        ppo_torch.save(str(path), ppo.net, {"train": TRAIN})
        trained = ppo_torch.PPOPolicy(ppo.net, seed=5)
    loaded = ppo_torch.load_policy(str(path), seed=5)
    assert loaded.name == "ppo" and loaded.settings == {"train": TRAIN}
    with tiergym.make(address=server, **config) as env:
        for app in HELD_OUT:
            a, refused_a = episode_actions(env, trained, app)
            b, refused_b = episode_actions(env, loaded, app)
            assert all(np.array_equal(x, y) for x, y in zip(a, b))
            assert refused_a == refused_b == 0  # requests granted within capacity
        greedy = ppo_torch.load_policy(str(path), greedy=True)
        g1, _ = episode_actions(env, greedy, "lammps")
        g2, _ = episode_actions(env, greedy, "lammps")
        assert all(np.array_equal(x, y) for x, y in zip(g1, g2))


@needs_binary
def test_ppo_learns_to_beat_random_on_held_out_apps(server):
    """Deterministic (seeded torch, environments and sampling): 15 updates of 4 x 12 steps
    on minife and lulesh (about 2 s), then the sampled policy on nekbone and lammps, three
    episodes each, against the untrained network and random."""
    ppo_torch.torch.set_num_threads(1)
    config = small_config(16, 12)
    with tiergym.make(address=server, **config) as env, tiergym.VectorEnv(
            4, address=server, autoreset_mode="same_step", profiles=",".join(TRAIN),
            **config) as envs:
        envs.tiers = list(envs.tier_spec["tiers"])
        envs.num_regions = int(envs.tier_spec["num_regions"])
        ppo = ppo_torch.PPO(envs, seed=0, lr=3e-3)
        seeds = [0, 1, 2]
        before = lc.evaluate(env, [ppo_torch.PPOPolicy(ppo.net, seed=1)], HELD_OUT, seeds)
        ppo.train(15, 12)
        after = lc.evaluate(env, [ppo_torch.PPOPolicy(ppo.net, seed=1)], HELD_OUT, seeds)
        rand = lc.evaluate(env, [lc.RandomPolicy(1)], HELD_OUT, seeds)
        for app in HELD_OUT:
            assert after["ppo"][app] > rand["random"][app] + 0.03, (after, rand)
            assert after["ppo"][app] > before["ppo"][app] + 0.03, (after, before)


@needs_binary
def test_ppo_script_runs_end_to_end(server):
    out = subprocess.run([sys.executable, str(REPO / "agents_examples" / "ppo_torch.py"),
                          "--address", server.endpoint, "--num-regions", "8", "--steps", "8",
                          "--updates", "1", "--envs", "2", "--horizon", "8",
                          "--eval-seeds", "1"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert re.search(r"update +0 +episodes ", out.stderr), out.stderr
    for app in HELD_OUT:
        assert re.search(rf"held out {app}: ppo [-+][0-9.]+ vs random [-+][0-9.]+", out.stdout)
