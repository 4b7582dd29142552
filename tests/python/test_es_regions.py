"""agents_examples/es_regions.py, the per-region policies searched without gradients: the
batched population acts as each member's own network would, the search's steps (CEM's elite
mean, ES's antithetic estimate), a run keeps its budget and repeats by seed, select_best
delivers the best evaluation, the linear target policy starts by keeping, and bad arguments
are refused by name. Seconds each."""

import dataclasses

import numpy as np
import pytest
import torch

import es_regions
import fast_ppo

from tiergym_testing import needs_binary

# Two bundled programs, 8 regions, episodes of 6 steps: a generation of 4 members on 2
# applications is 48 environment steps.
TINY = dict(train="minife,lulesh", config="num_regions=8,steps=6,observation=relative",
            population=4, apps_per_generation=2, hidden=8, eval_every=96, quiet=True,
            env_threads=1)


@pytest.fixture(scope="module")
def episode():
    """(environments of minife, 3 of them, after two steps of keeping: every feature filled
    in; their observation; their region masks). Loading a profile takes seconds: once."""
    args = es_regions.Args(**TINY)
    envs = fast_ppo.tiergym.InProcessVectorEnv(
        3, threads=1, autoreset_mode=fast_ppo.tiergym.DISABLED,
        **dict(fast_ppo.task_config(es_regions.ppo_args(args)), profiles=args.train))
    try:
        obs, info = envs.reset(seed=[0] * 3, options={"profile": ["minife"] * 3})
        for _ in range(2):
            obs, _, _, _, info = envs.step(np.zeros((3, 8), dtype=np.int64))
        yield envs, obs, fast_ppo.Masks("region", envs.tier_spec)(info)
    finally:
        envs.close()


@needs_binary
@pytest.mark.parametrize("policy", ["linear-target", "regions", "regions-target", "score-fill"])
def test_the_batched_population_acts_as_each_members_own_network(episode, policy):
    envs, obs, _ = episode
    network = es_regions.make_policy(es_regions.Args(policy=policy, **TINY), envs)
    population = es_regions.Population(network)
    rng = np.random.default_rng(1)
    thetas = rng.standard_normal((3, population.vector().size)).astype(np.float32)
    x = torch.as_tensor(obs)
    batched = population.logits(thetas, x.unsqueeze(0).expand(3, -1, -1))
    for i, theta in enumerate(thetas):
        population.load(theta)
        np.testing.assert_allclose(batched[i].detach().numpy(), network(x)[0].detach().numpy(),
                                   rtol=1e-5, atol=1e-5)
    population.load(thetas[2])
    np.testing.assert_array_equal(population.vector(), thetas[2])


@needs_binary
def test_the_linear_target_policy_starts_by_keeping_every_region(episode):
    envs, obs, mask = episode
    network = es_regions.make_policy(es_regions.Args(**TINY), envs)
    assert not fast_ppo.greedy_actions(network, obs, mask).any()


def test_the_fill_promotes_hot_regions_hottest_first_and_demotes_cold_ones_for_room():
    # Fast tier room 3. Row 0: regions 0 and 3 hot (3 hotter), nothing on the fast tier:
    # 3 (size 2) goes first, then 0 (size 2) does not fit; 1 (size 1) is cold.
    # Row 1: the fast tier is full (room 0) of 1 (cold, size 2) and 2 (hot, size 2); 3 is
    # hot (size 2): 1 is demoted to make room, 2 stays (a hot region never displaces
    # another), 0 (hot, size 3) does not fit after that.
    score = np.array([[0.5, -1.0, -0.2, 0.9], [0.1, -0.5, 0.7, 0.8]])
    on_fast = np.array([[False] * 4, [False, True, True, False]])
    sizes = np.array([[2.0, 1.0, 1.0, 2.0], [3.0, 2.0, 2.0, 2.0]])
    out = es_regions.fill_fast_tier(score, on_fast, sizes, np.array([3.0, 0.0]))
    np.testing.assert_array_equal(out, [[0, 0, 0, 2], [0, 1, 0, 2]])
    # Nothing hot: nothing moves, whatever the room.
    assert not es_regions.fill_fast_tier(-np.ones((2, 4)), on_fast, sizes,
                                         np.array([9.0, 9.0])).any()


def test_a_keep_margin_stops_regions_near_the_threshold_swapping_for_one_another():
    # The fast tier (room 0) holds region 0, which scores just below 0; region 1, just
    # above, is hot. Without a margin 0 is demoted for it (the churn of lulesh's equal
    # regions); with a margin of 0.1 region 0 stays hot and nothing moves. Promotions into
    # free room are not held back, and a region far below the margin is still demoted.
    score = np.array([[-0.05, 0.05], [-0.05, 0.05], [-0.5, 0.05]])
    on_fast = np.array([[True, False]] * 3)
    sizes = np.ones((3, 2))
    room = np.array([0.0, 0.0, 0.0])
    np.testing.assert_array_equal(es_regions.fill_fast_tier(score, on_fast, sizes, room),
                                  [[1, 2], [1, 2], [1, 2]])
    keep = np.array([0.1, 0.0, 0.1])
    np.testing.assert_array_equal(es_regions.fill_fast_tier(score, on_fast, sizes, room, keep),
                                  [[0, 0], [1, 2], [1, 2]])
    free = es_regions.fill_fast_tier(score, on_fast, sizes, np.array([1.0] * 3), keep)
    assert (free[:, 1] == 2).all()
    # A margin per region: 0 for region 0 (a region without samples) keeps nothing.
    per_region = np.array([[0.0, 0.1], [0.1, 0.1], [0.0, 0.0]])
    np.testing.assert_array_equal(
        es_regions.fill_fast_tier(score, on_fast, sizes, room, per_region),
        [[1, 2], [0, 0], [1, 2]])
    with pytest.raises(ValueError, match="keep-margin"):
        es_regions.check_args(es_regions.Args(keep_margin=0.1))  # not a score-fill policy


@needs_binary
def test_the_batched_population_keeps_by_each_members_own_margin():
    # With a region on the fast tier the keep margin acts, scaled by each member's own
    # weights: the batched population still acts as each member's own network, and the
    # margin changes what some member does (so the comparison is not of two rules that
    # ignore it).
    args = es_regions.Args(policy="score-fill", keep_margin=0.5, **TINY)
    envs = fast_ppo.tiergym.InProcessVectorEnv(
        2, threads=1, autoreset_mode=fast_ppo.tiergym.DISABLED,
        **dict(fast_ppo.task_config(es_regions.ppo_args(args)), profiles=args.train))
    try:
        envs.reset(seed=[0] * 2, options={"profile": ["lulesh", "lulesh"]})
        envs.step(np.zeros((2, 8), dtype=np.int64))
        promote = np.zeros((2, 8), dtype=np.int64)
        promote[:, 5] = 2   # lulesh's region 5 (a fifth of it) fills most of the fast tier
        obs, _, _, _, info = envs.step(promote)
        assert all(len(r) == 0 for r in info["refused_regions"])
        network = es_regions.make_policy(args, envs)
        plain = es_regions.make_policy(dataclasses.replace(args, keep_margin=0.0), envs)
    finally:
        envs.close()
    population = es_regions.Population(network)
    thetas = np.random.default_rng(1).standard_normal(
        (8, population.vector().size)).astype(np.float32)
    x = torch.as_tensor(obs)
    batched = population.logits(thetas, x.unsqueeze(0).expand(8, -1, -1))
    differs = False
    for i, theta in enumerate(thetas):
        population.load(theta)
        own = network(x)[0].detach().numpy()
        np.testing.assert_array_equal(batched[i].detach().numpy(), own)
        es_regions.Population(plain).load(theta)
        differs |= not np.array_equal(plain(x)[0].detach().numpy(), own)
    assert differs


@needs_binary
def test_the_score_fill_policy_reads_its_room_from_the_observation(episode):
    # Every sampled region hot (the bias alone): the fill promotes regions while they fit,
    # read from the observation; the environment refuses none of them.
    envs, obs, mask = episode
    network = es_regions.make_policy(es_regions.Args(policy="score-fill", **TINY), envs)
    assert not fast_ppo.greedy_actions(network, obs, mask).any()     # zero: nothing hot
    with torch.no_grad():
        network.head.bias.fill_(1.0)
    actions = fast_ppo.greedy_actions(network, obs, mask)
    assert actions.any() and set(np.unique(actions)) <= {0, 2}
    _, _, _, _, info = envs.step(actions)  # the fixture's last user: it may step them
    assert all(len(r) == 0 for r in info["refused_regions"])
    with pytest.raises(ValueError, match="observation=relative"):
        es_regions.make_policy(es_regions.Args(policy="score-fill", **dict(
            TINY, config="num_regions=8,steps=6,observation=normalized")))


@pytest.fixture(scope="module")
def load_episode():
    """As `episode`, on observation=relative-load."""
    args = es_regions.Args(policy="score-fill-load", **dict(
        TINY, config="num_regions=8,steps=6,observation=relative-load"))
    envs = fast_ppo.tiergym.InProcessVectorEnv(
        3, threads=1, autoreset_mode=fast_ppo.tiergym.DISABLED,
        **dict(fast_ppo.task_config(es_regions.ppo_args(args)), profiles="minife,lulesh"))
    try:
        obs, _ = envs.reset(seed=[0] * 3, options={"profile": ["minife", "lulesh", "lulesh"]})
        for _ in range(2):
            obs, _, _, _, _ = envs.step(np.zeros((3, 8), dtype=np.int64))
        yield args, envs, obs
    finally:
        envs.close()


@needs_binary
def test_the_load_policy_is_score_fill_with_the_load_last_and_standardized(load_episode,
                                                                           episode):
    args, envs, obs = load_episode
    network = es_regions.make_policy(args, envs)
    x = torch.as_tensor(obs)
    regions = network.layout.split(x)[0]
    assert network.layout.features == 21
    # Every feature centred and divided by its spread over the sampled regions.
    network.standardize(obs)
    f = network.features(x)
    sampled = regions[..., 7] > 0
    np.testing.assert_allclose(network.scale.numpy(), f[sampled].std(dim=0).numpy(), rtol=1e-5)
    # With no weight on the load, its score is score-fill's on relative's own features.
    plain = es_regions.make_policy(es_regions.Args(policy="score-fill", **TINY), episode[0])
    rng = np.random.default_rng(3)
    with torch.no_grad():
        w = torch.as_tensor(rng.standard_normal(7), dtype=torch.float32)
        network.head.weight.copy_(torch.cat([w[:6], torch.zeros(1)]).view(1, -1))
        network.head.bias.fill_(0.1)
        plain.head.weight.copy_((w[:6] / network.scale[:6]).view(1, -1))
        plain.head.bias.fill_(0.1)
    k, g = network.layout.regions, network.layout.features
    relative = torch.cat([regions[..., :g - 1].reshape(3, -1), x[:, k * g:]], -1)
    with torch.no_grad():
        np.testing.assert_allclose(network(x, decoded=False)[0].numpy(),
                                   plain(relative, decoded=False)[0].numpy(), rtol=1e-5,
                                   atol=1e-6)
    # The batched population (the scale a buffer, not searched) acts as each member.
    population = es_regions.Population(network)
    assert population.vector().size == 8
    thetas = rng.standard_normal((3, 8)).astype(np.float32)
    batched = population.logits(thetas, x.unsqueeze(0).expand(3, -1, -1))
    for i, theta in enumerate(thetas):
        population.load(theta)
        with torch.no_grad():
            np.testing.assert_allclose(batched[i].numpy(), network(x)[0].numpy(), atol=1e-5)
    with pytest.raises(ValueError, match="observation=relative-load"):
        es_regions.make_policy(dataclasses.replace(args, config=TINY["config"]))


@needs_binary
def test_ranks_beyond_a_margin_are_the_observations_ranks_without_near_ties(load_episode):
    # Recomputed by the policy from the densities, the sizes and the fast tier's share of
    # the footprint, the ranks are the environment's where no two densities lie within the
    # margin; a margin makes regions of nearly one density rank alike.
    args, envs, obs = load_episode
    x = torch.as_tensor(obs)
    plain = es_regions.make_policy(args, envs)
    tight = es_regions.make_policy(dataclasses.replace(args, rank_margin=1e-9), envs)
    assert tight.rank_margin == 1e-9 and plain.rank_margin == 0
    regions = plain.layout.split(x)[0]
    sampled = regions[..., 7] > 0
    np.testing.assert_allclose(tight.features(x)[..., 4:6][sampled].numpy(),
                               plain.features(x)[..., 4:6][sampled].numpy(), atol=1e-3)
    # With a margin the policy reads its own ranks, and on these episodes (lulesh's regions
    # of nearly one density) they are not the observation's.
    wide = es_regions.make_policy(dataclasses.replace(args, rank_margin=0.1), envs)
    own = wide.ranks_beyond_margin(*wide.layout.split(x))
    np.testing.assert_allclose(wide.features(x)[..., 4:6].numpy(), (own - 0.5).numpy())
    assert (own[sampled] - plain.features(x)[..., 4:6][sampled] - 0.5).abs().max() > 0.01
    # Three regions of a fifth of the footprint each, the fast tier holding half of it:
    # densities (sq) 0.6, 0.58 (1.5 against 1.38, 8 % apart) and 0.3. Without a margin the
    # second counts the first (0.4 of the footprint, 0.8 of the tier: sq 0.44); with a 10 %
    # margin it counts itself alone (0.2: 0.4 of the tier, sq 0.29) as the first does.
    one = regions[:1].clone()
    one[..., 3] = torch.tensor([0.2, 0.2, 0.2] + [0.4 / 5] * 5)
    for column in (5, 7):
        one[..., column] = torch.tensor([0.6, 0.58, 0.3, 0, 0, 0, 0, 0])
    globals_ = plain.layout.split(x)[1][:1].clone()
    fast = int(plain.fast_tier(globals_)[0])
    globals_[0, plain.tiers + 2 + fast] = 0.5
    for policy, second in ((tight, 0.4 / 0.5), (wide, 0.2 / 0.5)):
        ranks = policy.ranks_beyond_margin(one, globals_)[0]
        np.testing.assert_allclose(ranks[0].numpy(), [0.4 / 1.4] * 2, rtol=1e-5)
        np.testing.assert_allclose(ranks[1].numpy(), [second / (1 + second)] * 2, rtol=1e-5)
    with pytest.raises(ValueError, match="rank-margin"):
        es_regions.check_args(es_regions.Args(rank_margin=0.1))  # not a score-fill policy


@needs_binary
def test_keep_all_observations_are_every_step_of_each_training_application():
    # Each environment on its own application (a reset by seed alone would put them all on
    # one), whether the training set is named by applications, by a split's entry or by
    # the split's profile directories.
    args = es_regions.Args(policy="score-fill-load", **dict(
        TINY, config="num_regions=8,steps=6,observation=relative-load"))
    obs = es_regions.keep_all_observations(args, es_regions.ppo_args(args))
    assert obs.shape[0] == 2 * 7      # minife and lulesh, the reset and 6 steps each
    for i, app in enumerate(["minife", "lulesh"]):
        alone = dataclasses.replace(args, train=app)
        np.testing.assert_array_equal(
            obs[i::2], es_regions.keep_all_observations(alone, es_regions.ppo_args(alone)))
    split = dataclasses.replace(args, train="procedural-train-v1:2")
    dataset, n = fast_ppo.tiergym.datasets.parse_entry(split.train)
    paths = dataclasses.replace(args, train=",".join(dataset.config(n)["profiles"]))
    by_entry = es_regions.keep_all_observations(split, es_regions.ppo_args(split))
    assert by_entry.shape[0] == 2 * 7
    assert not np.array_equal(by_entry[2], by_entry[3])   # two applications, not one twice
    np.testing.assert_array_equal(
        by_entry, es_regions.keep_all_observations(paths, es_regions.ppo_args(paths)))
    with pytest.raises(ValueError, match="--standardize"):
        es_regions.check_args(dataclasses.replace(args, policy="linear-target",
                                                  standardize=True))


def test_cem_refits_the_mean_to_the_elite_and_es_steps_along_the_fitter_side():
    args = es_regions.Args(population=8, elite_fraction=0.25, sigma=0.5, **{
        k: v for k, v in TINY.items() if k != "population"})
    search = es_regions.Search(dataclasses.replace(args, method="cem"), np.zeros(3),
                               np.random.default_rng(0))
    thetas = search.sample()
    assert thetas.shape == (8, 3)
    np.testing.assert_allclose(thetas[:4], -thetas[4:])        # antithetic pairs
    fitness = np.arange(8.0)                                    # the last two are the elite
    search.tell(fitness, progress=0.5)
    np.testing.assert_allclose(search.theta, thetas[6:].mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(search.spread, thetas[6:].std(axis=0) + 0.25, rtol=1e-6)

    # 32 antithetic pairs: the estimate's sign is right on both weights
    es = es_regions.Search(dataclasses.replace(args, method="es", weight_decay=0.0,
                                               population=64),
                           np.zeros(3), np.random.default_rng(0))
    thetas = es.sample()
    fitness = thetas @ np.array([1.0, -1.0, 0.0])               # rewards the first weight
    es.tell(fitness, progress=0.0)
    assert es.theta[0] > 0 > es.theta[1]


@needs_binary
def test_a_run_keeps_its_budget_repeats_by_seed_and_selects_the_best_evaluation():
    args = es_regions.Args(total_steps=200, select_best=True, **TINY)  # 4 generations of 48
    seen = []

    def evaluator(policy):
        return {"w": float(sum(p.detach().sum() for p in policy.parameters()))}

    def score(point):
        return -abs(point["returns"]["w"] - 0.05)

    _, metrics = es_regions.train(args, on_eval=seen.append, evaluator=evaluator, score=score)
    curve = metrics["curve"]
    assert metrics["steps"] == 192 <= args.total_steps
    assert [p["steps"] for p in curve] == [0, 96, 192, 192]
    best = max(curve[:-1], key=score)
    assert curve[-1]["selected_steps"] == best["steps"]
    assert curve[-1]["returns"] == best["returns"]
    assert seen == curve
    policy, again = es_regions.train(args, evaluator=evaluator, score=score)
    assert [p["returns"] for p in again["curve"]] == [p["returns"] for p in curve]
    assert evaluator(policy) == best["returns"]  # the policy delivered is the selected one


def test_arguments_are_checked_with_the_flag_named():
    for bad, flag in ((dict(population=3), "--population"), (dict(sigma=0.0), "--sigma"),
                      (dict(method="pso"), "--method"), (dict(policy="mlp"), "--policy"),
                      (dict(apps_per_generation=0), "--apps-per-generation"),
                      (dict(elite_fraction=1.5), "--elite-fraction"),
                      (dict(fitness="mean"), "--fitness")):
        with pytest.raises(ValueError, match=flag):
            es_regions.check_args(es_regions.Args(**dict(TINY, **bad)))


@needs_binary
@pytest.mark.parametrize("name", ["cem-linear", "cem-fill"])
def test_cem_trains_on_a_split_in_the_benchmark_and_selects_by_train(name):
    """learning_benchmark.py's cem-linear and cem-fill path (train_reference_general with
    the trainer es_regions) on a procedural split, whose profiles are served by name: every
    evaluation holds every set's applications, and the last repeats the one best on the set
    train."""
    import learning_benchmark as lb
    task = dict(lb.GENERAL_TASK, num_regions="8", steps="12")
    sets = lb.parse_sets("train=procedural-train-v1:4,machine=machine-xeonmax-v2:1")
    train_dataset, n = fast_ppo.tiergym.datasets.parse_entry("procedural-train-v1:4")
    agent = dict(lb.AGENTS[name], kwargs=dict(
        lb.AGENTS[name]["kwargs"], population=4, apps_per_generation=2, env_threads=1))
    oracle = {s.label: {a: 1.0 for a in s.apps} for s in sets}
    curve, train_s, wall_s = lb.train_reference_general(
        agent, task, train_dataset.config(n), sets, seed=0, steps=192, eval_every=96,
        progress=lambda *a: None, curve=[], oracle=oracle)
    assert [p["steps"] for p in curve] == [0, 96, 192, 192]
    for point in curve:
        assert {label: set(r) for label, r in point["returns"].items()} == {
            s.label: set(s.apps) for s in sets}
    best = max(curve[:-1], key=lambda p: sum(p["returns"]["train"].values()))
    assert curve[-1]["selected_steps"] == best["steps"]
    assert 0 < train_s <= wall_s


def test_help_texts_are_the_fields_comments_continuations_joined():
    texts = fast_ppo.field_help(es_regions.Args)
    assert set(texts) == {f.name for f in dataclasses.fields(es_regions.Args)}
    assert texts["sigma"] == ("the perturbations' standard deviation (cem: the extra spread "
                              "at the start, decaying to 0)")
    assert fast_ppo.field_help(fast_ppo.Args)["total_steps"] == "environment steps to train for"
    with pytest.raises(SystemExit):
        es_regions.parse_args(["--population", "3"])
