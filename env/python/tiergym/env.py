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

import copy
import numbers

import gymnasium
import numpy as np

from ._protocol import ENV_ID, decode_array, decode_info, decode_spec
from ._values import (SEED_BOUND, action_to_wire, config_to_wire, flat_mask,
                      placement_to_wire, space_from_spec)
from .connection import DEFAULT_TIMEOUT_S, close_connection, open_connection
from .errors import EpisodeInterrupted, ServerError, UnknownConfigKey


class TierEnv(gymnasium.Env):
    """A placement environment served by `tiergym serve`.

    Keyword arguments: `address` (default: a private server), `timeout` (seconds per
    request), `server_args` (options of the private server), `render_mode` (None or
    "ansi"), `curve` (CURVE keys for a server started with --curve-key: {"server_key":
    its NAME.key, "key": this client's NAME.key_secret}), `reconnect` (carry on when the
    server goes away: True or a tiergym.Reconnect; the step that meets the loss returns the
    last observation, truncated, with info["interrupted"] saying why, and the next reset()
    starts an episode on the server now there), and configuration keys. A TierEnv pickles
    as its constructor call: unpickled (in a subprocess, say) it is a new session with the
    same configuration, on the same server (a Server address travels as its endpoint) or
    on a new private one.
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, address=None, *, timeout=DEFAULT_TIMEOUT_S, server_args=(),
                 render_mode=None, curve=None, reconnect=None, **config):
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
                                 curve=curve, reconnect=reconnect, **config)
        self._seeded = False
        self._last = None
        self.interrupted_episodes = 0  # episodes cut by the loss of the server (reconnect)
        self._connection, self._server = open_connection(address, timeout, server_args,
                                                         curve, reconnect,
                                                         machine=config.get("machine"))
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
            seed = int(self.np_random.integers(0, SEED_BOUND))
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
        try:
            reply = self._connection.call("step", session=self.session,
                                          action=action_to_wire(action, self.action_space))
        except EpisodeInterrupted as e:
            return self._interrupted(e)
        obs, info = decode_array(reply["obs"]), decode_info(reply["info"])
        self._last = (obs, info)
        return (obs, float(reply["reward"]), bool(reply["terminated"]),
                bool(reply["truncated"]), info)

    def _interrupted(self, e):
        """The step that met the loss of the server (reconnect): the episode is truncated,
        with its last observation and info, reward 0, info["interrupted"] saying why. The
        session exists again on the server now there; the next reset() draws its seed from
        this environment's generator (the server's episode generator went with it)."""
        if self._last is None:
            raise gymnasium.error.ResetNeeded("step() before the first reset()")
        self.interrupted_episodes += 1
        self._seeded = False
        obs, info = self._last
        return obs, 0.0, False, True, dict(info, interrupted=e.reason)

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

    def fork(self):
        """An independent environment at this one's state, for search over placements
        (lookahead, MCTS, beam search): a new session on the same server and connection
        (the `fork` op, env/PROTOCOL.md) holding a copy of this one's episode (its
        generator, profile, placement, history and time). The same actions give the fork
        and this environment bit-identical observations, rewards and infos, also across
        resets without a seed, and what one does never reaches the other. Forks may be
        forked again. The fork is stepped on where this one is (its action_masks() and
        render() are this one's current ones); it need not be reset.

        Each fork is a session: it counts against the server's session limits and memory
        budget (a ServerError RESOURCE_EXHAUSTED when they refuse it) and should be
        closed when done. The connection, and a private server, stay up until this
        environment and all its forks are closed. A fork pickles as its original's
        constructor call (a new environment, not at this state)."""
        self._require_open()
        _ = self.np_random  # made now if not yet, so that an unseeded first reset draws alike
        reply = self._connection.call("fork", session=self.session)
        forked = object.__new__(type(self))
        forked.__dict__.update(self.__dict__)
        forked._connection = self._connection.share()
        forked.session = reply["session"]
        forked.interrupted_episodes = 0  # its own count from here
        # The client-side state copied too: spaces (their samplers' generators), the
        # generator an unseeded first reset draws from, the last observation and info.
        forked.observation_space = copy.deepcopy(self.observation_space)
        forked.action_space = copy.deepcopy(self.action_space)
        forked._np_random = copy.deepcopy(self._np_random)
        forked._last = copy.deepcopy(self._last)
        return forked

    def close(self):
        """Closes the session and stops a private server (once this environment's forks
        are closed too). Idempotent."""
        connection, server = self._connection, self._server
        self._connection = self._server = None
        close_connection(connection, server, [] if self.session is None else [self.session])
        super().close()

    # (`with tiergym.TierEnv(...) as env:` closes it: gymnasium.Env's __enter__/__exit__.)

    def __repr__(self):
        return f"TierEnv(session={self.session}, endpoint={self.endpoint!r})"


def _make_from_kwargs(kwargs):
    return TierEnv(**kwargs)
