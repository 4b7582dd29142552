"""VectorEnv: n sessions stepped together through step_batch, a gymnasium.vector.VectorEnv.

    envs = tiergym.VectorEnv(8, num_regions=16)     # one server, one message per step
    envs = gymnasium.make_vec("tiergym/TierPlacement-v0", num_envs=8,
                              vectorization_mode="vector_entry_point", num_regions=16)
    envs = tiergym.VectorEnv(8, inprocess=True, num_regions=16)   # no server: the
    envs = gymnasium.make_vec("tiergym/TierPlacement-v0", num_envs=8,   # environments in
                              inprocess=True, num_regions=16)           # this process
    obs, infos = envs.reset(seed=42)           # env i is seeded 42 + i
    obs, rewards, terminations, truncations, infos = envs.step(actions)

inprocess=True gives a tiergym.InProcessVectorEnv (inprocess.py): the same interface,
autoreset modes, configurations and episodes, stepped by the compiled core in this process
(threads=T steps on T threads). Gymnasium's make_vec passes a vector entry point's
arguments through its keyword arguments, so the same keyword chooses it there.

Autoreset (the argument `autoreset_mode`: a name below, or Gymnasium's AutoresetMode member or
its value, "SameStep"; the attribute and metadata["autoreset_mode"] hold the AutoresetMode
member, as Gymnasium's own vector environments do): "next_step" (default; Gymnasium's
default): the step
after an episode ended resets that sub-environment, ignores its action and returns its first
observation with reward 0 and terminated = truncated = False. "same_step": the step that
ends an episode resets it at once; `obs` holds the new episode's first observation and
infos["final_obs"] / infos["final_info"] (masked by "_final_obs" / "_final_info", True only
for the sub-environments that ended) hold the last observation and info of the old one.
"disabled": nothing resets by itself; reset(options={"reset_mask": mask}) resets some.
Infos are dicts of arrays with one row per sub-environment and "_key" masks, with the dtypes
Gymnasium's own vector environments give TierEnv's infos.

Each sub-environment may have its own configuration: configs=[{...}, {...}] (merged over
the common keyword arguments), as long as they all have the same spaces.

Shared memory (env/PROTOCOL.md, "Shared memory"): with a server on this machine (an ipc://
or loopback tcp:// address, or the private server), the results of step() and reset()
come through a shared-memory segment the server writes and this process maps; the reply
carries only the batch's number. shm=None (default) uses it when the server offers it and
the address is local, shm=True insists (an error when it cannot be mapped), shm=False
keeps every result in the replies. Episodes are the same bit for bit either way. copy=False
returns the segment's arrays themselves (no copy, read-only, overwritten by the next step,
as InProcessVectorEnv's); copy=True (default) fresh arrays every call. When the server offers
the ready signal, a step's success gets no reply at all: this process sleeps on a word of
the segment that the server wakes (a futex), so only the request pays ZeroMQ. When the
server also takes requests through the segment (hello's limits.max_shm_request_threads;
x86-64 clients), step() sends no message either: it writes the actions and the entries to
reset into the segment and wakes the server's thread of that segment (another futex); an
error comes back through the segment as the same ServerError a reply would give.
"""

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from ._protocol import ENV_ID, decode_array, decode_info_columns, decode_spec, encode_array
from ._shm import SharedResults, is_local, requests_supported
from .connection import DEFAULT_TIMEOUT_S
from .errors import ServerError, ServerUnavailable
from .env import (_SEED_BOUND, close_connection, config_to_wire, flat_mask, integer_actions,
                  open_connection, space_from_spec)

NEXT_STEP = "next_step"
SAME_STEP = "same_step"
DISABLED = "disabled"
_MODES = {NEXT_STEP: AutoresetMode.NEXT_STEP, SAME_STEP: AutoresetMode.SAME_STEP,
          DISABLED: AutoresetMode.DISABLED}
_NAMES = {member: name for name, member in _MODES.items()}


def mode_name(mode):
    """tiergym's name of an autoreset mode ("next_step", "same_step", "disabled") from that
    name, Gymnasium's AutoresetMode member, or the member's value ("NextStep", as
    Gymnasium's own vector environments take it)."""
    if isinstance(mode, AutoresetMode):
        return _NAMES[mode]
    if isinstance(mode, str):
        if mode in _MODES:
            return mode
        for member, name in _NAMES.items():
            if mode == member.value:
                return name
    raise ValueError(f"autoreset_mode must be one of {sorted(_MODES)} or a "
                     f"gymnasium.vector.AutoresetMode, got {mode!r}")


def batch_seeds(seed, which, num_envs, seeded):
    """Seeds for the sub-environments `which`: an int gives env i seed + i, a list one
    each; None seeds those never seeded (seeded[i] False) from entropy and lets the others
    go on (None)."""
    fresh = np.random.SeedSequence().generate_state(len(which), np.uint64) % _SEED_BOUND
    if seed is None:
        given = [None] * len(which)
    elif isinstance(seed, (list, tuple, np.ndarray)):
        if len(seed) != num_envs:
            raise ValueError(f"{len(seed)} seeds for {num_envs} environments")
        given = [None if seed[i] is None else int(seed[i]) for i in which]
    else:
        given = [int(seed) + i for i in which]
    return [g if g is not None else (None if seeded[i] else int(fresh[j]))
            for j, (i, g) in enumerate(zip(which, given))]


def reset_mask(options, num_envs, first):
    """(the bool mask [num_envs] of options["reset_mask"], or all True; the other options)."""
    options = dict(options or {})
    mask = options.pop("reset_mask", None)
    if mask is None:
        return np.ones(num_envs, dtype=bool), options
    mask = np.asarray(mask)
    if mask.dtype != np.bool_ or mask.shape != (num_envs,):
        raise ValueError(f"options['reset_mask'] must be a bool array of shape "
                         f"({num_envs},), got {mask.dtype} {mask.shape}")
    if first and not mask.all():
        raise ValueError("the first reset resets every sub-environment (no reset_mask)")
    return mask, options


class _VectorEnvBase(gymnasium.vector.VectorEnv):
    """What tiergym's two vector environments share (VectorEnv below, through `tiergym
    serve`; InProcessVectorEnv in inprocess.py): the checks of the common arguments, an
    idempotent close() that is safe on an object whose __init__ failed half-way, and the
    context manager. Subclasses free what they hold in close_extras()."""

    # Until _init_common has checked the arguments the object holds nothing and counts as
    # closed (gymnasium.vector.VectorEnv says False, and its __del__ closes what is not).
    closed = True

    def _init_common(self, num_envs, configs, config, autoreset_mode, render_mode):
        """Checks the common arguments and sets num_envs, autoreset_mode (Gymnasium's
        AutoresetMode member; _mode its tiergym name), metadata, render_mode and closed;
        returns each sub-environment's configuration (configs[i] merged over the common
        keyword arguments `config`)."""
        mode = mode_name(autoreset_mode)
        if configs is not None:
            configs = [dict(c or {}) for c in configs]
            if num_envs is None:
                num_envs = len(configs)
            elif len(configs) != int(num_envs):
                raise ValueError(f"configs has {len(configs)} entries for {num_envs} "
                                 "environments (one configuration per sub-environment)")
        if num_envs is None or int(num_envs) < 1:
            raise ValueError("num_envs must be at least 1")
        if render_mode is not None:
            raise ValueError(f"render_mode {render_mode!r}: the batched VectorEnv does not "
                             "render (TierEnv renders 'ansi')")
        self.num_envs = int(num_envs)
        self._mode = mode
        self.autoreset_mode = _MODES[mode]
        self.metadata = {"render_modes": [], "autoreset_mode": self.autoreset_mode}
        self.render_mode = None
        self.closed = False
        return [dict(config, **(configs[i] if configs else {})) for i in range(self.num_envs)]

    def _init_spec(self, tier_spec, configs):
        """Sets what the sub-environments' spec gives: tier_spec, configs (each one's
        configuration in force) and config, tiers, profiles and num_regions (as TierEnv
        has them), the spaces, and the shape of one action."""
        self.tier_spec = tier_spec
        self.configs = configs
        self.config = configs[0]
        self.tiers = list(tier_spec["tiers"])
        self.profiles = list(tier_spec["profiles"])
        self.num_regions = int(tier_spec["num_regions"])
        self.single_observation_space = space_from_spec(tier_spec["observation"])
        self.single_action_space = space_from_spec(tier_spec["action"])
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._move_mode = tier_spec["action"]["type"] == "discrete"
        self._action_shape = (() if self._move_mode else (self.num_regions,))

    def close(self, **kwargs):
        """Frees the sub-environments (close_extras, once). Idempotent."""
        if self.closed:  # closed, or __init__ failed before _init_common
            return
        try:
            self.close_extras(**kwargs)
        finally:
            self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class VectorEnv(_VectorEnvBase):
    # (None until __init__ opens them: close_extras may run after an __init__ that failed.)
    _connection = _server = None
    # Wait for shared-memory batches on the segment's ready signal when the server offers
    # it (False: for every batch a reply, as from older servers; the benchmark compares).
    _use_signal = True
    # Write steps into the segment when the server takes them there (False: every step is
    # a step_batch message; the benchmark compares).
    _use_requests = True

    def __new__(cls, num_envs=None, address=None, *, inprocess=False, **kwargs):
        # inprocess=True: the environments in this process (tiergym.InProcessVectorEnv,
        # which is not a VectorEnv, so Python does not call __init__ below on it).
        if inprocess:
            if address is not None:
                raise ValueError("inprocess=True runs the environments in this process; "
                                 f"it takes no address (got {address!r})")
            from .inprocess import InProcessVectorEnv
            return InProcessVectorEnv(num_envs, **kwargs)
        return super().__new__(cls)

    def __init__(self, num_envs=None, address=None, *, configs=None,
                 autoreset_mode=NEXT_STEP, timeout=DEFAULT_TIMEOUT_S, server_args=(),
                 render_mode=None, inprocess=False, shm=None, copy=True, **config):
        merged = self._init_common(num_envs, configs, config, autoreset_mode, render_mode)
        self.sessions = []
        self._connection, self._server = open_connection(address, timeout, server_args)
        try:
            self.copy = bool(copy)
            self._init_shm(shm)
            replies = []
            for i in range(self.num_envs):
                reply = self._connection.call("make", env=ENV_ID,
                                              config=config_to_wire(merged[i]))
                self.sessions.append(reply["session"])
                replies.append(reply)
            first = replies[0]["spec"]
            for i, r in enumerate(replies[1:], start=1):
                for key in ("observation", "action"):
                    if r["spec"][key] != first[key]:
                        raise ValueError(
                            f"configs[{i}] gives the {key} space {r['spec'][key]}, configs[0] "
                            f"{first[key]}: sub-environments of a VectorEnv share their spaces "
                            "(same num_regions, action_mode and number of tiers)")
        except BaseException:
            self.close()
            raise
        self.tier_specs = [decode_spec(r["spec"]) for r in replies]
        self._init_spec(self.tier_specs[0], [r["config"] for r in replies])
        self._autoreset = np.zeros(self.num_envs, dtype=bool)
        self._seeded = np.zeros(self.num_envs, dtype=bool)
        self._obs = None
        self._masks = None

    # --- the transport: results in the replies or in shared memory ----------------------

    def _init_shm(self, shm):
        if shm not in (None, True, False):
            raise ValueError(f"shm must be None (automatic), True or False, got {shm!r}")
        offered = int(self._connection.hello.get("limits", {}).get("max_shm_bytes", 0)) > 0
        if shm is True and not offered:
            raise ValueError(f"shm=True: the server at {self._connection.endpoint} offers no "
                             "shared memory (an older server, or --max-shm-mib 0)")
        self._shm_mode = shm
        self._shm_wanted = offered and (shm is True or
                                        (shm is None and is_local(self._connection.endpoint)))
        limits = self._connection.hello.get("limits", {})
        self._requests_offered = (self._shm_wanted and requests_supported()
                                  and int(limits.get("max_shm_request_threads", 0)) > 0)
        self._shared = None  # SharedResults once a segment is mapped

    @property
    def shm(self):
        """Whether results come through shared memory (a segment is mapped)."""
        return self._shared is not None

    def _shm_field(self, rows):
        """The request's `shm`: the segment's handle, true for a new one, or None."""
        if not self._shm_wanted:
            return None
        if rows != self.num_envs:
            # A partial reset: its rows would land on rows of other sub-environments, whose
            # observations may still be read from the segment.
            return None
        return True if self._shared is None else self._shared.segment

    def _results(self, reply, which):
        """(obs, rewards, terminations, truncations, reset, infos, final) of a step_batch
        reply for the entries `which`, from the reply or from the segment it names; final is
        None or (final_obs [n, obs], final_info columns masked by the ended rows)."""
        shm = reply.get("shm")
        if shm is not None and "name" in shm:
            self._map(shm, which)
        if shm is not None and "obs" not in reply:
            if self._shared is None or shm["segment"] != self._shared.segment:
                raise ValueError("the server wrote to a shared-memory segment this client "
                                 "has not mapped")
            return self._shared.read(shm, self.copy)
        obs = decode_array(reply["obs"])
        rewards = decode_array(reply["reward"]).astype(np.float64)
        terminations = decode_array(reply["terminated"])
        truncations = decode_array(reply["truncated"])
        infos = decode_info_columns(reply["info"])
        final = None
        if "final_obs" in reply:
            ended = terminations | truncations
            final = (decode_array(reply["final_obs"]),
                     decode_info_columns(reply["final_info"], mask=ended))
        return (obs, rewards, terminations, truncations, decode_array(reply["reset"]), infos,
                final)

    def _map(self, made, which):
        try:
            self._shared = SharedResults(made, [self.tier_specs[i]["profiles"] for i in which])
        except (OSError, ValueError) as e:
            self._shm_wanted = False  # the server is elsewhere: results in the replies
            if self._shm_mode is True:
                raise ValueError(f"shm=True: the shared-memory segment {made.get('name')!r} "
                                 f"of {self._connection.endpoint} cannot be mapped here: "
                                 f"{e}") from None

    def _require_open(self):
        if self._connection is None:
            raise gymnasium.error.ClosedEnvironmentError(
                "this tiergym VectorEnv is closed (its sessions ended with close())")

    def _integer_actions(self, actions):
        """The batch's actions as an integer array of (num_envs, *action shape)."""
        a = actions
        if not (type(a) is np.ndarray and a.dtype.kind in "iu"):
            a = integer_actions(actions, "actions")
        want = (self.num_envs, *self._action_shape)
        if a.shape != want:
            a = a.reshape(want)  # ValueError names both shapes when it cannot
        return a

    def _actions_to_wire(self, actions):
        a = self._integer_actions(actions)
        # Tier and move indices usually fit a byte: an eighth of the message (the server
        # takes any integer dtype); anything else (out of range too) goes as int64.
        if a.size and 0 <= a.min() and a.max() <= 255:
            return encode_array(a, "uint8")
        return encode_array(a, "int64")

    def _batch(self, sessions, actions, reset, seeds=None, options=None, autoreset="none"):
        fields = {"sessions": sessions, "actions": actions,
                  "reset": encode_array(reset, "bool"), "autoreset": autoreset}
        if seeds is not None:
            fields["seeds"] = seeds
        if options is not None:
            fields["options"] = options
        shm = self._shm_field(len(sessions))
        if shm is not None:
            fields["shm"] = shm
            if shm is True and self._requests_offered and self._use_requests:
                fields["shm_requests"] = True  # later steps written into the segment
        shared = self._shared
        if shared is not None and not isinstance(shm, str):
            shared.forget()  # results in the reply: the segment's summary will not tell
        try:
            return self._send_batch(fields, shm, shared, len(sessions))
        except BaseException:
            if shared is not None:
                shared.forget()  # it may have moved some entries without a batch published
            raise

    def _send_batch(self, fields, shm, shared, rows):
        if isinstance(shm, str) and shared.signal and self._use_signal:
            # No reply when it succeeds: the segment's seq word says the batch is there.
            fields["shm_signal"] = True
            seq = shared.last_seq + 1
            try:
                reply = self._connection.call_signalled(
                    "step_batch", lambda seconds: shared.wait(seq, seconds), **fields)
            except ServerError:
                raise  # refused before anything moved: the segment keeps its batch
            except BaseException:
                # No answer in time (or interrupted): the batch may still land in the
                # segment later, where the next signal would be taken for it. From now on
                # every batch gets a reply, whose `seq` tells which batch is there.
                self._use_signal = False
                raise
            if reply is None:
                reply = {"shm": shared.announced(seq, rows)}
            return reply
        return self._connection.call("step_batch", **fields)

    def _through_segment(self):
        shared = self._shared
        return shared is not None and shared.requests and self._use_requests

    def _request(self, actions, reset, same_step):
        """A step of every sub-environment written into the segment (no message): the
        reply's `shm` map, as _batch's reply gives it."""
        a = self._integer_actions(actions)
        connection = self._connection

        def check():
            server = connection._server
            if server is not None and not server.alive():
                raise ServerUnavailable(
                    f"the tiergym server (pid {server.process.pid}) exited with code "
                    f"{server.process.returncode}; its log: {server.log_tail()}")
        try:
            shm = self._shared.request(a, reset, same_step, connection.timeout, check)
        except BaseException as e:
            self._shared.forget()
            if not isinstance(e, TimeoutError):
                raise
            # The batch may still land in the segment later: from now on every batch is a
            # message with a reply, whose `seq` tells which batch is there.
            self._use_requests = self._use_signal = False
            raise ServerUnavailable(f"no answer from {connection.endpoint} within "
                                    f"{connection.timeout} s (a step through shared memory); "
                                    "is the server running?") from None
        return {"shm": shm}

    def _seeds(self, seed, which):
        return batch_seeds(seed, which, self.num_envs, self._seeded)

    def _options(self, options, which):
        """Per-entry reset options: {"profile": name or index} for all, or a list / array
        of one profile per sub-environment."""
        if not options:
            return None
        out = []
        for i in which:
            entry = {}
            for key, value in options.items():
                if isinstance(value, (list, tuple, np.ndarray)):
                    if len(value) != self.num_envs:
                        raise ValueError(f"options[{key!r}] has {len(value)} entries for "
                                         f"{self.num_envs} environments")
                    value = value[i]
                entry[key] = int(value) if isinstance(value, (int, np.integer)) else value
            out.append(entry)
        return out

    def reset(self, *, seed=None, options=None):
        """Resets every sub-environment, or those of options["reset_mask"] (a bool array
        [num_envs]; the others keep their observation and have no info). seed: None, an
        int (env i gets seed + i) or a list of n ints / None; options: {"profile": name or
        index, or one per sub-environment}."""
        self._require_open()
        mask, options = reset_mask(options, self.num_envs, self._obs is None)
        which = [int(i) for i in np.flatnonzero(mask)]
        if len(which) == 0:
            return self._obs.copy(), {}
        seeds = self._seeds(seed, which)
        zeros = np.zeros((len(which), *self._action_shape), dtype=np.int64)
        reply = self._batch([self.sessions[i] for i in which], encode_array(zeros, "int64"),
                            np.ones(len(which), dtype=bool), seeds, self._options(options, which))
        self._seeded[which] = True
        obs, _, _, _, _, part, _ = self._results(reply, which)
        if len(which) == self.num_envs:
            self._obs, infos = obs, part
        else:
            self._obs = self._obs.copy()
            self._obs[which] = obs
            infos = _scatter(part, which, self.num_envs)
        self._autoreset[which] = False
        self._masks = _merge_masks(self._masks, infos, which)
        return (self._obs.copy() if self.copy or self._shared is None else self._obs), infos

    def step(self, actions):
        self._require_open()
        if self._obs is None:
            raise gymnasium.error.ResetNeeded("step() before the first reset()")
        if self._through_segment():
            if self._mode == NEXT_STEP:
                reply = self._request(actions, self._autoreset, False)
            elif self._mode == SAME_STEP:
                reply = self._request(actions, np.zeros(self.num_envs, dtype=bool), True)
            else:
                reply = self._request(actions, np.zeros(self.num_envs, dtype=bool), False)
            return self._finish_step(reply)
        wire = self._actions_to_wire(actions)
        if self._mode == NEXT_STEP:
            reply = self._batch(self.sessions, wire, self._autoreset.copy())
        elif self._mode == SAME_STEP:
            reply = self._batch(self.sessions, wire, np.zeros(self.num_envs, dtype=bool),
                                autoreset=SAME_STEP)
        else:
            reply = self._batch(self.sessions, wire, np.zeros(self.num_envs, dtype=bool))
        return self._finish_step(reply)

    def _finish_step(self, reply):
        obs, rewards, terminations, truncations, _, infos, final = self._results(
            reply, range(self.num_envs))
        ended = terminations | truncations
        if self._mode == NEXT_STEP:
            self._autoreset = ended
        elif self._mode == SAME_STEP and final is not None:
            final_obs, final_info = final
            infos["final_obs"] = np.array([final_obs[i] if ended[i] else None
                                           for i in range(self.num_envs)], dtype=object)
            infos["_final_obs"] = ended.copy()
            infos["final_info"] = final_info
            infos["_final_info"] = ended.copy()
        self._obs = obs  # kept for partial resets: the caller gets its own copy
        self._masks = infos["action_mask"]
        if self.copy or self._shared is None:
            obs = obs.copy()
        return obs, rewards, terminations, truncations, infos

    def action_masks(self):
        """[num_envs, mask size] bool: each sub-environment's flat action mask (see
        TierEnv.action_masks), as MaskablePPO's vectorised path stacks them."""
        self._require_open()
        if self._masks is None:
            raise gymnasium.error.ResetNeeded("action_masks() before the first reset()")
        return np.stack([flat_mask(m) for m in self._masks])

    def close_extras(self, **kwargs):
        """Closes the sessions and stops a private server (VectorEnv.close() calls this
        once)."""
        connection, server = self._connection, self._server
        self._connection = self._server = None
        close_connection(connection, server, self.sessions)

    def __repr__(self):
        return f"tiergym.VectorEnv({self.num_envs}, autoreset_mode={self._mode!r})"


def _scatter(part, which, n):
    """Infos of the entries `which` spread over n rows: Gymnasium's layout for a partial
    reset (zeros / None elsewhere, "_key" masks True only at `which`)."""
    out = {}
    mask = np.zeros(n, dtype=bool)
    mask[which] = True
    for key, column in part.items():
        if key.startswith("_"):
            continue
        if column.dtype == object:
            full = np.full(n, None, dtype=object)
        else:
            full = np.zeros((n, *column.shape[1:]), dtype=column.dtype)
        full[which] = column
        out[key] = full
        out["_" + key] = mask.copy()
    return out


def _merge_masks(current, infos, which):
    masks = infos["action_mask"]
    if current is None:
        return masks
    current = current.copy()
    current[which] = masks[which]
    return current
