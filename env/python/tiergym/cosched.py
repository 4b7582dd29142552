"""Co-scheduled applications: K tenants on one node, in this process (env/cosched).

Two views of one node (the C++ dynamics of env/cosched/cosched_env.h, through the
extension tiergym._core):

    from tiergym import cosched
    env = cosched.parallel_env(scenario="knl-2")          # PettingZoo ParallelEnv
    observations, infos = env.reset(seed=0)
    while env.agents:
        actions = {a: env.action_space(a).sample() for a in env.agents}
        observations, rewards, terminations, truncations, infos = env.step(actions)

    env = gymnasium.make("tiergym/CoschedScheduler-v0", scenario="knl-4")  # one scheduler
    obs, info = env.reset(seed=0)

ParallelEnv: one agent per tenant (named after its application; a repeated one "#2",
"#3"). An agent observes its own regions (the single-application layout: tier, last and
decayed access shares, size share per region), then the node's fill of each tier, its
progress, its last interval's time against its solo default, and the interference it
measured on each tier (co-runners' bandwidth / the tier's, at most 1). Its reward is its
own time saved in the step ((default - interval - migration) / its default total, as
TierEnv's), mixed with the mean of the running tenants' rewards by `global_weight` (0: own
only, 1: the node's mean only). An agent that finishes is terminated and leaves `agents`;
an agent that has not yet joined (tenant_start_steps) acts without effect (its action is
checked all the same: a bad one is a ValueError naming actions[i]).

SchedulerEnv (Gymnasium, id "tiergym/CoschedScheduler-v0"): one agent places every
tenant's regions. Observation: the tenants' observations, concatenated; action: the
tenants' actions, concatenated (MultiDiscrete). Reward (`objective`):
  "total"    the sum of the tenants' rewards (the episode's return is the sum of the
             tenants' fractional speedups);
  "geomean"  the mean over tenants of the step's change of log(default elapsed / elapsed):
             the return is the log of the tenants' geometric-mean speedup.
minus, per tenant whose speed in a step (its solo default interval over its contended
interval plus migration) falls below `qos_min` (a fraction of its solo speed; default
0.5), `qos_penalty` (default 1.0) times the shortfall, divided by the number of tenants.

Over ZeroMQ: `address=` (an endpoint, a connection.Server, or "private" for a private
`tiergym serve` stopped on close()) drives the same node on a server (make, reset and step
with the tenants' actions, env/PROTOCOL.md "Co-scheduling"), with `timeout=` and
`server_args=` as TierEnv's; the
same configuration, seed and actions give bit-identical observations and rewards. There,
tenants are the server's served profiles (a private server serves the bundled profiles
recorded on the configuration's machine preset, as in process) or profile directories in
its data directories, and `sensitivity`, when
not given, is the server's (a private server's: the bundled curves). Without `address`
(the default) the node runs in this process.

Configuration: a scenario's keys (SCENARIOS, or scenario=None and your own), overridden by
keyword arguments: the keys of env/cosched (tenants, tenant_start_steps,
start_jitter_steps, tenant_read_pct, contention_max_passes, sensitivity,
sensitivity_method, machine, num_regions, steps, action_mode, observation, model,
history_decay, migration_gbps, tier_capacity_mib, ...). A tenant named by a bundled
application (minife, lulesh, nekbone, lammps) is its bundled synthetic profile for the
machine, generated on first use. `sensitivity` defaults to the bundled curves
(estimator/contention/data/curves.csv); `tenant_read_pct` (each tenant's share of reads in
its traffic, which picks the co-runners' curves) to the bundled applications' shares
(estimator/contention/data/apps.csv: read / (read + write) bandwidth; minife 85 %, lulesh
65 %, nekbone 72 %, lammps 80 %), 100 for a tenant not among them, when any tenant is.
"""

import csv
import math
import pathlib

import gymnasium
import numpy as np

from ._native import load_core
from ._protocol import COSCHED_ENV_ID, decode_array, decode_info, decode_spec, encode_array
from .connection import DEFAULT_TIMEOUT_S, close_connection, open_connection
from .errors import EpisodeInterrupted

# Registered by tiergym.register_envs (on import of tiergym).
COSCHED_SCHEDULER_ID = "tiergym/CoschedScheduler-v0"

# Bundled scenarios: two and four tenants of the bundled applications on knl (a 2 GiB or
# 4 GiB share of HBM: the tenants compete for its capacity and bandwidth) and on disagg
# (the same, with the far remote pool every tenant may spill into and share).
_TWO = ["minife", "lulesh"]
_FOUR = ["minife", "lulesh", "nekbone", "lammps"]
_COMMON = {"num_regions": 16, "steps": 50, "action_mode": "placement"}
SCENARIOS = {
    "knl-2": {**_COMMON, "machine": "knl", "tenants": _TWO, "tier_capacity_mib": "hbm:2048"},
    "knl-4": {**_COMMON, "machine": "knl", "tenants": _FOUR, "tier_capacity_mib": "hbm:4096",
              "tenant_start_steps": "0,0,10,20"},
    "disagg-2": {**_COMMON, "machine": "disagg", "tenants": _TWO,
                 "tier_capacity_mib": "hbm:2048"},
    "disagg-4": {**_COMMON, "machine": "disagg", "tenants": _FOUR,
                 "tier_capacity_mib": "hbm:4096", "tenant_start_steps": "0,0,10,20"},
}


def bundled_curves():
    """The bundled sensitivity curves: installed in the package (data/curves.csv) or in
    the source tree (estimator/contention/data/curves.csv)."""
    here = pathlib.Path(__file__).resolve().parent
    for path in (here / "data" / "curves.csv",
                 here.parents[2] / "estimator" / "contention" / "data" / "curves.csv"):
        if path.is_file():
            return str(path)
    raise FileNotFoundError("the bundled sensitivity curves (curves.csv) are not installed; "
                            "pass sensitivity=PATH")


def _bundled_data(name):
    here = pathlib.Path(__file__).resolve().parent
    for path in (here / "data" / name,
                 here.parents[2] / "estimator" / "contention" / "data" / name):
        if path.is_file():
            return path
    return None


def bundled_read_pct():
    """The bundled applications' read shares (%), {app: read / (read + write) bandwidth x
    100}, from apps.csv beside the bundled curves; {} when it is not installed."""
    path = _bundled_data("apps.csv")
    if path is None:
        return {}
    shares = {}
    with open(path, encoding="utf-8", newline="") as f:
        rows = csv.DictReader(f)
        for row in rows:
            try:
                app, read, write = row["app"], float(row["read_gbps"]), float(row["write_gbps"])
            except (KeyError, TypeError, ValueError) as e:
                raise ValueError(f"{path}:{rows.line_num}: expected app,read_gbps,write_gbps "
                                 f"({type(e).__name__}: {e})") from None
            if read + write > 0:
                shares[app] = 100.0 * read / (read + write)
    return shares


def _default_read_pct(tenants):
    """Each tenant's bundled read share (100 for one not bundled); None when none is."""
    shares = bundled_read_pct()
    names = [pathlib.PurePath(str(t)).name for t in tenants]
    if not any(n in shares for n in names):
        return None
    return [round(shares.get(n, 100.0), 2) for n in names]


def scenario_config(scenario=None, _default_curves=True, **overrides):
    """The configuration of a bundled scenario (SCENARIOS) with `overrides` applied;
    ValueError for an unknown scenario."""
    if scenario is None:
        config = {}
    elif scenario in SCENARIOS:
        config = dict(SCENARIOS[scenario])
    else:
        raise ValueError(f"unknown scenario {scenario!r} (bundled: {', '.join(SCENARIOS)})")
    config.update(overrides)
    if "sensitivity" not in config and _default_curves:
        config["sensitivity"] = bundled_curves()
    if "tenant_read_pct" not in config and "tenants" in config:
        tenants = config["tenants"]
        if isinstance(tenants, str):
            tenants = [t for t in tenants.split(",") if t]
        shares = _default_read_pct(tenants)
        if shares is not None:
            config["tenant_read_pct"] = shares
    out = {}
    for key, value in config.items():
        if isinstance(value, (list, tuple)):
            value = [str(v) for v in value]
        elif isinstance(value, (np.integer,)):
            value = int(value)
        elif isinstance(value, (np.floating,)):
            value = float(value)
        out[key] = value
    return out


def _space(d):
    if d["type"] == "box":
        return gymnasium.spaces.Box(d["low"], d["high"], tuple(d["shape"]), np.float32)
    if d["type"] == "discrete":
        return gymnasium.spaces.Discrete(d["n"])
    return gymnasium.spaces.MultiDiscrete(np.full(tuple(d["shape"]), d["nvec"], np.int64))


class Node:
    """The node's dynamics with Gymnasium spaces: in this process (tiergym._core.CoschedCore)
    when `address` is None, else over the ZeroMQ protocol (ZmqNode)."""

    def __init__(self, scenario=None, address=None, timeout=None, server_args=(), curve=None,
                 reconnect=None, **config):
        if address is not None:
            self.core = ZmqNode(scenario_config(scenario, _default_curves=False, **config),
                                address, timeout, server_args, curve, reconnect)
            self.config = self.core.config
        else:
            self.config = scenario_config(scenario, **config)
            self.core = load_core().CoschedCore(self.config)
        self.spec = self.core.spec
        self.tenants = list(self.core.tenant_names)
        self.observation_space = _space(self.spec["observation"])
        self.action_space = _space(self.spec["action"])

    def reset(self, seed=None):
        return self.core.reset(None if seed is None else int(seed))

    def step(self, actions):
        """actions: one per tenant, each an action of action_space or None (keep)."""
        arrays = []
        for a in actions:
            arrays.append(None if a is None else
                          np.ascontiguousarray(np.asarray(a, dtype=np.int64).reshape(-1)))
        return self.core.step(arrays)

    def close(self):
        close = getattr(self.core, "close", None)
        if close is not None:
            close()


class ZmqNode:
    """A co-scheduling node on a tiergym server (make of tiergym/CoschedNode-v0, then reset
    and step with the tenants' actions: env/PROTOCOL.md "Co-scheduling"), with CoschedCore's
    interface: the same dicts from reset and step.

    address: an endpoint ("tcp://host:port", "ipc:///path"), a connection.Server, or
    "private" (a private `tiergym serve` started for this node and stopped by close(); it
    serves the bundled profiles and curves). A configuration without `sensitivity` uses the
    server's curves (`tiergym serve --sensitivity`). `curve` and `reconnect` as TierEnv's:
    a step that meets the loss of the server returns the node's last step with every
    tenant's reward 0 and "interrupted" set to the reason (the node made again; reset it)."""

    def __init__(self, config, address, timeout=None, server_args=(), curve=None,
                 reconnect=None):
        timeout = DEFAULT_TIMEOUT_S if timeout is None else timeout
        args = list(server_args)
        if address == "private":
            if "--sensitivity" not in args:
                args += ["--sensitivity", bundled_curves()]
            address = None  # open_connection starts a private server
        # A private server serves the bundled profiles recorded on the machine.
        self._connection, self._server = open_connection(address, timeout, args, curve,
                                                         reconnect,
                                                         machine=config.get("machine"))
        self._session = None
        self._last = None
        try:
            made = self._connection.call("make", env=COSCHED_ENV_ID, config=config)
        except BaseException:
            self.close()
            raise
        self._session = made["session"]
        self.config = dict(made["config"])
        self.tenant_names = list(made["tenants"])
        self.num_tenants = len(self.tenant_names)
        spec = decode_spec(made["spec"])
        bounds = spec["region_bounds"]
        region_bytes = []
        for name in self.tenant_names:
            p = spec["profiles"].index(name.split("#")[0])
            region_bytes.append((bounds[p, :, 1] - bounds[p, :, 0]).astype(np.uint64))
        spec["tenant_region_bytes"] = region_bytes
        self.spec = spec

    def reset(self, seed=None):
        fields = {"session": self._session}
        if seed is not None:
            fields["seed"] = int(seed)
        self._last = _node_dict(self._connection.call("reset", **fields))
        return self._last

    def step(self, actions):
        wire = [None if a is None else encode_array(a, "int64") for a in actions]
        try:
            self._last = _node_dict(self._connection.call("step", session=self._session,
                                                          actions=wire))
        except EpisodeInterrupted as e:
            if self._last is None:
                raise
            cut = dict(self._last, interrupted=e.reason, done=True)
            cut["tenants"] = [dict(t, reward=0.0, terminated=False) for t in cut["tenants"]]
            return cut
        return self._last

    def close(self):
        if getattr(self, "_connection", None) is None:
            return
        close_connection(self._connection, self._server,
                         [self._session] if self._session is not None else [])
        self._connection = None


def _node_dict(reply):
    """A node's reset or step reply as CoschedCore returns a node step."""
    tenants = []
    for t in reply["tenants"]:
        # The step info as the in-process node gives it (refused regions a list, the mask
        # uint8), then the tenant's own.
        info = decode_info(t["info"], sequences=list, masks=None)
        info["solo_interval_ns"] = float(t["solo_interval_ns"])
        for key in ("slowdown", "bandwidth_gbps", "interference_gbps"):
            info[key] = decode_array(t[key])
        tenants.append({"obs": decode_array(t["obs"]), "reward": float(t["reward"]),
                        "active": bool(t["active"]), "waiting": bool(t["waiting"]),
                        "terminated": bool(t["terminated"]), "info": info})
    return {"tenants": tenants, "step": int(reply["step"]), "step_ns": float(reply["step_ns"]),
            "elapsed_ns": float(reply["elapsed_ns"]),
            "tier_used_bytes": decode_array(reply["tier_used_bytes"]),
            "tier_bandwidth_gbps": decode_array(reply["tier_bandwidth_gbps"]),
            "done": bool(reply["done"])}


def _tenant_info(t):
    info = dict(t["info"])
    info["active"] = t["active"]
    info["waiting"] = t["waiting"]
    return info


try:
    from pettingzoo import ParallelEnv as _ParallelBase
except ImportError:  # PettingZoo is an extra (pip install "tiergym[pettingzoo]")
    _ParallelBase = object


class CoschedParallelEnv(_ParallelBase):
    """PettingZoo ParallelEnv: one agent per tenant (see the module's documentation)."""

    metadata = {"name": "tiergym_cosched_v0", "render_modes": [], "is_parallelizable": True}

    def __init__(self, scenario="knl-2", global_weight=0.0, render_mode=None, address=None,
                 **config):
        if _ParallelBase is object:
            raise ImportError("tiergym.cosched.CoschedParallelEnv needs PettingZoo: "
                              "pip install \"tiergym[pettingzoo]\"")
        if not 0.0 <= float(global_weight) <= 1.0:
            raise ValueError(f"global_weight: {global_weight} is not in [0, 1]")
        if render_mode is not None:
            raise ValueError("render_mode: tiergym renders nothing (None only)")
        self.render_mode = None
        self.global_weight = float(global_weight)
        self.node = Node(scenario, address=address, **config)
        self.possible_agents = list(self.node.tenants)
        self.agents = []
        self._last = None
        self._index = {a: i for i, a in enumerate(self.possible_agents)}
        self.observation_spaces = {a: self.node.observation_space for a in self.possible_agents}
        self.action_spaces = {a: self.node.action_space for a in self.possible_agents}
        k = len(self.possible_agents)
        self.state_space = gymnasium.spaces.Box(
            0.0, 1.0, (k * self.node.observation_space.shape[0],), np.float32)

    def observation_space(self, agent):
        return self.observation_spaces[agent]

    def action_space(self, agent):
        return self.action_spaces[agent]

    def reset(self, seed=None, options=None):
        r = self.node.reset(seed)
        self._last = r
        self.agents = list(self.possible_agents)
        observations = {a: r["tenants"][i]["obs"] for i, a in enumerate(self.possible_agents)}
        infos = {a: _tenant_info(r["tenants"][i]) for i, a in enumerate(self.possible_agents)}
        return observations, infos

    def step(self, actions):
        if not self.agents:
            raise RuntimeError("step after every agent has finished; call reset")
        unknown = set(actions) - set(self.agents)
        if unknown:
            raise ValueError(f"actions for agents not in the episode: {sorted(unknown)}")
        r = self.node.step([actions.get(a) for a in self.possible_agents])
        self._last = r
        cut = r.get("interrupted")  # the server was lost (reconnect): every episode cut
        tenants = r["tenants"]
        running = [t["reward"] for t in tenants if t["active"]]
        node_mean = float(np.mean(running)) if running else 0.0
        w = self.global_weight
        observations, rewards, terminations, truncations, infos = {}, {}, {}, {}, {}
        for a in self.agents:
            t = tenants[self._index[a]]
            observations[a] = t["obs"]
            rewards[a] = (1 - w) * t["reward"] + w * node_mean
            terminations[a] = bool(t["terminated"])
            truncations[a] = cut is not None
            infos[a] = _tenant_info(t)
            if cut is not None:
                infos[a]["interrupted"] = cut
        self.agents = [a for a in self.agents if not (terminations[a] or truncations[a])]
        return observations, rewards, terminations, truncations, infos

    def render(self):
        return None

    def close(self):
        self.node.close()

    def state(self):
        """The node's state: every tenant's observation, concatenated (the scheduler view's
        observation)."""
        if self._last is None:
            raise RuntimeError("state() before reset")
        return np.concatenate([t["obs"] for t in self._last["tenants"]]).astype(np.float32)


def parallel_env(scenario="knl-2", **kwargs):
    """A CoschedParallelEnv (PettingZoo's naming)."""
    return CoschedParallelEnv(scenario=scenario, **kwargs)


class SchedulerEnv(gymnasium.Env):
    """Gymnasium: one scheduler places every tenant's regions (see the module's
    documentation)."""

    metadata = {"render_modes": []}

    def __init__(self, scenario="knl-2", objective="total", qos_min=0.5, qos_penalty=1.0,
                 render_mode=None, address=None, **config):
        if objective not in ("total", "geomean"):
            raise ValueError(f"objective: {objective!r} is not 'total' or 'geomean'")
        if not 0.0 <= float(qos_min) <= 1.0:
            raise ValueError(f"qos_min: {qos_min} is not in [0, 1]")
        if float(qos_penalty) < 0:
            raise ValueError(f"qos_penalty: {qos_penalty} is negative")
        if render_mode is not None:
            raise ValueError("render_mode: tiergym renders nothing (None only)")
        self.render_mode = None
        self.objective = objective
        self.qos_min = float(qos_min)
        self.qos_penalty = float(qos_penalty)
        self.node = Node(scenario, address=address, **config)
        self.tenants = self.node.tenants
        k = len(self.tenants)
        tenant_obs = self.node.observation_space
        self.observation_space = gymnasium.spaces.Box(
            0.0, 1.0, (k * tenant_obs.shape[0],), np.float32)
        tenant_action = self.node.action_space
        if isinstance(tenant_action, gymnasium.spaces.Discrete):
            self._per_tenant = 1
            nvec = np.full(k, tenant_action.n, np.int64)
        else:
            self._per_tenant = int(np.prod(tenant_action.shape))
            nvec = np.tile(np.asarray(tenant_action.nvec, np.int64).reshape(-1), k)
        self.action_space = gymnasium.spaces.MultiDiscrete(nvec)
        self._log_ratio = np.zeros(k)
        self._done = True

    def _obs(self, r):
        return np.concatenate([t["obs"] for t in r["tenants"]]).astype(np.float32)

    def _info(self, r):
        return {"tenants": [_tenant_info(t) for t in r["tenants"]],
                "node_elapsed_ns": r["elapsed_ns"], "node_step_ns": r["step_ns"],
                "tier_used_bytes": r["tier_used_bytes"],
                "tier_bandwidth_gbps": r["tier_bandwidth_gbps"]}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        if seed is None:  # Gymnasium's generator, seeded from entropy, seeds the node
            seed = int(self.np_random.integers(0, 2**63 - 1))
        r = self.node.reset(seed)
        self._log_ratio = np.zeros(len(self.tenants))
        self._done = False
        return self._obs(r), self._info(r)

    def step(self, action):
        if self._done:
            raise RuntimeError("step after the episode ended; call reset")
        action = np.asarray(action, dtype=np.int64).reshape(-1)
        if action.shape != self.action_space.shape:
            raise ValueError(f"action: expected {self.action_space.shape[0]} values, got "
                             f"{action.shape[0]}")
        n = self._per_tenant
        if n == 1:
            parts = [int(v) for v in action]
        else:
            parts = [action[i * n:(i + 1) * n] for i in range(len(self.tenants))]
        r = self.node.step(parts)
        tenants = r["tenants"]
        k = len(tenants)
        if self.objective == "total":
            reward = float(sum(t["reward"] for t in tenants))
        else:
            log_ratio = np.array([
                math.log(t["info"]["default_elapsed_ns"] / t["info"]["elapsed_ns"])
                if t["info"]["elapsed_ns"] > 0 and t["info"]["default_elapsed_ns"] > 0 else 0.0
                for t in tenants])
            reward = float(np.mean(log_ratio - self._log_ratio))
            self._log_ratio = log_ratio
        shortfall = 0.0
        for t in tenants:
            if not t["active"]:
                continue
            charged = t["info"]["interval_ns"] + t["info"]["migration_ns"]
            speed = t["info"]["default_interval_ns"] / charged if charged > 0 else 1.0
            shortfall += max(0.0, self.qos_min - speed)
        reward -= self.qos_penalty * shortfall / k
        cut = r.get("interrupted")  # the server was lost (reconnect): the episode cut
        self._done = bool(r["done"])
        info = self._info(r)
        info["qos_shortfall"] = shortfall
        if cut is not None:
            info["interrupted"] = cut
            return self._obs(r), 0.0, False, True, info
        return self._obs(r), reward, self._done, False, info

    def render(self):
        return None

    def close(self):
        self.node.close()
