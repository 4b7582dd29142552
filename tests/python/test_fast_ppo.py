"""agents_examples/fast_ppo.py, the single-file masked PPO: a short run learns (against random
and against its untrained self, on the default task), a seed gives the same curve whatever
the threads' timing, the per-region policy is permutation-equivariant, the masks, the
evaluation is learning_benchmark.py's, and the Ray workers step as the in-process
environment does. Seconds each."""

import dataclasses

import numpy as np
import pytest
import torch

import fast_ppo
import learning_benchmark
import tiergym

from tiergym_testing import needs_binary

# Evaluated on the training applications only: every environment made loads its profiles
# (about a second each), and the suite's budget is seconds.
SMALL = dict(num_envs=64, num_steps=16, quiet=True, eval_every=4096, held_out="")


@pytest.fixture(scope="module")
def references():
    """The oracle's and random's returns (placement mode, a private server)."""
    refs = fast_ppo.reference_returns(fast_ppo.Args(held_out=""), names=("random",))
    return refs.pop("oracle"), refs["random"]


@needs_binary
@pytest.mark.parametrize("policy,overlap_update", [("mlp", True), ("regions", True),
                                                   ("mlp", False)])
def test_a_short_run_learns_against_random_and_its_untrained_self(references, policy,
                                                                    overlap_update):
    # overlap_update (the training-speed benchmark's fast path): each update runs beside
    # the next rollout, which acts with the weights of the update before; False (the
    # default): rollout and update in turn.
    oracle, random_returns = references
    args = fast_ppo.Args(total_steps=24_576, policy=policy, seed=3,
                         overlap_update=overlap_update, **SMALL)
    _, metrics = fast_ppo.train(args, oracle=oracle)
    curve = metrics["curve"]
    untrained, best = curve[0]["train"], max(p["train"] for p in curve[1:])
    random_score = fast_ppo.fraction_of_oracle(random_returns, oracle, ["minife", "lulesh"])
    assert metrics["steps"] >= 24_576
    assert best > 0.8, curve
    assert best > untrained + 0.1, curve
    assert best > random_score + 0.5, (curve, random_score)


def test_a_seed_gives_the_same_run_whatever_the_threads_timing_and_the_overlap():
    # Two halves stepped in turn with send/recv on two threads, twice, and all environments
    # stepped together with step(): the same environments see the same actions in the
    # same order, so the same curve and the same weights.
    args = fast_ppo.Args(total_steps=4096, seed=5, env_threads=2, **SMALL)
    runs = [fast_ppo.train(args), fast_ppo.train(dataclasses.replace(args)),
            fast_ppo.train(dataclasses.replace(args, overlap=False))]
    curves = [[p["returns"] for p in m["curve"]] for _, m in runs]
    assert curves[0] == curves[1] == curves[2]
    # The update overlapped with the next rollout (on a thread of its own) follows a fixed
    # schedule, so its timing does not matter either; it is another run (a policy lag).
    overlapped = [fast_ppo.train(dataclasses.replace(args, overlap_update=True))
                  for _ in range(2)]
    overlapped_curves = [[p["returns"] for p in m["curve"]] for _, m in overlapped]
    assert overlapped_curves[0] == overlapped_curves[1] != curves[0]
    assert curves[0][0] != curves[0][-1]  # it learnt something: the curve is not flat
    for policy, _ in runs[1:]:
        for (name, x), (_, y) in zip(runs[0][0].state_dict().items(),
                                     policy.state_dict().items()):
            assert torch.equal(x, y), name


def make_layout():
    envs = tiergym.InProcessVectorEnv(1, **tiergym.DEFAULT_TASK, profiles="minife")
    try:
        return (fast_ppo.Layout(envs.tier_spec, envs.num_regions, envs.single_action_space),
                envs.single_observation_space.shape[0])
    finally:
        envs.close()


def test_the_region_policy_is_permutation_equivariant():
    layout, obs_size = make_layout()
    torch.manual_seed(0)
    policy = fast_ppo.RegionPolicy(layout, obs_size, 16)
    obs = torch.rand(5, obs_size)
    perm = torch.randperm(layout.regions)
    regions, globals_ = layout.split(obs)
    permuted = torch.cat([regions[:, perm].reshape(5, -1), globals_], dim=1)
    with torch.no_grad():
        logits, value = policy(obs)
        logits_p, value_p = policy(permuted)
    torch.testing.assert_close(logits_p, logits[:, perm])
    torch.testing.assert_close(value_p, value)
    # the flat MLP is not (its weights are per position)
    flat = fast_ppo.FlatPolicy(layout, obs_size, 16)
    with torch.no_grad():
        assert not torch.allclose(flat(permuted)[1], flat(obs)[1])


def test_masks_from_followed_profiles_equal_masks_from_the_names():
    # The rollout keeps each environment's profile and updates it where an episode ended
    # (Masks.follow); across resets that draw other profiles, its masks are the ones
    # looked up from the infos' names.
    envs = tiergym.InProcessVectorEnv(6, **tiergym.DEFAULT_TASK, profiles="minife,lulesh",
                                      batch_size=3, autoreset_mode=tiergym.SAME_STEP)
    try:
        masks = fast_ppo.Masks("region", envs.tier_spec)
        obs, info = envs.reset(seed=3)
        env_profiles = masks.profiles(info)
        rng = np.random.default_rng(0)
        halves = [np.arange(3, dtype=np.int32), np.arange(3, 6, dtype=np.int32)]
        ended_rows, changed = 0, 0
        for step in range(230):
            envs.send(rng.integers(0, 3, (3, 16)), halves[step % 2])
            obs, _, terminated, truncated, info = envs.recv()
            ended = terminated | truncated
            before = env_profiles.copy()
            followed = masks.follow(env_profiles, info, ended)
            np.testing.assert_array_equal(followed, masks.profiles(info))
            np.testing.assert_array_equal(masks(info, followed), masks(info))
            ended_rows += int(ended.sum())
            changed += int((before != env_profiles).sum())
        assert ended_rows >= 6 and changed > 0  # episodes ended, some in another profile
    finally:
        envs.close()


def test_region_masks_allow_each_move_that_fits_alone():
    envs = tiergym.InProcessVectorEnv(8, **tiergym.DEFAULT_TASK, profiles="minife,lulesh")
    try:
        obs, info = envs.reset(seed=1)
        masks = fast_ppo.Masks("region", envs.tier_spec)
        rng = np.random.default_rng(0)
        spec = envs.tier_spec
        sizes = spec["region_bounds"][..., 1] - spec["region_bounds"][..., 0]
        capacity = spec["tier_capacity_bytes"]
        stricter = 0
        for _ in range(20):
            m = masks(info)
            joint = info["action_mask"].astype(bool)
            assert m.shape == joint.shape == (8, 16, 3)
            assert (m | ~joint).all()  # everything the joint mask allows
            assert m[:, :, 0].all()    # keep
            for i in range(8):
                p = spec["profiles"].index(info["profile"][i])
                free = capacity - info["tier_used_bytes"][i]
                for t in range(2):
                    fits = sizes[p] <= free[t]
                    np.testing.assert_array_equal(m[i, :, 1 + t], fits | joint[i, :, 1 + t])
            stricter += int((m & ~joint).sum())
            actions = np.where(m[..., 2] & (rng.random((8, 16)) < 0.3), 2,
                               np.where(rng.random((8, 16)) < 0.2, 1, 0))
            obs, _, _, _, info = envs.step(actions)
        assert stricter > 0  # the joint mask forbade moves that fit alone
        assert fast_ppo.Masks("none", spec)(info).all()
        np.testing.assert_array_equal(fast_ppo.Masks("joint", spec)(info),
                                      info["action_mask"].astype(bool))
    finally:
        envs.close()


def test_masked_sampling_log_probabilities_and_entropy_against_plain_formulas():
    # The rollout's and the update's masking (additive offsets, choices first), Gumbel-max
    # sampling from numpy's noise, and the softmax-based entropy, against the textbook
    # forms over [B, K, C]: a masked choice is never sampled, has probability 0 and adds
    # nothing to the entropy, and the sampled frequencies follow the probabilities.
    rng = np.random.default_rng(0)
    b, k, c = 4000, 5, 3
    mask = rng.random((b, k, c)) < 0.6
    mask[:, :, 0] = True  # keep is always allowed
    logits = torch.randn(b, k, c) * 3
    z = fast_ppo.masked_logits(logits, torch.from_numpy(fast_ppo.mask_offsets(mask)))
    logp = z.log_softmax(dim=1)                                         # [B, C, K]
    p = torch.where(torch.from_numpy(mask), logits, torch.tensor(-torch.inf)).softmax(-1)
    torch.testing.assert_close(logp.exp().transpose(1, 2), p)
    plain = -torch.nan_to_num(p * p.log()).sum((1, 2))
    torch.testing.assert_close(fast_ppo.entropy_of(z, logp), plain)
    counts = np.zeros((k, c))
    for _ in range(50):
        a = (logp + fast_ppo.gumbel_noise(rng, logp.shape)).max(dim=1).indices.numpy()
        assert mask[np.arange(b)[:, None], np.arange(k), a].all()
        counts += (a[:, :, None] == np.arange(c)).sum(0)
    np.testing.assert_allclose(counts / (50 * b), p.mean(0).numpy(), atol=0.01)


def test_a_saved_policy_loads_the_same_and_older_saves_are_reordered(tmp_path):
    # A --save loads to the same outputs; a flat policy saved before its actor's outputs
    # were laid out choices first (rows region by region, no "actor_layout") loads to the
    # logits it gave then.
    layout, obs_size = make_layout()
    args = fast_ppo.Args(hidden=16)
    torch.manual_seed(2)
    policy = fast_ppo.FlatPolicy(layout, obs_size, 16)
    obs = torch.rand(4, obs_size)
    with torch.no_grad():
        logits, value = policy(obs)
    state = policy.state_dict()
    torch.save({"args": dataclasses.asdict(args), "state_dict": state,
                "actor_layout": "choices_first"}, tmp_path / "new.pt")
    k, c = layout.regions, layout.choices
    old = dict(state)  # the old layout: output r * C + choice held (region r, choice)
    for name in ("actor.weight", "actor.bias"):
        x = state[name]
        old[name] = x.reshape(c, k, -1).transpose(0, 1).reshape(x.shape)
    torch.save({"args": dataclasses.asdict(args), "state_dict": old}, tmp_path / "old.pt")
    h = policy.trunk(obs).detach()
    old_logits = (h @ old["actor.weight"].T + old["actor.bias"]).view(4, k, c)
    torch.testing.assert_close(old_logits, logits)  # what the old forward gave
    for name in ("new.pt", "old.pt"):
        loaded, _ = fast_ppo.load_policy(str(tmp_path / name))
        with torch.no_grad():
            got_logits, got_value = loaded(obs)
        torch.testing.assert_close(got_logits, logits)
        torch.testing.assert_close(got_value, value)


@needs_binary
def test_the_evaluation_is_learning_benchmarks():
    # The in-process evaluation (every application side by side) gives the returns of
    # learning_benchmark.evaluate_predict (policies.run_episode on a TierEnv through a
    # server) for the same deterministic policy.
    args = fast_ppo.Args(mask="none")
    layout, obs_size = make_layout()
    torch.manual_seed(1)
    policy = fast_ppo.FlatPolicy(layout, obs_size, 32)
    evaluator = fast_ppo.Evaluator(args, ["lulesh", "nekbone"])
    env = tiergym.TierEnv(**tiergym.DEFAULT_TASK)
    try:
        ours = evaluator(policy)

        def predict(obs):
            return fast_ppo.greedy_actions(policy, obs[None], np.ones((1, 16, 3), bool))[0]

        theirs = learning_benchmark.evaluate_predict(env, predict, list(ours))
        assert ours == pytest.approx(theirs, abs=1e-12)
    finally:
        env.close()
        evaluator.close()


def test_arguments_are_checked_with_the_flag_named():
    for flags, words in ((["--policy", "cnn"], "--policy"), (["--num-envs", "3"], "even"),
                         (["--num-minibatches", "3"], "divide"), (["--mask", "x"], "--mask"),
                         (["--config", "nokey"], "KEY=VALUE"),
                         (["--ema-decay", "1"], "--ema-decay")):
        with pytest.raises(SystemExit) as e:
            fast_ppo.parse_args(flags)
        assert e.value.code == 2
    args = fast_ppo.parse_args(["--no-overlap", "--total-steps", "10", "--policy", "regions"])
    assert args.overlap is False and args.total_steps == 10 and args.policy == "regions"


class FakeRay:
    """Ray's calls as RayVectorEnv makes them, run in this process: actors are local objects,
    .remote() calls them at once, get() returns the results. Starting Ray takes longer than
    the suite's budget allows; the benchmark runs the real thing (README)."""

    class _Handle:
        def __init__(self, obj):
            self.obj = obj

        def __getattr__(self, name):
            method = getattr(self.obj, name)
            return type("Method", (), {"remote": staticmethod(method)})

    def __init__(self):
        self.killed = 0
        self.started = False

    def is_initialized(self):
        return True

    def remote(self, num_cpus=None):
        def wrap(cls):
            return type("Actor", (), {"remote": staticmethod(
                lambda *a, **k: FakeRay._Handle(cls(*a, **k)))})
        return wrap

    def get(self, refs):
        return refs

    def kill(self, handle):
        handle.obj.envs.close()
        self.killed += 1


def test_ray_workers_step_as_the_in_process_environment(monkeypatch):
    fake = FakeRay()
    monkeypatch.setitem(__import__("sys").modules, "ray", fake)
    args = fast_ppo.Args(num_envs=8, ray_workers=2, quiet=True)
    config = dict(fast_ppo.task_config(args), profiles="minife,lulesh")
    remote = fast_ppo.RayVectorEnv(args, config)
    local = tiergym.InProcessVectorEnv(8, autoreset_mode=tiergym.SAME_STEP, **config)
    try:
        ro, ri = remote.reset(seed=4)
        lo, li = local.reset(seed=4)
        np.testing.assert_array_equal(ro, lo)
        np.testing.assert_array_equal(ri["action_mask"], li["action_mask"])
        rng = np.random.default_rng(1)
        # two halves that each span both workers, sent before either is received
        halves = [np.array([0, 1, 4, 5], np.int32), np.array([2, 3, 6, 7], np.int32)]
        for t in range(105):  # an episode's end included
            actions = rng.integers(0, 3, size=(8, 16))
            want = local.step(actions)
            for h in halves:
                remote.send(actions[h], h)
            for h in halves:
                out = remote.recv()
                order = np.argsort(out[4]["env_id"])
                assert (out[4]["env_id"][order] == h).all()
                for i in range(4):
                    np.testing.assert_array_equal(out[i][order], want[i][h])
                for key in ("action_mask", "tier_used_bytes", "profile"):
                    np.testing.assert_array_equal(out[4][key][order], want[4][key][h])
    finally:
        remote.close()
        local.close()
    assert fake.killed == 2


@needs_binary
def test_a_split_of_tiergym_datasets_trains_and_is_scored(capsys):
    """--train and --held-out take splits of tiergym.datasets (their applications by name,
    served from the split's profile directories), as the command line runs them."""
    assert fast_ppo.app_names("procedural-test-v1:2,minife") == [
        "procedural-v1-1000000", "procedural-v1-1000001", "minife"]
    assert fast_ppo.main(["--train", "procedural-train-v1:2", "--held-out",
                          "procedural-test-v1:1", "--config", "observation=relative",
                          "--policy", "regions", "--num-envs", "8", "--num-steps", "4",
                          "--total-steps", "32", "--eval-every", "32", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "last evaluation: train" in out and "held out" in out


def test_argmax_choices_equals_max_indices():
    gen = torch.Generator().manual_seed(0)
    for c in (1, 2, 3, 5):
        x = torch.randn((64, c, 16), generator=gen)
        torch.testing.assert_close(fast_ppo.argmax_choices(x), x.max(dim=1).indices)
    x = torch.zeros((4, 3, 16))
    x[:, 1] = -1e9  # a masked choice never wins; ties go to the first
    assert (fast_ppo.argmax_choices(x) == 0).all()


def test_the_weight_average_is_the_decayed_mean_of_the_updates_weights():
    # After update k: sum_j d^(k-j) theta_j / sum_j d^(k-j) over the updates' weights
    # theta_1..theta_k (the initial weights left out), for every parameter.
    torch.manual_seed(0)
    learner = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    average = fast_ppo.WeightAverage(learner, 0.7)
    seen = []
    for _ in range(6):
        with torch.no_grad():
            for p in learner.parameters():
                p.add_(torch.randn_like(p))
        seen.append([p.detach().clone() for p in learner.parameters()])
        average.update(learner)
        k = len(seen)
        weights = [0.7 ** (k - j) for j in range(1, k + 1)]
        for i, got in enumerate(average.policy.parameters()):
            want = sum(w * s[i] for w, s in zip(weights, seen)) / sum(weights)
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
            assert not got.requires_grad
    assert seen[0][0].shape == (4, 3)
    assert not torch.equal(next(average.policy.parameters()), seen[-1][0])  # not the last


def test_with_a_weight_average_a_seed_repeats_and_the_learner_is_unchanged():
    # --ema-decay evaluates the average; the learner (which acts) is trained exactly as
    # without it, so its returns (learner_returns) are the plain run's curve; a seed gives
    # the same run twice; the policy returned is the average, not the learner.
    args = fast_ppo.Args(total_steps=4096, seed=5, **SMALL)
    plain_policy, plain = fast_ppo.train(args)
    averaged = [fast_ppo.train(dataclasses.replace(args, ema_decay=0.5)) for _ in range(2)]
    curves = [[(p["returns"], p.get("learner_returns")) for p in m["curve"]]
              for _, m in averaged]
    assert curves[0] == curves[1]
    learner = [p["learner_returns"] for p in averaged[0][1]["curve"][1:]]
    assert learner == [p["returns"] for p in plain["curve"][1:]]
    assert [p["returns"] for p in averaged[0][1]["curve"][1:]] != learner
    for (name, x), (_, y) in zip(averaged[0][0].state_dict().items(),
                                 averaged[1][0].state_dict().items()):
        assert torch.equal(x, y), name
    assert not all(torch.equal(x, y) for x, y in zip(averaged[0][0].state_dict().values(),
                                                     plain_policy.state_dict().values()))


def test_select_best_ends_with_the_best_scoring_checkpoint():
    # The curve's evaluations as without it, then a last point at the budget repeating the
    # returns of the evaluation that scored best (selected_steps); the policy returned
    # gives those returns again; the run's learner is the plain run's.
    args = fast_ppo.Args(total_steps=4096, seed=5, **dict(SMALL, eval_every=1024))

    def score(point):  # any score of a point; here the negated total, so not the last
        return -sum(point["returns"].values())

    _, plain = fast_ppo.train(args)
    policy, picked = fast_ppo.train(dataclasses.replace(args, select_best=True), score=score)
    curve = picked["curve"]
    assert [p["returns"] for p in curve[:-1]] == [p["returns"] for p in plain["curve"]]
    best = max(curve[1:-1], key=score)
    assert curve[-1]["selected_steps"] == best["steps"] == picked["selected_steps"]
    assert curve[-1]["returns"] == best["returns"] and curve[-1]["steps"] == curve[-2]["steps"]
    evaluator = fast_ppo.Evaluator(args, fast_ppo.app_names(args.train))
    try:
        assert evaluator(policy) == best["returns"]
    finally:
        evaluator.close()
    with pytest.raises(ValueError, match="select-best"):
        fast_ppo.train(dataclasses.replace(args, select_best=True))  # no oracle, no score


def test_a_checkpoint_scored_nan_ranks_last():
    # A train set whose oracle saves nothing scores NaN; NaN compares false both ways, so
    # it must not take (or scramble) the place of a scored checkpoint.
    args = fast_ppo.Args(total_steps=4096, seed=5, **dict(SMALL, eval_every=1024))

    def score(point):  # the first evaluation unscored, the others by their negated total
        return float("nan") if point["steps"] == 1024 else -sum(point["returns"].values())

    _, picked = fast_ppo.train(dataclasses.replace(args, select_best=True), score=score)
    scored = [p for p in picked["curve"][1:-1] if p["steps"] != 1024]
    assert picked["selected_steps"] == max(scored, key=score)["steps"]
    _, unscored = fast_ppo.train(dataclasses.replace(args, select_best=True),
                                 score=lambda point: float("nan"))
    assert unscored["selected_steps"] == 1024  # all alike: the earliest


def test_target_kl_off_is_the_plain_run_and_a_tiny_one_stops_after_a_minibatch():
    # --target-kl 0 (the default) and a target no update reaches give the plain run bit
    # for bit (the KL is measured without touching the weights or the generators); a tiny
    # target stops every update at its second minibatch (the first's KL is the acting
    # policy's against itself, ~0, so its step is taken), so one step an update of the 8
    # (2 epochs x 4 minibatches), and another run; each update's approx_kl is reported.
    args = fast_ppo.Args(total_steps=4096, seed=5, **dict(SMALL, eval_every=1024))
    plain_policy, plain = fast_ppo.train(args)
    far_policy, far = fast_ppo.train(dataclasses.replace(args, target_kl=1e9))
    tiny_policy, tiny = fast_ppo.train(dataclasses.replace(args, target_kl=1e-9))
    assert [p["returns"] for p in far["curve"]] == [p["returns"] for p in plain["curve"]]
    for (name, x), (_, y) in zip(plain_policy.state_dict().items(),
                                 far_policy.state_dict().items()):
        assert torch.equal(x, y), name
    assert all(p["minibatches"] == 8 for p in plain["curve"][1:])
    assert all(p["approx_kl"] > 1e-9 for p in plain["curve"][1:])
    assert [p["minibatches"] for p in tiny["curve"][1:]] == [1] * (len(tiny["curve"]) - 1)
    assert all(p["approx_kl"] > 1e-9 for p in tiny["curve"][1:])  # what stopped it
    assert [p["kl_stops"] for p in tiny["curve"][1:]] == list(range(1, len(tiny["curve"])))
    assert all(p["kl_stops"] == 0 for p in plain["curve"][1:])
    assert not all(torch.equal(x, y) for x, y in zip(plain_policy.state_dict().values(),
                                                     tiny_policy.state_dict().values()))
    with pytest.raises(SystemExit):
        fast_ppo.parse_args(["--target-kl", "-1"])


def test_an_ensemble_acts_by_the_mean_of_its_members_masked_probabilities():
    # Three policies of different weights on observations of the default task: the
    # ensemble's probabilities are the mean of each member's softmax over its allowed
    # choices (not the softmax of the mean logits, nor a masked mean of unmasked ones),
    # greedy_actions takes their argmax, and one member's ensemble acts as the member.
    envs = tiergym.InProcessVectorEnv(8, threads=1, **tiergym.DEFAULT_TASK,
                                      profiles="minife,lulesh")
    try:
        layout = fast_ppo.Layout(envs.tier_spec, envs.num_regions, envs.single_action_space)
        obs_size = envs.single_observation_space.shape[0]
        masks = fast_ppo.Masks("region", envs.tier_spec)
        obs, info = envs.reset(seed=1)
        for _ in range(2):  # every region moved up where it fits: some moves no longer do
            mask = masks(info, masks.profiles(info))
            obs, _, _, _, info = envs.step(mask.shape[-1] - 1 - np.argmax(
                mask[..., ::-1], axis=-1))
        mask = masks(info, masks.profiles(info))
    finally:
        envs.close()
    torch.manual_seed(0)
    members = [fast_ppo.RegionPolicy(layout, obs_size, 16) for _ in range(3)]
    with torch.no_grad():
        for m in members:  # logits far from uniform, so the members disagree
            m.head.weight.mul_(300)
    obs_t, allowed = torch.as_tensor(obs), torch.as_tensor(mask, dtype=torch.bool)
    assert not allowed.all() and allowed.any(dim=-1).all()
    ensemble = fast_ppo.Ensemble(members)
    with torch.no_grad():
        each = []
        for m in members:
            logits = m(obs_t)[0].double()
            p = torch.where(allowed, logits.exp(), 0.0)
            each.append(p / p.sum(dim=-1, keepdim=True))
        want = sum(each) / 3
        got = ensemble.probabilities(obs_t, allowed)
    torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-6)
    assert (got[~allowed] == 0).all()
    np.testing.assert_array_equal(fast_ppo.greedy_actions(ensemble, obs, mask),
                                  want.argmax(dim=-1).numpy())
    greedy_each = [fast_ppo.greedy_actions(m, obs, mask) for m in members]
    assert not all((g == greedy_each[0]).all() for g in greedy_each[1:])  # they disagree
    for m, g in zip(members, greedy_each):
        np.testing.assert_array_equal(fast_ppo.greedy_actions(fast_ppo.Ensemble([m]), obs, mask), g)
    with pytest.raises(ValueError, match="member"):
        fast_ppo.Ensemble([])


def test_ensemble_top_delivers_the_mean_of_the_best_checkpoints_and_1_is_select_best(tmp_path):
    # The curve's evaluations as without it; a last point at the budget with the returns
    # of the ensemble of the K best-scoring checkpoints (ensemble_steps, best first),
    # which the policy returned (and the one saved and loaded) gives again. K=1 is
    # select_best: the same last point and the same weights.
    args = fast_ppo.Args(total_steps=4096, seed=5, **dict(SMALL, eval_every=1024))

    def score(point):  # the negated total, so not the last ones
        return -sum(point["returns"].values())

    _, plain = fast_ppo.train(args)
    saved = tmp_path / "ens.pt"
    policy, ens = fast_ppo.train(dataclasses.replace(args, ensemble_top=3, save=str(saved)),
                                 score=score)
    curve = ens["curve"]
    assert [p["returns"] for p in curve[:-1]] == [p["returns"] for p in plain["curve"]]
    ranked = sorted(curve[1:-1], key=lambda p: -score(p))[:3]
    assert curve[-1]["ensemble_steps"] == [p["steps"] for p in ranked] == ens["ensemble_steps"]
    assert curve[-1]["steps"] == curve[-2]["steps"] and "selected_steps" not in curve[-1]
    assert isinstance(policy, fast_ppo.Ensemble) and len(policy.members) == 3
    loaded, _ = fast_ppo.load_policy(str(saved))
    evaluator = fast_ppo.Evaluator(args, fast_ppo.app_names(args.train))
    try:
        assert evaluator(policy) == curve[-1]["returns"] == evaluator(loaded)
    finally:
        evaluator.close()
    one, top1 = fast_ppo.train(dataclasses.replace(args, ensemble_top=1), score=score)
    best, picked = fast_ppo.train(dataclasses.replace(args, select_best=True), score=score)
    def points(metrics):
        return [(p["steps"], p["returns"], p.get("selected_steps")) for p in metrics["curve"]]

    assert points(top1) == points(picked) and top1["selected_steps"] == picked["selected_steps"]
    for (name, x), (_, y) in zip(one.state_dict().items(), best.state_dict().items()):
        assert torch.equal(x, y), name
    with pytest.raises(ValueError, match="ensemble-top"):
        fast_ppo.train(dataclasses.replace(args, ensemble_top=3))  # no oracle, no score
    with pytest.raises(ValueError, match="ensemble-top"):
        fast_ppo.train(dataclasses.replace(args, ensemble_top=2, select_best=True), score=score)


def test_the_target_head_keeps_a_region_by_its_current_tiers_logit():
    # regions-target: one logit per tier; keep takes the logit of the tier the region is on
    # (its first feature, tier / (tiers - 1)), a move to that tier is masked, a move to
    # another tier takes that tier's logit. Checked against the shared trunk's own outputs.
    layout, obs_size = make_layout()
    torch.manual_seed(0)
    policy = fast_ppo.TargetRegionPolicy(layout, obs_size, 16)
    obs = torch.rand(6, obs_size)
    regions = obs[:, :layout.global_offset].view(6, layout.regions, layout.features)
    regions[..., 0] = (torch.rand(6, layout.regions) < 0.5).float()   # two tiers: 0 or 1
    with torch.no_grad():
        logits, value = policy(obs)
        wanted, value_ = fast_ppo.RegionPolicy.forward(policy, obs)
    assert logits.shape == (6, layout.regions, layout.choices)
    current = regions[..., 0].long()
    torch.testing.assert_close(logits[..., 0], wanted.gather(-1, current[..., None])[..., 0])
    moves = logits[..., 1:]
    assert (moves.gather(-1, current[..., None]) == fast_ppo.MASKED).all()
    other = 1 - current
    torch.testing.assert_close(moves.gather(-1, other[..., None]),
                               wanted.gather(-1, other[..., None]))
    torch.testing.assert_close(value, value_)


def test_the_clipped_surrogate_per_region_clips_each_region_alone():
    # One region: the per-region loss is the joint one. Two regions whose ratios 1.15 and
    # 1.15 are each within the clip (0.2) but whose product 1.3225 is not: with a positive
    # advantage the joint loss is clipped (no gradient), the per-region one is not.
    adv = torch.tensor([1.0, -0.5])
    r = torch.tensor([[1.1], [0.7]])
    torch.testing.assert_close(fast_ppo.clipped_surrogate(adv, r, 0.2),
                               fast_ppo.clipped_surrogate(adv, r[:, 0], 0.2))
    logr = torch.full((1, 2), float(np.log(1.15)), requires_grad=True)
    joint = fast_ppo.clipped_surrogate(torch.ones(1), logr.sum(1).exp(), 0.2)
    joint.backward()
    assert torch.count_nonzero(logr.grad) == 0 and joint.item() == pytest.approx(-1.2)
    logr.grad = None
    per_region = fast_ppo.clipped_surrogate(torch.ones(1), logr.exp(), 0.2)
    per_region.backward()
    assert per_region.item() == pytest.approx(-2.3)
    torch.testing.assert_close(logr.grad, torch.full((1, 2), -1.15))


def test_explored_regions_sample_and_the_others_take_their_most_likely_choice():
    # choose(): where a region is not explored its choice is the most likely one, where it
    # is, the Gumbel-max sample (so different choices where the noise outweighs the gap).
    rng = np.random.default_rng(1)
    logp = torch.randn(500, 3, 4).log_softmax(dim=1)
    noise = fast_ppo.gumbel_noise(rng, logp.shape)
    explored = torch.from_numpy((rng.random((500, 4)) < 0.3).astype(np.float32))
    a = fast_ppo.choose(logp, noise, explored)
    most_likely, sampled = logp.argmax(dim=1), (logp + noise).argmax(dim=1)
    assert torch.equal(a[explored == 0], most_likely[explored == 0])
    assert torch.equal(a[explored > 0], sampled[explored > 0])
    assert not torch.equal(sampled, most_likely)
    assert torch.equal(fast_ppo.choose(logp, noise), sampled)
    # --explore-regions 1: every region samples (the per-region run); a tiny rate: almost
    # every choice is the acting policy's most likely one, so the run differs; out of
    # range refused by name. Both learn without error and report their curve.
    args = fast_ppo.Args(total_steps=2048, seed=3, **dict(SMALL, eval_every=1024),
                         policy="regions")
    _, all_sampled = fast_ppo.train(dataclasses.replace(args, explore_regions=1.0))
    _, per_region = fast_ppo.train(dataclasses.replace(args, clip_per_region=True))
    _, few = fast_ppo.train(dataclasses.replace(args, explore_regions=1e-6))
    assert len(all_sampled["curve"]) == len(per_region["curve"]) == len(few["curve"]) == 3
    assert all_sampled["curve"][1]["returns"] != few["curve"][1]["returns"]
    for bad in ("-0.1", "1.5"):
        with pytest.raises(SystemExit):
            fast_ppo.parse_args(["--explore-regions", bad])
