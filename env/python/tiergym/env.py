"""TierEnv: one placement environment session, a gymnasium.Env.

    env = gymnasium.make("tiergym/TierPlacement-v0", num_regions=16)   # or tiergym.make
    obs, info = env.reset(seed=1)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    env.close()

Without `address` the environment starts a private `tiergym serve` (connection.Server) and
stops it on close(); with `address` ("tcp://127.0.0.1:5555", "localhost:5555",
"ipc:///tmp/x.sock", or a connection.Server) it connects to that server. Configuration keys
(num_regions, steps, action_mode, machine, profiles, ...) are passed through to the server:
see `tiergym.config_keys()` or env/PROTOCOL.md.
"""

import numbers

import gymnasium
import numpy as np
from gymnasium import spaces

from ._protocol import ENV_ID, decode_array, decode_info, decode_spec, encode_array
from .connection import DEFAULT_TIMEOUT_S, Connection, Server
from .errors import ServerError, UnknownConfigKey

# Seeds drawn for unseeded first resets stay below 2^63 (the server takes any uint64).
_SEED_BOUND = 2**63 - 1


def space_from_spec(space):
    """A gymnasium space from its protocol description (PROTOCOL.md "Spaces")."""
    kind = space["type"]
    if kind == "box":
        return spaces.Box(low=space["low"], high=space["high"], shape=tuple(space["shape"]),
                          dtype=np.float32)
    if kind == "discrete":
        return spaces.Discrete(int(space["n"]))
    if kind == "multi_discrete":
        return spaces.MultiDiscrete(np.full(space["shape"], space["nvec"], dtype=np.int64))
    raise ValueError(f"unknown space type {kind!r}")


def config_to_wire(config):
    """Configuration values as the protocol takes them (str, int, float, bool, [str]).
    Splits of tiergym.datasets named in `profiles` are resolved first, in this process
    (datasets.resolve_config: their profile directories, generated on first use)."""
    from . import datasets  # noqa: PLC0415

    config = datasets.resolve_config(config)
    out = {}
    for key, value in config.items():
        if isinstance(value, (list, tuple)):
            out[key] = [str(v) for v in value]
        elif isinstance(value, (bool, np.bool_)):
            out[key] = bool(value)
        elif isinstance(value, numbers.Integral):
            out[key] = int(value)
        elif isinstance(value, numbers.Real):
            out[key] = float(value)
        else:
            out[key] = str(value)
    return out


def placement_to_wire(placement):
    """A placement as the protocol takes it: JSON text as it is, a dict as a map whose
    numbers are plain Python ints and floats (numpy scalars included)."""
    if isinstance(placement, str):
        return placement

    def plain(value):
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        if isinstance(value, numbers.Integral):
            return int(value)
        if isinstance(value, numbers.Real):
            return float(value)
        return value

    if not isinstance(placement, dict):
        raise TypeError(f"a placement is a dict or JSON text, not {type(placement).__name__}")
    return plain(placement)


def open_connection(address, timeout, server_args):
    """(connection, private server or None) for an address, a Server, or None."""
    if address is None:
        server = Server(args=server_args)
        try:
            return Connection(server.endpoint, timeout, server=server), server
        except BaseException:
            server.close()
            raise
    if isinstance(address, Server):
        return Connection(address.endpoint, timeout, server=address), None
    return Connection(str(address), timeout), None


def close_connection(connection, server, sessions):
    """Closes `sessions` on the server (when it is still there), then the connection and a
    private server. Stops at the first session that cannot be closed: the server is gone
    or has reclaimed it."""
    try:
        if connection is not None and (server is None or server.alive()):
            for session in sessions:
                try:
                    connection.call("close", timeout=5, session=session)
                except Exception:  # the server is gone or the session was reclaimed
                    break
    finally:
        if connection is not None:
            connection.close()
        if server is not None:
            server.close()


def integer_actions(action, name="action"):
    """`action` as an int64 array. Floats are taken only when they hold whole numbers (a
    float 0.7 is refused, never truncated to tier 0)."""
    a = np.asarray(action)
    if a.dtype == object:
        try:
            a = a.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: expected integers, got {action!r}") from None
    if np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_:
        return a.astype(np.int64)
    if np.issubdtype(a.dtype, np.floating):
        bad = ~np.isfinite(a) | (a != np.round(a))
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            index = "".join(f"[{i}]" for i in where)
            raise ValueError(f"{name}{index}: {a[where].item()!r} is not a whole number; actions are "
                             "tier (or move) indices, integers")
        return a.astype(np.int64)
    raise ValueError(f"{name}: expected integers, got dtype {a.dtype}")


def action_to_wire(action, space):
    a = integer_actions(action)
    if isinstance(space, spaces.Discrete):
        if a.size != 1:
            raise ValueError(f"action: expected one integer, got shape {a.shape}")
        return int(a.reshape(()))
    return encode_array(a, "int64")


def flat_mask(mask):
    """An info's action_mask as MaskablePPO takes it: one flat bool array (placement mode:
    the per-region masks concatenated, [num_regions * tiers]; move mode: [n])."""
    return np.asarray(mask, dtype=bool).reshape(-1)


class TierEnv(gymnasium.Env):
    """A placement environment served by `tiergym serve`.

    Keyword arguments: `address` (default: a private server), `timeout` (seconds per
    request), `server_args` (options of the private server), `render_mode` (None or
    "ansi"), and configuration keys. A TierEnv pickles as its constructor call: unpickled
    (in a subprocess, say) it is a new session with the same configuration, on the same
    server (a Server address travels as its endpoint) or on a new private one.
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, address=None, *, timeout=DEFAULT_TIMEOUT_S, server_args=(),
                 render_mode=None, **config):
        self._connection = None
        self._server = None
        self.session = None
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            # TypeError, as for an unexpected argument: what SB3's make_vec_env expects
            # from an environment without its default "rgb_array" (it retries without).
            raise TypeError(f"render_mode {render_mode!r} is not supported; tiergym renders "
                            f"{self.metadata['render_modes']} (or None)")
        self.render_mode = render_mode
        self._init_kwargs = dict(address=address, timeout=timeout,
                                 server_args=tuple(server_args), render_mode=render_mode,
                                 **config)
        self._seeded = False
        self._last = None
        self._connection, self._server = open_connection(address, timeout, server_args)
        try:
            reply = self._connection.call("make", env=ENV_ID, config=config_to_wire(config))
        except ServerError as e:
            self.close()
            if (e.code == "INVALID_ARGUMENT" and (e.field or "").startswith("config.")
                    and "unknown configuration key" in (e.message or "")):
                raise UnknownConfigKey(e) from None
            raise
        except BaseException:
            self.close()
            raise
        self.session = reply["session"]
        self.tier_spec = decode_spec(reply["spec"])   # the server's description (PROTOCOL.md "make")
        self.config = reply["config"]    # every configuration key with its value in force
        self.tiers = list(self.tier_spec["tiers"])
        self.profiles = list(self.tier_spec["profiles"])
        self.num_regions = int(self.tier_spec["num_regions"])
        self.observation_space = space_from_spec(self.tier_spec["observation"])
        self.action_space = space_from_spec(self.tier_spec["action"])

    def __reduce__(self):
        return (_make_from_kwargs, (self._init_kwargs,))

    @property
    def endpoint(self):
        return self._connection.endpoint if self._connection else None

    @property
    def closed(self):
        return self._connection is None

    def _require_open(self):
        if self._connection is None:
            raise gymnasium.error.ClosedEnvironmentError(
                "this tiergym environment is closed (its session ended with close()); make a "
                "new one")

    def reset(self, *, seed=None, options=None):
        """Starts an episode: `seed` reseeds the episode's generator (same seed, same
        episode); without a seed the first reset draws one from entropy (through
        self.np_random) and later ones go on with the generator. options={"profile": name
        or index} picks the profile."""
        self._require_open()
        super().reset(seed=seed)
        fields = {"session": self.session}
        if seed is None and not self._seeded:
            seed = int(self.np_random.integers(0, _SEED_BOUND))
        if seed is not None:
            fields["seed"] = int(seed)
            self._seeded = True
        if options:
            fields["options"] = {k: (int(v) if isinstance(v, numbers.Integral) else v)
                                 for k, v in options.items()}
        reply = self._connection.call("reset", **fields)
        obs, info = decode_array(reply["obs"]), decode_info(reply["info"])
        self._last = (obs, info)
        return obs, info

    def step(self, action):
        self._require_open()
        reply = self._connection.call("step", session=self.session,
                                      action=action_to_wire(action, self.action_space))
        obs, info = decode_array(reply["obs"]), decode_info(reply["info"])
        self._last = (obs, info)
        return (obs, float(reply["reward"]), bool(reply["terminated"]),
                bool(reply["truncated"]), info)

    def action_masks(self):
        """The action mask of the current state as sb3-contrib's MaskablePPO asks for it
        (flat bool, see flat_mask). In placement mode the mask is joint: any action that
        keeps to it fits every tier's capacity."""
        self._require_open()
        if self._last is None:
            raise gymnasium.error.ResetNeeded("action_masks() before the first reset()")
        return flat_mask(self._last[1]["action_mask"])

    def render(self):
        """render_mode "ansi": the profile, the step, and each region's tier as a digit."""
        if self.render_mode is None:
            gymnasium.logger.warn("render() without a render_mode (tiergym renders 'ansi')")
            return None
        if self._last is None:
            return "(not reset)"
        obs, info = self._last
        g = int(self.tier_spec["obs_global_offset"])
        f = int(self.tier_spec["obs_region_features"])
        tiers = np.rint(np.asarray(obs[:g]).reshape(-1, f)[:, 0] * max(len(self.tiers) - 1, 1))
        return (f"{info['profile']} step {info['step']}: "
                + "".join(str(int(t)) for t in tiers)
                + "  (" + ", ".join(f"{i}={name}" for i, name in enumerate(self.tiers)) + ")")

    def estimate(self, profile, placement):
        """Estimated runtime of `profile` under a placement, without an episode:
        {"runtime_ns", "default_runtime_ns", "speedup"}, speedup = 1 - runtime / default
        (the fractional speedup, as an episode's return measures it). The placement is a
        dict ({"default": "ddr", "ranges": [{"start": 4096, "end": 8192, "tier": "hbm"}]},
        traces/TRACE_CSV.md section 2), sent as a msgpack map, or its JSON text."""
        self._require_open()
        reply = self._connection.call("estimate", session=self.session, profile=profile,
                                      placement=placement_to_wire(placement))
        return {k: reply[k] for k in ("runtime_ns", "default_runtime_ns", "speedup")}

    def close(self):
        """Closes the session and stops a private server. Idempotent."""
        connection, server = self._connection, self._server
        self._connection = self._server = None
        close_connection(connection, server, [] if self.session is None else [self.session])
        super().close()

    # (`with tiergym.TierEnv(...) as env:` closes it: gymnasium.Env's __enter__/__exit__.)

    def __repr__(self):
        return f"TierEnv(session={self.session}, endpoint={self.endpoint!r})"


def _make_from_kwargs(kwargs):
    return TierEnv(**kwargs)
