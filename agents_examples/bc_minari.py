"""Behaviour cloning from a Minari dataset of the oracle's episodes, evaluated on held-out
applications.

    pip install "tiergym[offline,torch]"
    python agents_examples/bc_minari.py                   # record the dataset if missing, train, evaluate
    python agents_examples/bc_minari.py --epochs 300 --seeds 0-7

The dataset (tiergym.offline.record, or `python -m tiergym.offline --policy oracle ...`)
holds the oracle's episodes on the default task (keep mode: per region keep, or move to a
tier) on the training applications (default minife and lulesh), with each state's action
mask, and names the held-out applications (nekbone and lammps) as its evaluation
environment. It is made once into $MINARI_DATASETS_PATH (default ~/.minari/datasets) and
read from there afterwards.

The policy: an MLP from the observation to one row of logits per region, trained by
cross-entropy on the oracle's choices. Acting: each region's most likely choice. The mask is sufficient,
not necessary (any action within it fits the fast tier; the oracle's first placement
moves regions together that it forbids one by one), so by default the policy acts as the
oracle does, unmasked, and the environment refuses what would not fit;
--act-within-mask keeps to it (on lulesh the first placement then misses regions: 0.458
of the oracle's time saved instead of 1.000). The score, as the
learning benchmark's: the fraction of the oracle's time saved, on the training
applications (where minari.get_normalized_score gives it from the dataset's reference
scores) and on the held-out ones (the environment dataset.recover_environment(eval_env=True)
makes; the oracle's own returns there measured by tiergym.offline.episode_returns).
Progress on stderr, the table on stdout.
"""

import argparse
import importlib.util
import json
import sys

import numpy as np

import learning_common


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset-id", default="tiergym/TierPlacement-v1/oracle-train-v0",
                   help="the Minari dataset (recorded when missing)")
    p.add_argument("--train", default="minife,lulesh", help="applications it is recorded on")
    p.add_argument("--held-out", default="nekbone,lammps", help="its evaluation applications")
    p.add_argument("--seeds", default="0-3", help="episode seeds when recording (default 0-3)")
    p.add_argument("--steps", type=int, default=None,
                   help="decisions per episode when recording (default: the task's 100)")
    p.add_argument("--epochs", type=int, default=600)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--act-within-mask", action="store_true",
                   help="choose only what the state's action mask allows (see above)")
    return p.parse_args(argv)


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def dataset_or_record(args):
    import minari
    from tiergym import offline
    try:
        return minari.load_dataset(args.dataset_id)
    except FileNotFoundError:
        pass
    log(f"recording {args.dataset_id} (the oracle on {args.train})")
    seeds = offline.parse_seeds(args.seeds)
    config = {} if args.steps is None else {"steps": args.steps}
    return offline.record(args.dataset_id, "oracle", profiles=args.train, seeds=seeds,
                          eval_profiles=args.held_out, log=log, **config)


def arrays(dataset):
    """(observations [N, D], actions [N, regions], masks [N, regions, choices]) of every
    step: the state an action was taken in, the action, that state's mask."""
    obs, act, mask = [], [], []
    for episode in dataset.iterate_episodes():
        obs.append(episode.observations[:-1])
        act.append(episode.actions)
        mask.append(episode.infos["action_mask"][:-1])
    return (np.concatenate(obs).astype(np.float32), np.concatenate(act).astype(np.int64),
            np.concatenate(mask).astype(bool))


class Policy:
    """An MLP to [regions, choices] logits, masked."""

    def __init__(self, obs_size, regions, choices, hidden, seed):
        import torch
        torch.manual_seed(seed)
        self.torch = torch
        self.shape = (regions, choices)
        self.masked = False  # act within the state's mask
        self.net = torch.nn.Sequential(
            torch.nn.Linear(obs_size, hidden), torch.nn.Tanh(),
            torch.nn.Linear(hidden, hidden), torch.nn.Tanh(),
            torch.nn.Linear(hidden, regions * choices))

    def logits(self, obs, mask):
        out = self.net(obs).reshape(-1, *self.shape)
        return out.masked_fill(~mask, -1e9)

    def fit(self, obs, act, mask, epochs, lr):
        torch = self.torch
        obs, act, mask = torch.as_tensor(obs), torch.as_tensor(act), torch.as_tensor(mask)
        # Trained on every choice, the mask left out: the logits of what a state's mask
        # forbids are pushed down too, so that acting unmasked picks the oracle's choice.
        mask = torch.ones_like(mask)
        optimizer = torch.optim.Adam(self.net.parameters(), lr=lr)
        for epoch in range(epochs):
            loss = torch.nn.functional.cross_entropy(
                self.logits(obs, mask).reshape(-1, self.shape[1]), act.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if epoch % 50 == 0 or epoch == epochs - 1:
                with torch.no_grad():
                    agree = (self.logits(obs, mask).argmax(-1) == act).float().mean()
                log(f"epoch {epoch}: loss {float(loss.detach()):.4f}, agrees with the oracle on "
                    f"{float(agree):.1%} of the region decisions")
        return float(loss.detach())

    def __call__(self, obs, info):
        torch = self.torch
        mask = np.asarray(info["action_mask"], dtype=bool).reshape(self.shape)
        if not self.masked:
            mask = np.ones_like(mask)
        with torch.no_grad():
            logits = self.logits(torch.as_tensor(obs, dtype=torch.float32)[None],
                                 torch.as_tensor(mask)[None])[0]
        return logits.argmax(-1).numpy()


def play(env, policy, profiles, seed=0):
    """{profile: return} of one episode each."""
    out = {}
    for profile in profiles:
        obs, info = env.reset(seed=seed, options={"profile": profile})
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, info = env.step(policy(obs, info))
            total += float(reward)
            done = terminated or truncated
        out[profile] = total
    return out


def main(argv=None):
    args = parse_args(argv)
    missing = [m for m in ("minari", "h5py", "torch") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"bc_minari: {', '.join(missing)} not installed; "
              "`pip install \"tiergym[offline,torch]\"`", file=sys.stderr)
        return 1
    import minari
    import torch
    from tiergym import offline
    torch.set_num_threads(1)
    dataset = dataset_or_record(args)
    obs, act, mask = arrays(dataset)
    log(f"{args.dataset_id}: {dataset.total_episodes} episodes, {len(obs)} steps")
    policy = Policy(obs.shape[1], mask.shape[1], mask.shape[2], args.hidden, args.seed)
    policy.fit(obs, act, mask, args.epochs, args.lr)
    policy.masked = args.act_within_mask

    results = []
    for name, eval_env in (("training", False), ("held out", True)):
        env = dataset.recover_environment(eval_env=eval_env)
        try:
            profiles = list(env.unwrapped.profiles)
            returns = play(env, policy, profiles)
            spec = env.spec
        finally:
            env.close()
        if eval_env:
            oracle = {p: r for p, _, r in offline.episode_returns(
                "oracle", spec.id, seeds=(0,), **spec.kwargs)}
        else:
            meta = json.loads(dataset.storage.metadata["tiergym"])
            oracle = {p: r for p, s, r in meta["returns"] if s == meta["seeds"][0]}
        results.append((name, profiles, returns, oracle))
    groups = [(name, profiles) for name, profiles, _, _ in results]
    learning_common.print_fractions(groups, {p: r for _, _, rs, _ in results for p, r in rs.items()},
                                    {p: r for _, _, _, o in results for p, r in o.items()},
                                    label="BC return")
    train_returns = np.array(list(results[0][2].values()))
    print(f"normalized score on the training applications (minari.get_normalized_score): "
          f"{float(np.mean(minari.get_normalized_score(dataset, train_returns))):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
