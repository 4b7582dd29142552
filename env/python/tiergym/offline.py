"""tiergym.offline: Minari datasets of a policy's episodes on a task, for offline RL and
imitation (`pip install "tiergym[offline]"`: minari 0.5 with its HDF5 storage).

    from tiergym import offline
    dataset = offline.record("tiergym/TierPlacement-v1/oracle-train-v0", "oracle",
                             profiles="minife,lulesh", seeds=range(4),
                             eval_profiles="nekbone,lammps")
    import minari
    dataset = minari.load_dataset("tiergym/TierPlacement-v1/oracle-train-v0")
    env = dataset.recover_environment()               # the task the episodes were made on
    eval_env = dataset.recover_environment(eval_env=True)   # the same task, held-out apps
    minari.get_normalized_score(dataset, returns)      # the fraction of the oracle's time saved

    python -m tiergym.offline --policy hemem --profiles minife,lulesh --seeds 0-3 \\
        --dataset-id tiergym/TierPlacement-v1/hemem-train-v0

What a dataset holds: one episode per (profile, seed), each recorded as Minari records
any Gymnasium environment (observations, actions, rewards, terminations, truncations)
plus the numeric step infos (times, bytes migrated and in use, the action mask, the
number of refused regions) and the reset's seed and options ({"profile": name}). Its
metadata: Minari's env_spec (the task's Gymnasium spec: its id and keyword arguments, so
that recover_environment() makes the same environment with the same configuration, by
gymnasium.make), and, with eval_profiles, the evaluation spec (the same task on other
applications); ref_min_score 0 (the default placement saves no time, by definition) and
ref_max_score the oracle's mean return over the same episodes (when the oracle is at
hand: see "Policies"), so that minari.get_normalized_score is the learning benchmark's
score; and "tiergym", a JSON text of what made it: tiergym's version, the task's id and
its configuration in force (every key, from the server), the profiles, seeds and policy.

Policies:
- a name: the reference policies and heuristics of the repository's
  agents_examples/policies.py ("oracle", "hemem", "memtis", "damos", "autonuma",
  "greedy", "random", "default", and any other it registers; "MODULE:FACTORY" too). They
  are loaded from that file when `policies` is not importable: a source checkout (pip
  install -e) has it beside the package; an installed wheel does not (pass an object).
- an object with reset(env, obs, info) and act(obs, info) (the interface of policies.py):
  it acts in the placement action mode on raw observations, on a twin of the task's
  environment (the same server, seed and profile) stepped in lockstep; its placement is
  recorded as the task's action (keep mode: 0 where a region stays, 1 + tier where it
  moves; placement mode: as it is). The twin's rewards must equal the task's at every
  step (they are the same dynamics), else recording stops with an error.
- a callable policy(obs, info) -> action in the task's own action space.

Episodes run on a private server (the environment's default); the recorded env_spec holds
no address, so the recovered environment starts its own.
"""

import argparse
import dataclasses
import importlib.util
import json
import os
import pathlib
import sys
import warnings

import gymnasium
import numpy as np

from .tasks import DEFAULT_TASK_ID

__all__ = ["record", "load_policy", "episode_returns", "parse_seeds", "DEFAULT_INFO_KEYS"]

# The step infos a dataset keeps (numeric, the same shape every step; "profile" is in the
# episode's reset options, the refused regions as their number).
DEFAULT_INFO_KEYS = ("interval_ns", "default_interval_ns", "migration_ns", "elapsed_ns",
                     "default_elapsed_ns", "default_total_ns", "step", "migrated_bytes",
                     "tier_used_bytes", "action_mask")


def _minari():
    try:
        import minari
        import h5py  # noqa: F401 (Minari's default storage)
    except ImportError as e:
        raise ImportError(f"tiergym.offline needs Minari with its HDF5 storage ({e}): "
                          "pip install \"tiergym[offline]\"") from None
    return minari


class _Recorder(gymnasium.Wrapper):
    """Keeps every episode's steps as Minari's episode buffers: observations (one more
    than steps: the reset's), actions, rewards, terminations, truncations, and the numeric
    infos of `keys` (the reset's too) with the number of refused regions. (Minari's own
    DataCollector does the same through jax's tree utilities, a large dependency.)"""

    def __init__(self, env, keys):
        super().__init__(env)
        self.keys = tuple(keys)
        self.episodes = []
        self._current = None

    def _info(self, info):
        kept = {k: np.asarray(info[k]) for k in self.keys if k in info}
        kept["refused"] = np.asarray(len(info.get("refused_regions", ())), dtype=np.int64)
        return kept

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        self._current = dict(seed=seed, options=options, observations=[np.array(obs)],
                             actions=[], rewards=[], terminations=[], truncations=[],
                             infos={k: [v] for k, v in self._info(info).items()})
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        episode = self._current
        episode["observations"].append(np.array(obs))
        episode["actions"].append(np.array(action))
        episode["rewards"].append(float(reward))
        episode["terminations"].append(bool(terminated))
        episode["truncations"].append(bool(truncated))
        for k, v in self._info(info).items():
            episode["infos"][k].append(v)
        if terminated or truncated:
            self._finish()
        return obs, reward, terminated, truncated, info

    def _finish(self):
        from minari.data_collector import EpisodeBuffer
        e = self._current
        self._current = None
        self.episodes.append(EpisodeBuffer(
            id=len(self.episodes), seed=e["seed"], options=e["options"],
            observations=e["observations"], actions=e["actions"], rewards=e["rewards"],
            terminations=e["terminations"], truncations=e["truncations"], infos=e["infos"]))


def load_policy(name, seed=0):
    """A policy of agents_examples/policies.py by name (policies.make_policy), from the
    `policies` module when importable, else from the repository beside this package."""
    try:
        import policies
    except ImportError:
        path = pathlib.Path(__file__).resolve().parents[3] / "agents_examples" / "policies.py"
        if not path.is_file():
            raise ValueError(
                f"policy {name!r}: policies by name come from agents_examples/policies.py of "
                "tiergym's repository, which is neither importable (`policies`) nor beside "
                "this package; put agents_examples on PYTHONPATH, or pass a policy object "
                "or a callable") from None
        spec = importlib.util.spec_from_file_location("policies", path)
        policies = importlib.util.module_from_spec(spec)
        sys.modules["policies"] = policies
        spec.loader.exec_module(policies)
    return policies.make_policy(name, seed=seed)


def _placement_to_task(placement, tiers_now, action_mode):
    placement = np.asarray(placement, dtype=np.int64)
    if action_mode == "placement":
        return placement
    if action_mode == "keep":
        return np.where(placement == tiers_now, 0, 1 + placement).astype(np.int64)
    raise ValueError(f"a placement policy cannot act in the {action_mode!r} action mode (one "
                     "move per step); use a task in the keep or placement mode, or a callable "
                     "of the task's own actions")


def _region_tiers(env, obs):
    """Each region's tier, from a raw observation (env/environment.h's layout)."""
    k = int(env.num_regions)
    f = int(env.tier_spec["obs_region_features"])
    t = len(env.tiers)
    return np.rint(np.asarray(obs[:k * f]).reshape(k, f)[:, 0] * max(t - 1, 1)).astype(np.int64)


class _Driver:
    """Runs one kind of policy on the task (see the module's documentation)."""

    def __init__(self, policy, task, policy_seed):
        self.task = task
        self.name = getattr(policy, "name", None) or getattr(policy, "__name__", None) or "policy"
        self.by_name = isinstance(policy, str)
        if self.by_name:
            self.name = policy
            policy = load_policy(policy, seed=policy_seed)
        self.policy = policy
        self.policy_seed = policy_seed
        self.twin = None
        self.placement = hasattr(policy, "act") and hasattr(policy, "reset")
        if not self.placement and not callable(policy):
            raise TypeError(f"policy: a name, an object with reset(env, obs, info) and "
                            f"act(obs, info), or a callable (obs, info) -> action; got "
                            f"{type(policy).__name__}")
        if self.placement:
            from .env import TierEnv
            config = dict(task.config, action_mode="placement", observation="raw")
            self.action_mode = task.config["action_mode"]
            _placement_to_task(np.zeros(task.num_regions, np.int64),
                               np.zeros(task.num_regions, np.int64), self.action_mode)
            self.twin = TierEnv(address=task.endpoint, **config)

    def reset(self, obs, info, seed, options):
        if self.by_name:  # a named policy is made anew, seeded with the episode's seed
            self.policy = load_policy(self.name, seed=self.policy_seed + seed)
        if self.twin is not None:
            self.twin_obs, self.twin_info = self.twin.reset(seed=seed, options=options)
            self.policy.reset(self.twin, self.twin_obs, self.twin_info)

    def act(self, obs, info):
        if self.twin is None:
            return self.policy(obs, info)
        placement = self.policy.act(self.twin_obs, self.twin_info)
        self.placement_now = np.asarray(placement, dtype=np.int64)
        return _placement_to_task(self.placement_now, _region_tiers(self.twin, self.twin_obs),
                                  self.action_mode)

    def stepped(self, reward, step):
        if self.twin is None:
            return
        self.twin_obs, twin_reward, _, _, self.twin_info = self.twin.step(self.placement_now)
        if twin_reward != reward:
            raise RuntimeError(f"step {step}: the task's reward {reward!r} differs from the "
                               f"policy's placement-mode twin's {twin_reward!r}; the recorded "
                               "actions would not be the policy's")

    def close(self):
        if self.twin is not None:
            self.twin.close()


def _as_list(value):
    if value is None:
        return None
    if isinstance(value, str):
        return [v for v in value.split(",") if v]
    return [str(v) for v in value]


def _run(env, driver, profiles, seeds, on_episode=None):
    """Episodes of `driver` on `env` (a gymnasium env, maybe a _Recorder): one per
    profile and seed; returns [(profile, seed, return)]."""
    out = []
    for profile in profiles:
        for seed in seeds:
            options = {"profile": profile}
            obs, info = env.reset(seed=int(seed), options=options)
            driver.reset(obs, info, int(seed), options)
            total, step = 0.0, 0
            while True:
                action = driver.act(obs, info)
                obs, reward, terminated, truncated, info = env.step(action)
                driver.stepped(reward, step)
                total += float(reward)
                step += 1
                if terminated or truncated:
                    break
            out.append((profile, int(seed), total))
            if on_episode is not None:
                on_episode(profile, int(seed), total)
    return out


def episode_returns(policy, env_id=DEFAULT_TASK_ID, profiles=None, seeds=(0,), policy_seed=0,
                    **config):
    """[(profile, seed, return)] of `policy` (as record() takes it) on the task, without
    recording: the reference a dataset's policy is measured against."""
    env = gymnasium.make(env_id, **_task_kwargs(profiles, config))
    try:
        task = env.unwrapped
        driver = _Driver(policy, task, policy_seed)
        try:
            return _run(env, driver, _as_list(profiles) or task.profiles, list(seeds))
        finally:
            driver.close()
    finally:
        env.close()


def _task_kwargs(profiles, config):
    kwargs = dict(config)
    if profiles is not None:
        kwargs["profiles"] = ",".join(_as_list(profiles))
    if "address" in kwargs:
        raise ValueError("address: a dataset's episodes run on a private server, so that the "
                         "recorded spec makes the same environment anywhere")
    return kwargs


def record(dataset_id, policy, *, env_id=DEFAULT_TASK_ID, profiles=None, seeds=(0,),
           eval_profiles=None, policy_seed=0, reference="oracle", description=None,
           author="tiergym.offline", info_keys=DEFAULT_INFO_KEYS, data_format=None,
           log=None, **config):
    """Records one episode of `policy` per (profile, seed) on the task `env_id` (with
    `config`'s keys over its own; `profiles` the applications, default the task's) into
    the Minari dataset `dataset_id` ("namespace/env_name/name-vN"), and returns it
    (minari.MinariDataset). eval_profiles: the applications of the dataset's evaluation
    environment (recover_environment(eval_env=True)). reference: a policy whose mean return
    over the same episodes is ref_max_score (None: no reference scores). log(text) is
    called after each episode. FileExistsError when the dataset exists (minari's
    delete_dataset removes it)."""
    minari = _minari()
    from minari.storage import get_dataset_path
    if os.path.exists(os.path.join(get_dataset_path(dataset_id), "data")):
        raise FileExistsError(f"dataset {dataset_id!r} exists at {get_dataset_path(dataset_id)}; "
                              f"minari.delete_dataset({dataset_id!r}) removes it")
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("seeds: at least one")
    kwargs = _task_kwargs(profiles, config)
    env = gymnasium.make(env_id, **kwargs)
    try:
        task = env.unwrapped
        driver = _Driver(policy, task, policy_seed)
        try:
            recorder = _Recorder(env, info_keys)
            names = _as_list(profiles) or list(task.profiles)
            returns = _run(recorder, driver, names, seeds, on_episode=None if log is None else
                           (lambda p, s, r: log(f"{driver.name} on {p}, seed {s}: return {r:+.4f}")))
            mean = float(np.mean([r for _, _, r in returns]))
            metadata = {}
            if reference is not None:  # its episodes, unrecorded, before the dataset is made
                best = mean
                if reference != driver.name:
                    reference_driver = _Driver(reference, task, policy_seed)
                    try:
                        best = float(np.mean([r for _, _, r in
                                              _run(env, reference_driver, names, seeds)]))
                    finally:
                        reference_driver.close()
                metadata.update(ref_min_score=0.0, ref_max_score=best)
        finally:
            driver.close()
        eval_env = env.spec  # (Minari warns when none is given; it would take this one)
        if eval_profiles is not None:
            spec = gymnasium.spec(env_id)
            eval_env = dataclasses.replace(
                spec, kwargs={**spec.kwargs, **_task_kwargs(eval_profiles, config)})
        with warnings.catch_warnings():  # (no e-mail address to give)
            warnings.filterwarnings("ignore", message="`author_email` is set to None")
            dataset = minari.create_dataset_from_buffers(
                dataset_id, recorder.episodes, env=env, eval_env=eval_env,
                algorithm_name=driver.name, author=author,
                code_permalink=f"tiergym {_version()}: tiergym.offline.record",
                description=description or (
                    f"{driver.name} on {env_id}: {len(returns)} episodes ({', '.join(names)}; "
                    f"seeds {', '.join(map(str, seeds))}), mean return {mean:+.4f}"),
                requirements=[f"tiergym=={_version()}"] if _version() != "0+unknown" else None,
                data_format=data_format)
        metadata["tiergym"] = json.dumps({
            "version": _version(), "env_id": env_id, "config": dict(task.config),
            "profiles": names, "seeds": seeds, "policy": driver.name,
            "policy_seed": policy_seed, "eval_profiles": _as_list(eval_profiles),
            "returns": [[p, s, r] for p, s, r in returns]}, sort_keys=True)
        dataset.storage.update_metadata(metadata)
        return dataset
    finally:
        env.close()


def _version():
    """The installed distribution's version (tiergym.__version__'s source)."""
    from importlib import metadata
    try:
        return metadata.version("tiergym")
    except metadata.PackageNotFoundError:  # a source tree on sys.path, not installed
        return "0+unknown"


def parse_seeds(text):
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        first, dash, last = part.partition("-")
        try:
            out += list(range(int(first), int(last) + 1)) if dash else [int(first)]
        except ValueError:
            raise argparse.ArgumentTypeError(f"seeds: {part!r} is not N or N-M") from None
    if not out:
        raise argparse.ArgumentTypeError("seeds: at least one")
    return out


def _key_value(text):
    key, eq, value = text.partition("=")
    if not eq or not key:
        raise argparse.ArgumentTypeError(f"--set {text!r}: expected KEY=VALUE")
    for kind in (int, float):
        try:
            return key, kind(value)
        except ValueError:
            pass
    return key, value


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m tiergym.offline",
        description="Record a policy's episodes on a tiergym task into a Minari dataset "
                    "(one episode per profile and seed; minari.load_dataset opens it, "
                    "recover_environment() makes the task).",
        epilog="Datasets go to $MINARI_DATASETS_PATH (default ~/.minari/datasets). "
               "Exit status: 0 written, 1 refused (the dataset exists, a policy or profile "
               "is unknown), 2 a usage error.")
    parser.add_argument("--policy", required=True,
                        help="a policy of agents_examples/policies.py by name (oracle, hemem, "
                             "memtis, damos, autonuma, greedy, random, default) or MODULE:FACTORY")
    parser.add_argument("--dataset-id", required=True,
                        help="the Minari id, e.g. tiergym/TierPlacement-v1/oracle-train-v0")
    parser.add_argument("--env-id", default=DEFAULT_TASK_ID,
                        help=f"the task (default {DEFAULT_TASK_ID})")
    parser.add_argument("--profiles", help="applications, comma-separated (default: the task's)")
    parser.add_argument("--seeds", type=parse_seeds, default=[0],
                        help="episode seeds: 0-3 or 0,5,9 (default 0); one episode per profile "
                             "and seed")
    parser.add_argument("--eval-profiles",
                        help="applications of the dataset's evaluation environment")
    parser.add_argument("--set", type=_key_value, action="append", default=[],
                        metavar="KEY=VALUE", help="a configuration key over the task's "
                                                  "(repeatable), e.g. steps=50")
    parser.add_argument("--reference", default="oracle",
                        help="the policy whose mean return is ref_max_score (default oracle; "
                             "'none': no reference scores)")
    parser.add_argument("--policy-seed", type=int, default=0)
    parser.add_argument("--description")
    parser.add_argument("--quiet", action="store_true", help="no line per episode")
    args = parser.parse_args(argv)
    log = None if args.quiet else (lambda text: print(text, file=sys.stderr, flush=True))
    try:
        dataset = record(args.dataset_id, args.policy, env_id=args.env_id,
                         profiles=args.profiles, seeds=args.seeds,
                         eval_profiles=args.eval_profiles, policy_seed=args.policy_seed,
                         reference=None if args.reference == "none" else args.reference,
                         description=args.description, log=log, **dict(args.set))
    except (FileExistsError, ValueError, TypeError, ImportError) as e:
        print(f"tiergym.offline: {e}", file=sys.stderr)
        return 1
    meta = dataset.storage.metadata
    score = ""
    if "ref_max_score" in meta:
        score = f", reference (max) {meta['ref_max_score']:+.4f}"
    print(f"{args.dataset_id}: {dataset.total_episodes} episodes, {dataset.total_steps} steps"
          f"{score}; at {dataset.storage.data_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
