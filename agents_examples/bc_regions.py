"""bc_regions.py: a warm start for fast_ppo.py's per-region policy, cloned from a
heuristic's placement (behaviour cloning of where the teacher keeps each region).

    python agents_examples/bc_regions.py --train procedural-train-v1:256 \
        --config observation=relative --out bc.pt           # then: fast_ppo.py --init-from bc.pt

Why not clone the teacher's moves: HeMem-like moves a region once and keeps it there, so
its moves are 0.7 % of its per-region decisions; a clone of its actions by cross-entropy
keeps everything (it never moves), and with the moves weighted up it moves too much
(agents_examples/README.md, "Generalization"). The label here is a placement instead: at
step t each region's label is the tier the teacher keeps it on at that step (its placement
in force after its decision at step t, on the same application and episode seed), as the
keep-mode action "move it to that tier" (a move to the tier it is on moves nothing;
`--label keep` says keep there instead). The states are visited by the clone's own
behaviour with noise (the first of `episodes` passes is the teacher's own): every region
follows its label, except with probability `noise` a random allowed choice (DAgger-like),
so regions are off the teacher's placement and the label says "move it back", which the
teacher's own episodes rarely show. Even so only 2 % of the labels change a region's tier:
"stay on the tier you are on" (the on[t] features) is right 98 % of the time and an
unweighted clone never moves, so the labels that change a tier weigh `balance` (0.5) of
the loss (README, "Generalization", third session). The teacher's placements do
not depend on the student's: a heuristic decides on the sampled accesses, which no
placement changes, so the teacher's episode gives the label of every state at that step.

The teacher runs in placement mode (policies.py drives it) and the student in the task's
mode (keep), both in tiergym.InProcessVectorEnv, every application of the pool side by side
(the same episodes as a server's). The value head is fitted too, to the returns-to-go of
the behaviour episodes (x fast_ppo's reward scale), so that PPO starts with a critic of the
policy it starts from. Environment steps used (`env_steps` in the result): the teacher's
episodes and the student's; learning_benchmark.py logs them beside the curve.

The result is a state dict of fast_ppo.POLICIES[policy], saved as fast_ppo's --save saves
(fast_ppo.py --init-from loads it).
"""

import argparse
import dataclasses
import sys
import time

import numpy as np
import torch
import torch.nn as nn

import fast_ppo
import policies
import tiergym
import tiergym.wrappers


@dataclasses.dataclass
class BCArgs:
    teacher: str = "hemem"       # a policy of policies.py, run in placement mode
    label: str = "placement"     # "placement": 1 + the teacher's tier, always (a move to
                                 # the region's own tier moves nothing); "keep": keep when
                                 # the region is there already, else the move
    noise: float = 0.1           # per region and step: a random allowed choice instead
    balance: float = 0.5         # the tier-changing labels' share of the loss (0: as drawn)
    episodes: int = 2            # behaviour episodes per application (each its own noise)
    epochs: int = 20             # passes over the collected states
    minibatch: int = 1024        # states per optimiser step
    learning_rate: float = 1e-3
    vf_coef: float = 0.5         # the value loss's weight, as PPO's


class _EnvView:
    """What a policies.py policy reads of its environment (tier_spec, num_regions, tiers),
    for one environment of an InProcessVectorEnv."""

    def __init__(self, envs):
        self.tier_spec = envs.tier_spec
        self.num_regions = int(envs.num_regions)
        self.tiers = list(envs.tier_spec["tiers"])


def _info_of(info, i):
    """Environment i's entries of a vector info dict (those policies.py reads)."""
    return {k: v[i] for k, v in info.items() if not k.startswith("_") and k != "final_info"}


def teacher_placements(config, teacher="hemem", seed=0):
    """(profiles, placements [P, T, K] int64): the placement the teacher keeps in force
    after each step's decision (its refused moves undone), on every profile `config`
    serves, one episode each (seed `seed`), in placement mode."""
    config = resolved(dict(config, action_mode="placement"))
    envs = tiergym.InProcessVectorEnv(len(config["profiles"]), threads=1,
                                      autoreset_mode=tiergym.DISABLED, **config)
    try:
        profiles = list(envs.tier_spec["profiles"])
        n = len(profiles)
        obs, info = envs.reset(seed=[seed] * n, options={"profile": profiles})
        view, agents = _EnvView(envs), [policies.make_policy(teacher, seed=seed) for _ in profiles]
        for i, agent in enumerate(agents):
            agent.reset(view, obs[i], _info_of(info, i))
        out, done = [], False
        while not done:
            actions = np.stack([np.asarray(a.act(obs[i], _info_of(info, i)), dtype=np.int64)
                                for i, a in enumerate(agents)])
            previous = out[-1] if out else np.zeros_like(actions)
            obs, _, terminated, truncated, info = envs.step(actions)
            in_force = actions.copy()
            for i, refused in enumerate(info["refused_regions"]):
                refused = np.asarray(refused, dtype=np.int64)
                in_force[i, refused] = previous[i, refused]
            out.append(in_force)
            done = bool((terminated | truncated).all())
        return profiles, np.stack(out, axis=1)
    finally:
        envs.close()


def resolved(config):
    """`config` with its `profiles` as a list of profile names or directories (the splits
    it names resolved by tiergym.datasets)."""
    config = tiergym.datasets.resolve_config(config)
    profiles = config["profiles"]
    if isinstance(profiles, str):
        profiles = [p.strip() for p in profiles.split(",") if p.strip()]
    return dict(config, profiles=list(profiles))


def _tier_columns(spec):
    """The relative observation's on[t] columns (which tier a region is on)."""
    names, _ = tiergym.wrappers.feature_names(spec)
    cols = [names.index(f"on[{t}]") for t in spec["tiers"]]
    return np.asarray(cols)


def collect(config, profiles, placements, bc, mask_mode="region", seed=0, reward_scale=100.0):
    """Behaviour episodes in the task's mode: (obs [N, D], masks [N, K, C] bool, labels
    [N, K], returns-to-go [N], changes [N, K] bool, env steps). Each region's label: 1 +
    the teacher's tier at this step ("keep" labels: keep when the region is there); keep
    when that move is masked. changes: the label takes the region off the tier it is on."""
    n, t_len, k = placements.shape
    envs = tiergym.InProcessVectorEnv(n, threads=1, autoreset_mode=tiergym.DISABLED, **config)
    rng = np.random.default_rng(seed)
    out = dict(obs=[], masks=[], labels=[], returns=[], changes=[])
    steps = 0
    try:
        masks_of, on_cols = fast_ppo.Masks(mask_mode, envs.tier_spec), _tier_columns(envs.tier_spec)
        f = int(envs.tier_spec["obs_region_features"])
        for episode in range(bc.episodes):
            obs, info = envs.reset(seed=[seed] * n, options={"profile": profiles})
            rewards = []
            for t in range(t_len):
                mask = masks_of(info)                                          # [n, K, C]
                here = obs[:, :k * f].reshape(n, k, f)[:, :, on_cols].argmax(-1)
                label = 1 + placements[:, t]
                if bc.label == "keep":
                    label = np.where(placements[:, t] == here, 0, label)
                label = np.where(np.take_along_axis(mask, label[..., None], -1)[..., 0], label, 0)
                act = label.copy()
                if episode > 0 or bc.episodes == 1:  # the first of several: the teacher's own
                    noisy = rng.random((n, k)) < bc.noise
                    random_choice = _random_allowed(rng, mask)
                    act = np.where(noisy, random_choice, label)
                out["obs"].append(obs.copy())
                out["masks"].append(mask.copy())
                out["labels"].append(label)
                out["changes"].append((label != 0) & (label - 1 != here))
                obs, reward, terminated, truncated, info = envs.step(act.astype(np.int64))
                rewards.append(reward * reward_scale)
                steps += n
                if (terminated | truncated).all():
                    break
            togo = np.cumsum(np.asarray(rewards)[::-1], axis=0)[::-1]       # [T, n]
            out["returns"].extend(togo)
    finally:
        envs.close()
    return (np.concatenate(out["obs"]), np.concatenate(out["masks"]),
            np.concatenate(out["labels"]), np.concatenate(out["returns"]).astype(np.float32),
            np.concatenate(out["changes"]), steps)


def _random_allowed(rng, mask):
    """A uniformly random allowed choice per region of mask [n, K, C] (keep is allowed)."""
    scores = rng.random(mask.shape) * mask
    return scores.argmax(-1)


def fit(policy, obs, masks, labels, returns, changes, bc, seed=0, log=None):
    """Cross-entropy of the masked logits to the labels, and the value to the returns-to-go:
    (per-region label accuracy, accuracy where the label takes the region off its tier).
    With bc.balance > 0 the labels that change a region's tier weigh that share of the loss
    in all (0.5: as much as those that do not): else "stay where you are" (the on[t]
    features) is right 98 % of the time and the clone moves nothing."""
    started = time.monotonic()
    generator = torch.Generator().manual_seed(seed)
    obs_t, labels_t = torch.as_tensor(obs), torch.as_tensor(labels, dtype=torch.int64)
    offsets = torch.as_tensor(fast_ppo.mask_offsets(masks))                # [N, C, K]
    returns_t = torch.as_tensor(returns)
    share = float(changes.mean())
    weights = np.ones(changes.shape, dtype=np.float32)
    if bc.balance > 0 and 0 < share < 1:
        weights = np.where(changes, bc.balance / share,
                           (1 - bc.balance) / (1 - share)).astype(np.float32)
    weights_t = torch.as_tensor(weights)
    optimizer = torch.optim.Adam(policy.parameters(), lr=bc.learning_rate, eps=1e-5)
    n = len(obs_t)
    for epoch in range(bc.epochs):
        order = torch.randperm(n, generator=generator)
        total = 0.0
        for start in range(0, n, bc.minibatch):
            idx = order[start:start + bc.minibatch]
            logits, value = policy(obs_t[idx])
            logp = fast_ppo.masked_logits(logits, offsets[idx]).log_softmax(dim=1)  # [B, C, K]
            w = weights_t[idx]
            ce = -(logp.gather(1, labels_t[idx].unsqueeze(1))[:, 0] * w).sum() / w.sum()
            loss = ce + bc.vf_coef * 0.5 * (value - returns_t[idx]).square().mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
            optimizer.step()
            total += float(ce.detach()) * len(idx)
        if log is not None:
            log(f"bc epoch {epoch + 1}/{bc.epochs}: cross-entropy {total / n:.4f}")
    with torch.no_grad():
        chosen = fast_ppo.greedy_actions(policy, obs, masks)
    moves = changes
    if log is not None:
        log(f"bc: fitted in {time.monotonic() - started:.1f} s")
    return float((chosen == labels).mean()), float((chosen[moves] == labels[moves]).mean()
                                                     if moves.any() else np.nan)


def pretrain(fast_args, bc, out_path, log=None):
    """The warm start of fast_ppo's policy for fast_args (its task, --train pool, policy,
    hidden width, mask, seed, reward scale), saved to out_path as fast_ppo's --save saves.
    Returns a dict of what was done (env steps, accuracies, seconds)."""
    started = time.monotonic()
    torch.manual_seed(fast_args.seed)
    torch.set_num_threads(fast_args.update_threads)  # the machine is shared (fast_ppo's)
    config = resolved(dict(fast_ppo.task_config(fast_args),
                           profiles=fast_ppo.apps(fast_args.train)))
    profiles, placements = teacher_placements(config, bc.teacher, seed=fast_args.seed)
    teacher_steps = placements.shape[0] * placements.shape[1]
    if log is not None:
        log(f"bc: {bc.teacher} on {len(profiles)} applications ({teacher_steps} env steps); "
            f"regions moved from the default tier at the end: "
            f"{float((placements[:, -1] != 0).mean()):.3f}")
    if log is not None:
        log(f"bc: teacher's episodes in {time.monotonic() - started:.1f} s")
    obs, masks, labels, returns, changes, steps = collect(config, profiles, placements, bc,
                                                 fast_args.mask, fast_args.seed,
                                                 fast_args.reward_scale)
    envs = tiergym.InProcessVectorEnv(1, threads=1, autoreset_mode=tiergym.DISABLED,
                                      **dict(config, profiles=config["profiles"][:1]))
    try:
        layout = fast_ppo.Layout(envs.tier_spec, envs.num_regions, envs.single_action_space)
        obs_size = envs.single_observation_space.shape[0]
    finally:
        envs.close()
    policy = fast_ppo.POLICIES[fast_args.policy](layout, obs_size, fast_args.hidden)
    accuracy, move_accuracy = fit(policy, obs, masks, labels, returns, changes, bc,
                                  fast_args.seed, log)
    torch.save({"args": dataclasses.asdict(fast_args), "state_dict": policy.state_dict(),
                "actor_layout": "choices_first", "bc": dataclasses.asdict(bc)}, out_path)
    result = dict(env_steps=int(teacher_steps + steps), states=int(len(obs)),
                  move_share=float(changes.mean()), accuracy=accuracy,
                  move_accuracy=move_accuracy, seconds=time.monotonic() - started)
    if log is not None:
        log("bc: " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                               for k, v in result.items()))
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", default="procedural-train-v1:256")
    parser.add_argument("--config", default="observation=relative")
    parser.add_argument("--policy", default="regions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="the state dict (fast_ppo --init-from)")
    for f in dataclasses.fields(BCArgs):
        flag = "--" + f.name.replace("_", "-")
        if isinstance(f.default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default)
        else:
            parser.add_argument(flag, type=type(f.default), default=f.default,
                                help=f"(default {f.default!r})")
    a = parser.parse_args(argv)
    fast_args = fast_ppo.Args(train=a.train, held_out="", config=a.config, policy=a.policy,
                              seed=a.seed)
    bc = BCArgs(**{f.name: getattr(a, f.name) for f in dataclasses.fields(BCArgs)})
    pretrain(fast_args, bc, a.out, log=fast_ppo.log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
