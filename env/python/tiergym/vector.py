"""VectorEnv: n sessions stepped together through step_batch, a gymnasium.vector.VectorEnv.

    envs = tiergym.VectorEnv(8, num_regions=16)     # one server, one message per step
    envs = tiergym.make_vec("tiergym/TierPlacement-v0", 8, num_regions=16)   # the same
    envs = gymnasium.make_vec("tiergym/TierPlacement-v0", num_envs=8,
                              vectorization_mode="vector_entry_point", num_regions=16)
    envs = tiergym.make_vec("tiergym/TierPlacement-v0", 8, inprocess=True,   # no server:
                            num_regions=16)                                  # this process
    obs, infos = envs.reset(seed=42)           # env i is seeded 42 + i
    obs, rewards, terminations, truncations, infos = envs.step(actions)

inprocess=True, to tiergym.make_vec or to gymnasium.make_vec (whose vector entry point,
tiergym.factory.vector_env, takes it), gives a tiergym.InProcessVectorEnv (inprocess.py):
the same interface, autoreset modes, configurations and episodes, stepped by the compiled
core in this process (threads=T steps on T threads). The older spelling
tiergym.VectorEnv(n, inprocess=True) still gives one, with a DeprecationWarning (it goes
in the next version): a class whose constructor returns an object of another class.

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

import warnings

import gymnasium
import numpy as np

from ._protocol import ENV_ID, decode_array, decode_info_columns, decode_spec, encode_array
from ._shm import SharedResults, is_local, requests_supported
from ._values import config_to_wire, flat_mask, integer_actions
from ._vector_base import (DISABLED, NEXT_STEP, SAME_STEP, VectorEnvBase, batch_seeds,
                           fork_ids, merge_masks, mode_name, reset_mask, scatter_infos)
from .connection import DEFAULT_TIMEOUT_S, close_connection, open_connection
from .errors import EpisodeInterrupted, ServerError, ServerUnavailable

__all__ = ["VectorEnv", "NEXT_STEP", "SAME_STEP", "DISABLED", "mode_name"]



class VectorEnv(VectorEnvBase):
    # (None until __init__ opens them: close_extras may run after an __init__ that failed.)
    _connection = _server = None
    # Wait for shared-memory batches on the segment's ready signal when the server offers
    # it (False: for every batch a reply, as from older servers; the benchmark compares).
    _use_signal = True
    # Write steps into the segment when the server takes them there (False: every step is
    # a step_batch message; the benchmark compares).
    _use_requests = True

    def __new__(cls, num_envs=None, address=None, *, inprocess=False, **kwargs):
        # Deprecated: VectorEnv(n, inprocess=True) gives an InProcessVectorEnv, which is not a
        # VectorEnv (so Python does not call __init__ below on it). tiergym.make_vec(...,
        # inprocess=True) is the spelling; this one goes in the next version.
        if inprocess:
            warnings.warn("tiergym.VectorEnv(..., inprocess=True) is deprecated: use "
                          "tiergym.make_vec(env_id, num_envs, inprocess=True, ...) or "
                          "tiergym.InProcessVectorEnv(num_envs, ...)", DeprecationWarning,
                          stacklevel=2)
            if address is not None:
                raise ValueError("inprocess=True runs the environments in this process; "
                                 f"it takes no address (got {address!r})")
            from .inprocess import InProcessVectorEnv
            return InProcessVectorEnv(num_envs, **kwargs)
        return super().__new__(cls)

    def __init__(self, num_envs=None, address=None, *, configs=None,
                 autoreset_mode=NEXT_STEP, timeout=DEFAULT_TIMEOUT_S, server_args=(),
                 render_mode=None, inprocess=False, shm=None, copy=True, curve=None,
                 reconnect=None, **config):
        merged = self._init_common(num_envs, configs, config, autoreset_mode, render_mode)
        self.sessions = []
        self.interrupted_episodes = 0  # episodes cut by the loss of the server (reconnect)
        self._pending_reset = False    # next_step: the step after an interruption resets all
        machines = {c.get("machine") for c in merged}
        self._connection, self._server = open_connection(
            address, timeout, server_args, curve, reconnect,
            machine=machines.pop() if len(machines) == 1 else None)
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
        except ServerError as e:
            if shared is not None:
                shared.forget()
            if not (shm is True and self._shm_mode is None and e.field == "shm"
                    and e.code == "RESOURCE_EXHAUSTED"):
                raise
            # No segment to be had (this connection's are taken, by forks say, or the
            # server's shared memory is): refused before anything moved, so the batch goes
            # again with its results in the reply, as do the later ones.
            self._shm_wanted = False
            fields.pop("shm")
            fields.pop("shm_requests", None)
            return self._connection.call("step_batch", **fields)
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
            except (ServerError, EpisodeInterrupted):
                # Refused before anything moved: the segment keeps its batch; or the server
                # went, and its segment with it.
                raise
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
        try:
            # connection.check raises when the server is known gone (a private server's
            # process exited, the connection closed).
            shm = self._shared.request(a, reset, same_step, connection.timeout,
                                       connection.check)
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
        index, or one per sub-environment}. With `reconnect`, a reset that meets the loss
        of the server is done again on the server now there, for every sub-environment
        (their episodes went with the old one)."""
        self._require_open()
        for _ in range(3):
            try:
                return self._reset(seed, options)
            except EpisodeInterrupted as e:
                self._lost(e)
                if options and "reset_mask" in options:
                    options = {k: v for k, v in options.items() if k != "reset_mask"}
        raise ServerUnavailable(f"{self._connection.endpoint}: the server was lost three "
                                "times in a row while resetting")

    def _reset(self, seed, options):
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
            infos = scatter_infos(part, which, self.num_envs)
        self._autoreset[which] = False
        self._masks = merge_masks(self._masks, infos, which)
        self._pending_reset = False
        return (self._obs.copy() if self.copy or self._shared is None else self._obs), infos

    def step(self, actions):
        self._require_open()
        if self._obs is None:
            raise gymnasium.error.ResetNeeded("step() before the first reset()")
        if self._pending_reset:
            # next_step after an interruption: this step starts the new episodes.
            obs, infos = self.reset()
            n = self.num_envs
            return obs, np.zeros(n), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool), infos
        try:
            return self._step(actions)
        except EpisodeInterrupted as e:
            return self._interrupted(e)

    def _lost(self, e):
        """The connection was made again (`e`): the sessions exist anew on the server now
        there, not reset, and the shared-memory segment went with the old server (it is
        unmapped once nothing here refers to it; a new one is made by the next batch)."""
        if self._obs is not None:
            self._obs = np.array(self._obs, copy=True)  # (maybe a view of the old segment)
        if self._masks is not None:
            self._masks = np.array(self._masks, copy=True)
        self._shared = None
        self._init_shm(self._shm_mode)
        self._seeded[:] = False  # seeds for the new episodes from entropy
        self._autoreset[:] = False

    def _interrupted(self, e):
        """The step that met the loss of the server (reconnect): every sub-environment's
        episode is truncated with its last observation, reward 0 and infos["interrupted"]
        saying why; same_step also starts the new episodes (their first observations in
        `obs`, the old ones' last in final_obs), next_step does on the next step, disabled
        leaves it to reset()."""
        self._lost(e)
        n = self.num_envs
        self.interrupted_episodes += n
        last = self._obs
        everyone = np.ones(n, dtype=bool)
        infos = {"interrupted": np.full(n, e.reason, dtype=object), "_interrupted": everyone}
        if self._mode == SAME_STEP:
            obs, infos = self.reset()
            final_obs = np.empty(n, dtype=object)
            for i in range(n):
                final_obs[i] = last[i]
            infos["interrupted"] = np.full(n, e.reason, dtype=object)
            infos["_interrupted"] = everyone.copy()
            infos["final_obs"] = final_obs
            infos["_final_obs"] = everyone.copy()
            infos["final_info"] = {"interrupted": np.full(n, e.reason, dtype=object),
                                   "_interrupted": everyone.copy()}
            infos["_final_info"] = everyone.copy()
        else:
            obs = last.copy()
            self._pending_reset = self._mode == NEXT_STEP
        return obs, np.zeros(n), np.zeros(n, dtype=bool), everyone.copy(), infos

    def _step(self, actions):
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

    def fork(self, env_ids=None):
        """Independent copies of sub-environments at their state (for search: lookahead,
        MCTS, beam search), as InProcessVectorEnv.fork: a new VectorEnv whose
        sub-environment k is a fork (the `fork` op, env/PROTOCOL.md) of this one's
        env_ids[k] (None: every one, in order; an int: one; a list may repeat an id for
        several copies). The same actions give the forks and their originals bit-identical
        observations, rewards and infos, and neither sees what the other does. Its
        current observations and action masks are the forked rows; it is stepped on, not
        reset (an ended episode resets at its next step as its original's would). The same
        autoreset mode, copy and transport (its own shared-memory segment, or the replies
        when the server's segments per connection are taken).

        The forks are sessions on this one's server and connection: they count against
        its session limits and memory budget (a ServerError RESOURCE_EXHAUSTED, the forks
        made so far closed again, when they refuse one), and the connection (and a private
        server) stays up until this VectorEnv and every fork are closed."""
        self._require_open()
        if self._obs is None:
            raise gymnasium.error.ResetNeeded("fork() before the first reset()")
        ids = fork_ids(env_ids, self.num_envs)
        forked = object.__new__(type(self))
        forked.__dict__.update(self.__dict__)
        forked._init_common(len(ids), None, {}, self._mode, None)
        forked.sessions = []
        forked.interrupted_episodes = 0  # its own count from here
        forked._shared = None  # a segment of its own, made by its first batch
        forked._connection = self._connection.share()
        try:
            for i in ids:
                forked.sessions.append(
                    self._connection.call("fork", session=self.sessions[i])["session"])
        except BaseException:
            forked.close()
            raise
        forked.tier_specs = [self.tier_specs[i] for i in ids]
        forked._init_spec(forked.tier_specs[0], [self.configs[i] for i in ids])
        forked._autoreset = self._autoreset[ids].copy()
        forked._seeded = self._seeded[ids].copy()
        forked._obs = self._obs[ids].copy()
        forked._masks = None if self._masks is None else self._masks[ids].copy()
        return forked

    def close_extras(self, **kwargs):
        """Closes the sessions and stops a private server (VectorEnv.close() calls this
        once)."""
        connection, server = self._connection, self._server
        self._connection = self._server = None
        close_connection(connection, server, self.sessions)

    def __repr__(self):
        return f"tiergym.VectorEnv({self.num_envs}, autoreset_mode={self._mode!r})"
