"""TierEnv: one placement environment session, with Gymnasium's API.

    env = tiergym.make("tiergym/TierPlacement-v0", num_regions=16)
    obs, info = env.reset(seed=1)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    env.close()

Without `address` the environment starts a private `tiergym serve` (connection.Server) and
stops it on close(); with `address` ("tcp://127.0.0.1:5555", "ipc:///tmp/x.sock", or a
connection.Server) it connects to that server. Configuration keys (num_regions, steps,
action_mode, machine, profiles, ...) are passed through to the server: see
`tiergym.config_keys()` or env/PROTOCOL.md.
"""

import numbers

import numpy as np

from . import spaces
from ._protocol import ENV_ID, decode_array, decode_info, decode_spec, encode_array
from .connection import DEFAULT_TIMEOUT_S, Connection, Server

_Base = spaces.gymnasium.Env if spaces.HAVE_GYMNASIUM else object


def config_to_wire(config):
    """Configuration values as the protocol takes them (str, int, float, bool, [str])."""
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


def action_to_wire(action, space):
    if isinstance(space, (spaces.Discrete,)) or type(space).__name__ == "Discrete":
        return int(np.asarray(action).reshape(()))
    return encode_array(np.asarray(action), "int64")


class TierEnv(_Base):
    """A placement environment served by `tiergym serve`."""

    metadata = {"render_modes": []}

    def __init__(self, address=None, *, timeout=DEFAULT_TIMEOUT_S, server_args=(), **config):
        self._connection = None
        self._server = None
        self.session = None
        self._connection, self._server = open_connection(address, timeout, server_args)
        try:
            reply = self._connection.call("make", env=ENV_ID, config=config_to_wire(config))
        except BaseException:
            self.close()
            raise
        self.session = reply["session"]
        self.tier_spec = decode_spec(reply["spec"])   # the server's description (PROTOCOL.md "make")
        self.config = reply["config"]    # every configuration key with its value in force
        self.tiers = list(self.tier_spec["tiers"])
        self.profiles = list(self.tier_spec["profiles"])
        self.num_regions = int(self.tier_spec["num_regions"])
        self.observation_space = spaces.from_spec(self.tier_spec["observation"])
        self.action_space = spaces.from_spec(self.tier_spec["action"])

    @property
    def endpoint(self):
        return self._connection.endpoint if self._connection else None

    def reset(self, *, seed=None, options=None):
        """Starts an episode: `seed` reseeds the episode's generator (same seed, same
        episode); options={"profile": name or index} picks the profile."""
        if spaces.HAVE_GYMNASIUM:
            super().reset(seed=seed)
        fields = {"session": self.session}
        if seed is not None:
            fields["seed"] = int(seed)
        if options:
            fields["options"] = {k: (int(v) if isinstance(v, numbers.Integral) else v)
                                 for k, v in options.items()}
        reply = self._connection.call("reset", **fields)
        return decode_array(reply["obs"]), decode_info(reply["info"])

    def step(self, action):
        reply = self._connection.call("step", session=self.session,
                                      action=action_to_wire(action, self.action_space))
        return (decode_array(reply["obs"]), float(reply["reward"]), bool(reply["terminated"]),
                bool(reply["truncated"]), decode_info(reply["info"]))

    def estimate(self, profile, placement_json):
        """Estimated runtime of `profile` under a placement (JSON text), without an episode:
        {"runtime_ns", "default_runtime_ns", "speedup"}, speedup = 1 - runtime / default
        (the fractional speedup, as an episode's return measures it)."""
        reply = self._connection.call("estimate", session=self.session, profile=profile,
                                      placement=placement_json)
        return {k: reply[k] for k in ("runtime_ns", "default_runtime_ns", "speedup")}

    def close(self):
        """Closes the session and stops a private server. Idempotent."""
        connection, server = self._connection, self._server
        self._connection = self._server = None
        close_connection(connection, server, [] if self.session is None else [self.session])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return f"TierEnv(session={self.session}, endpoint={self.endpoint!r})"
