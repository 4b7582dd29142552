"""PPO with TorchRL on tiergym's default task: a collector, GAE, ClipPPOLoss and Adam, the
action mask applied by the policy (tiergym.torchrl.MaskedMultiCategorical).

    pip install "tiergym[torchrl]"                       # torchrl 0.14, tensordict, torch 2.13
    python agents_examples/torchrl_ppo.py                # 20k steps on minife and lulesh
    python agents_examples/torchrl_ppo.py --steps 200000 --envs 8 --threads 2 --save ppo.pt

The environments are tiergym's in-process vector environment as one batched TorchRL
environment (tiergym.torchrl.make_env(num_envs=...)): `--envs` sub-environments stepped on
`--threads` threads, the ended ones reset by TorchRL (autoreset "disabled"). The policy is
an MLP from the observation to one row of logits per region ([regions, 1 + tiers]: keep,
or move to a tier), masked by the state's action mask; the critic an MLP to one value.
After training, the deterministic policy (each region's most likely allowed choice) plays
one episode per application, the training ones and the held-out ones (nekbone, lammps),
scored as the learning benchmark scores (learning_benchmark.py): the fraction of the
oracle's time saved. Progress on stderr, the table on stdout.
"""

import argparse
import dataclasses
import sys
import time

import numpy as np

import learning_common


@dataclasses.dataclass
class Args:
    steps: int = 20_000           # environment steps (all sub-environments together)
    envs: int = 4                 # sub-environments of the batched environment
    threads: int = 1              # threads stepping them (the caller's included)
    torch_threads: int = 1        # torch's intra-op threads (small networks: 1 is fastest)
    batch: int = 1024             # steps per update (a multiple of --envs)
    minibatch: int = 256
    epochs: int = 4
    lr: float = 3e-4
    gamma: float = 1.0            # an episode's return is its time saved, undiscounted
    lmbda: float = 0.95
    clip: float = 0.2
    entropy: float = 1e-3
    hidden: int = 64
    seed: int = 0
    train: str = "minife,lulesh"
    held_out: str = "nekbone,lammps"
    steps_per_episode: int = 100  # the task's decisions per episode
    save: str = ""                # write the trained actor's weights here (torch.save)
    no_eval: bool = False


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    for field in dataclasses.fields(Args):
        flag = "--" + field.name.replace("_", "-")
        if field.type == "bool" or field.type is bool:
            parser.add_argument(flag, action="store_true")
        else:
            parser.add_argument(flag, type=type(field.default), default=field.default)
    return Args(**vars(parser.parse_args(argv)))


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def build(env, hidden):
    """(actor, critic): TensorDict modules reading "observation" (and "action_mask")."""
    import torch
    from tensordict.nn import TensorDictModule
    from torchrl.modules import ProbabilisticActor, ValueOperator
    from tiergym.torchrl import MASK_KEY, distribution_class

    obs_size = env.observation_spec["observation"].shape[-1]
    mask_shape = env.observation_spec[MASK_KEY].shape[len(env.batch_size):]
    logits = int(np.prod(mask_shape))

    def mlp(out):
        return torch.nn.Sequential(torch.nn.Linear(obs_size, hidden), torch.nn.Tanh(),
                                   torch.nn.Linear(hidden, hidden), torch.nn.Tanh(),
                                   torch.nn.Linear(hidden, out))

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = mlp(logits)

        def forward(self, obs):
            return self.net(obs).reshape(*obs.shape[:-1], *mask_shape)

    actor = ProbabilisticActor(
        TensorDictModule(Logits(), in_keys=["observation"], out_keys=["logits"]),
        in_keys={"logits": "logits", "mask": MASK_KEY}, spec=env.action_spec,
        distribution_class=distribution_class(env), return_log_prob=True)
    critic = ValueOperator(mlp(1), in_keys=["observation"])
    return actor, critic


def train(args, env, actor, critic, log=log):
    """PPO on `env` for args.steps; returns [(steps, mean return of the episodes that ended
    in that batch or None)]."""
    import torch
    from torchrl.collectors import Collector
    from torchrl.objectives import ClipPPOLoss
    from torchrl.objectives.value import GAE

    frames = max(args.batch // args.envs, 1) * args.envs
    collector = Collector(env, actor, frames_per_batch=frames,
                          total_frames=max(args.steps, frames),
                          auto_register_policy_transforms=False)  # (none needed: no memory)
    advantage = GAE(gamma=args.gamma, lmbda=args.lmbda, value_network=critic,
                    average_gae=True)
    loss_fn = ClipPPOLoss(actor, critic, clip_epsilon=args.clip, entropy_coeff=args.entropy)
    optimizer = torch.optim.Adam(loss_fn.parameters(), lr=args.lr)
    history, done_steps, started = [], 0, time.monotonic()
    episode_return = torch.zeros(env.batch_size or (1,))
    try:
        for data in collector:
            with torch.no_grad():
                advantage(data)
            # Returns of the episodes that ended in this batch (time-major per env).
            rewards = data["next", "reward"].reshape(*data.batch_size)
            ended = data["next", "done"].reshape(*data.batch_size)
            finished = []
            for t in range(data.batch_size[-1]):
                episode_return += rewards[..., t].reshape(episode_return.shape)
                flags = ended[..., t].reshape(episode_return.shape)
                finished += episode_return[flags].tolist()
                episode_return[flags] = 0
            flat = data.reshape(-1)
            for _ in range(args.epochs):
                for index in torch.randperm(flat.numel()).split(args.minibatch):
                    losses = loss_fn(flat[index])
                    loss = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
                    optimizer.zero_grad()
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(loss_fn.parameters(), 0.5)
                    optimizer.step()
            done_steps += flat.numel()
            mean = float(np.mean(finished)) if finished else None
            history.append((done_steps, mean, float(loss.detach())))
            log(f"{done_steps} steps: {len(finished)} episodes ended, mean return "
                f"{'-' if mean is None else f'{mean:+.4f}'}, loss {float(loss.detach()):.4f}, "
                f"{done_steps / (time.monotonic() - started):.0f} steps/s")
    finally:
        collector.shutdown()
    return history


def greedy_predict(actor, env):
    """predict(obs) -> action for a TierEnv of the task: each region's most likely choice
    among those its mask allows (the distribution's mode)."""
    import torch
    from tensordict import TensorDict
    from torchrl.envs.utils import ExplorationType, set_exploration_type
    from tiergym.torchrl import MASK_KEY

    def predict(obs):
        mask = np.asarray(env.action_masks()).reshape(env.num_regions, -1)
        td = TensorDict({"observation": torch.as_tensor(obs, dtype=torch.float32),
                         MASK_KEY: torch.as_tensor(mask)}, [])
        with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
            return actor(td)["action"].numpy()
    return predict


def evaluate(actor, args, apps, seed=0):
    """{app: return} of one deterministic episode per application, and the oracle's."""
    import learning_benchmark
    import tiergym

    server = tiergym.Server()
    try:
        task = dict(tiergym.DEFAULT_TASK, steps=args.steps_per_episode)
        env = tiergym.TierEnv(address=server, **task)
        try:
            returns = learning_benchmark.evaluate_predict(env, greedy_predict(actor, env), apps,
                                                          seed)
        finally:
            env.close()
        oracle = learning_benchmark.heuristic_returns(server, apps, task, names=(), seed=seed)
        return returns, oracle["oracle"]
    finally:
        server.close()


def main(argv=None):
    args = parse_args(argv)
    try:
        import torchrl  # noqa: F401 (first: without it nothing else is imported)
        import torch
        from tiergym.torchrl import make_env
    except ImportError as e:
        print(f"torchrl_ppo: {e}; `pip install \"tiergym[torchrl]\"`", file=sys.stderr)
        return 1
    if args.envs < 1 or args.batch < args.envs or args.minibatch < 1:
        print("torchrl_ppo: --envs, --batch (>= --envs) and --minibatch must be positive",
              file=sys.stderr)
        return 2
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.torch_threads)
    env = make_env(num_envs=args.envs, threads=args.threads, profiles=args.train,
                   steps=args.steps_per_episode)
    env.set_seed(args.seed)
    actor, critic = build(env, args.hidden)
    try:
        history = train(args, env, actor, critic)
    finally:
        env.close()
    if args.save:
        torch.save(actor.state_dict(), args.save)
    print(f"torchrl_ppo: {history[-1][0]} steps in {len(history)} updates")
    if args.no_eval:
        return 0
    train_apps = [a for a in args.train.split(",") if a]
    held_out = [a for a in args.held_out.split(",") if a]
    returns, oracle = evaluate(actor, args, train_apps + held_out, args.seed)
    learning_common.print_fractions([("training", train_apps), ("held out", held_out)],
                                    returns, oracle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
