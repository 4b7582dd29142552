"""InProcessVectorEnv: n environments in this process, stepped in C++ on a thread pool.

    envs = tiergym.make_vec("tiergym/TierPlacement-v0", 64, inprocess=True, threads=2,
                            num_regions=64)
    envs = gymnasium.make_vec("tiergym/TierPlacement-v0", num_envs=64, inprocess=True,
                              threads=2, num_regions=64)
    envs = tiergym.InProcessVectorEnv(64, threads=2, num_regions=64)   # the same
    obs, infos = envs.reset(seed=42)                 # env i is seeded 42 + i
    obs, rewards, terminations, truncations, infos = envs.step(actions)

A gymnasium.vector.VectorEnv with the interface of tiergym.VectorEnv (the ZeroMQ client of
`tiergym serve`, vector.py): the same spaces, configuration keys and per-environment
`configs`, autoreset modes ("next_step", "same_step", "disabled" with
reset(options={"reset_mask": mask})), infos with the same keys, dtypes and "_key" masks,
action_masks(), and the same episodes for the same seeds and actions, bit for bit. But no
server and no messages: the compiled core (tiergym._core, env/vector/vector_env.h) holds
the environments, steps them with the GIL released on `threads` threads (the caller's
included), and writes observations, rewards, flags and infos straight into numpy arrays
allocated once. Those arrays are returned without a copy, so they are overwritten by the
next reset/step/recv (as EnvPool's arrays, and Gymnasium's with copy=False); pass copy=True
to get fresh arrays every call.

EnvPool-style asynchronous stepping:

    envs = tiergym.InProcessVectorEnv(64, threads=2, batch_size=16)
    envs.async_reset(seed=0)
    while training:
        obs, rewards, terminations, truncations, infos = envs.recv()   # 16 ready envs
        envs.send(policy(obs), infos["env_id"])

recv() returns the first batch_size environments whose step finished, infos["env_id"]
saying which; send(actions, env_ids) queues their next steps and returns at once. With
fewer steps in flight than batch_size, recv() raises (it would wait forever): lower
envs.batch_size to envs.in_flight to take the last ones.

The extension is built by `pip install .` (scikit-build-core with nanobind) into the
package, or by CMake with nanobind (TIERGYM_BUILD_PYTHON_EXT) into build/python/tiergym/;
_native.py finds it.
"""

import numbers

import gymnasium
import numpy as np

from ._native import have_core, load_core
from ._protocol import (INFO_ARRAYS, INFO_KEYS, INFO_NAME, INFO_TUPLE, INFO_TUPLE_COUNT,
                        no_refusals, tuple_column, typed_column)
from ._values import config_to_wire, flat_mask, integer_actions
from ._vector_base import (NEXT_STEP, VectorEnvBase, batch_seeds, fork_ids, reset_mask,
                           scatter_infos)

__all__ = ["InProcessVectorEnv", "have_core", "load_core"]


def _profiles(options, num_envs):
    """reset options -> one profile (str or None) per sub-environment, or [] for none."""
    if not options:
        return []
    unknown = set(options) - {"profile"}
    if unknown:
        raise ValueError(f"options: unknown keys {sorted(unknown)} (known: 'profile', "
                         "'reset_mask')")
    p = options.get("profile")
    if p is None:
        return []
    if isinstance(p, (list, tuple, np.ndarray)):
        if len(p) != num_envs:
            raise ValueError(f"options['profile'] has {len(p)} entries for {num_envs} "
                             "environments")
        return [None if x is None else str(int(x) if isinstance(x, numbers.Integral) else x)
                for x in p]
    p = str(int(p) if isinstance(p, numbers.Integral) else p)
    return [p] * num_envs


def _typed_columns(cols):
    """The core's info buffers in Python's dtypes, without copies (typed_column)."""
    return {key: typed_column(key, array) for key, array in cols.items()}


class InProcessVectorEnv(VectorEnvBase):
    """n placement environments in this process (see the module's documentation).

    Keyword arguments: configs (one configuration per sub-environment, merged over the
    common keyword arguments), autoreset_mode, threads (threads stepping, the caller's
    included; default 1), batch_size (what recv() returns; default num_envs), copy (fresh
    arrays every call; default False), and configuration keys."""

    def __init__(self, num_envs=None, *, configs=None, autoreset_mode=NEXT_STEP, threads=1,
                 batch_size=None, copy=False, render_mode=None, **config):
        for key in ("address", "timeout", "server_args"):
            if key in config:
                raise TypeError(f"{key}: the in-process vector environment has no server "
                                "(leave out inprocess=True to use one)")
        if int(threads) < 1:
            raise ValueError("threads must be at least 1 (the calling thread)")
        merged = self._init_common(num_envs, configs, config, autoreset_mode, render_mode)
        self.batch_size = self.num_envs if batch_size is None else int(batch_size)
        if not 1 <= self.batch_size <= self.num_envs:
            raise ValueError(f"batch_size must be in [1, {self.num_envs}], got {batch_size}")
        self.copy = bool(copy)
        self.threads = int(threads)
        # Typed as the client sends them to a server (lists stay lists, numbers numbers).
        self._adopt(load_core().VectorCore([config_to_wire(c) for c in merged], self.threads,
                                           self._mode))

    def _adopt(self, core):
        """Takes `core` (tiergym._core.VectorCore) as this object's environments."""
        self._core = core
        self._init_spec(dict(self._core.spec), [dict(c) for c in self._core.configs])
        b = self._core.buffers()
        self._obs, self._reward = b["obs"], b["reward"]
        self._terminated, self._truncated = b["terminated"], b["truncated"]
        self._env_id, self._ended, self._final_obs = b["env_id"], b["ended"], b["final_obs"]
        self._info = _typed_columns(b["info"])
        self._final_info = _typed_columns(b["final_info"])
        self._profile_names = np.array(self.profiles + ["?"], dtype=object)  # -1: "?"
        self._ones = np.ones(self.num_envs, dtype=bool)
        self._ones.flags.writeable = False
        self._all_ids = np.arange(self.num_envs, dtype=np.int32)
        self._seeded = np.zeros(self.num_envs, dtype=bool)
        self._was_reset = False
        self._rows_are_envs = True  # the buffers' rows are environments (not a recv batch)
        self._static = {}
        self._profiles_cache = {}
        self._no_refusals = {}

    def fork(self, env_ids=None):
        """Independent copies of sub-environments at their state (for search: lookahead,
        MCTS, beam search): a new InProcessVectorEnv whose sub-environment k is a fork of
        this one's env_ids[k] (env_ids: None for every one, in order; an int for one; a
        list, which may repeat an id for several copies). Each fork has its episode (its
        generator, profile, placement, history and time), so the same actions give the fork
        and the original bit-identical observations and rewards, and neither sees what the
        other does. Its current observations and infos are the forked rows (and its
        action_masks() theirs); it is stepped on, not reset. The same autoreset mode,
        threads and copy. ValueError while steps are in flight (recv() them) or for an id
        out of range."""
        self._require_open()
        ids = fork_ids(env_ids, self.num_envs)
        if self._core.in_flight:
            raise ValueError(f"{self._core.in_flight} steps sent and not received; recv() "
                             "them before forking")
        if not self._rows_are_envs:
            raise ValueError("fork() after recv(): the buffers' rows are a batch's, not the "
                             "sub-environments'; step() or reset() first")
        core = self._core.fork(ids)
        forked = object.__new__(type(self))
        forked._init_common(len(ids), None, {}, self._mode, None)
        forked.batch_size = len(ids)
        forked.copy = self.copy
        forked.threads = self.threads
        forked._adopt(core)
        forked._seeded = self._seeded[ids].copy()
        forked._was_reset = self._was_reset
        return forked

    # --- outputs ---------------------------------------------------------------------

    def _view(self, a, rows):
        a = a if rows == self.num_envs else a[:rows]
        return a.copy() if self.copy else a

    def _static_infos(self, cols, rows):
        """The part of an info dict that is the same every call: views of the buffers (or
        nothing, with copy=True) and the "_key" masks."""
        mask = self._ones if rows == self.num_envs else self._ones[:rows]
        out = {}
        if not self.copy:
            for key in INFO_ARRAYS:
                out[key] = cols[key] if rows == self.num_envs else cols[key][:rows]
        for key in INFO_KEYS:
            out["_" + key] = mask
        return out

    def _infos(self, cols, rows, flags, masks=None):
        """Column-wise infos as tiergym.VectorEnv returns them, over `rows` rows (with the
        "_key" masks `masks`, default all True). The object columns are rebuilt only when
        they may have changed (flags from the core: 2 a refused move, 4 a reset, which may
        change the profile); a column that is reused is never modified afterwards (a new
        one replaces it)."""
        key = (id(cols), rows)
        static = self._static.get(key)
        if static is None:
            static = self._static[key] = self._static_infos(cols, rows)
        out = dict(static)
        if self.copy:
            for k in INFO_ARRAYS:
                out[k] = cols[k][:rows].copy()
        profile = self._profiles_cache.get(key)
        if profile is None or flags & 4:
            profile = self._profile_names[cols[INFO_NAME][:rows]]
            profile.flags.writeable = False
            self._profiles_cache[key] = profile
        out[INFO_NAME] = profile
        if flags & 2:
            refused = tuple_column(cols[INFO_TUPLE_COUNT], cols[INFO_TUPLE], rows)
        else:
            refused = no_refusals(self._no_refusals, rows)
        out[INFO_TUPLE] = refused
        if masks is not None:
            for k in INFO_KEYS:
                out["_" + k] = masks.copy()
        return out

    def _result(self, rows, flags):
        if rows == self.num_envs and not self.copy:
            obs, rewards = self._obs, self._reward
            terminations, truncations = self._terminated, self._truncated
        else:
            obs = self._view(self._obs, rows)
            rewards = self._view(self._reward, rows)
            terminations = self._view(self._terminated, rows)
            truncations = self._view(self._truncated, rows)
        infos = self._infos(self._info, rows, flags)
        if flags & 1:
            ended = self._ended[:rows].copy()
            final_obs = np.empty(rows, dtype=object)
            for i in np.flatnonzero(ended):
                final_obs[i] = self._final_obs[i].copy()
            infos["final_obs"] = final_obs
            infos["_final_obs"] = ended
            final_info = self._infos(self._final_info, rows, flags | 4, masks=ended)
            if not self.copy:  # the final columns are read rarely: give them their own
                final_info = {k: (v.copy() if isinstance(v, np.ndarray) and v.base is not None
                                  else v) for k, v in final_info.items()}
            infos["final_info"] = final_info
            infos["_final_info"] = ended.copy()
        return obs, rewards, terminations, truncations, infos

    def _actions(self, actions, rows):
        a = actions
        if (type(a) is np.ndarray and a.dtype == np.int64 and a.flags.c_contiguous
                and a.shape == ((rows, *self._action_shape))):
            return a
        a = integer_actions(actions, "actions")
        want = (rows, *self._action_shape)
        if a.shape != want:
            a = a.reshape(want)  # ValueError names both shapes when it cannot
        return np.ascontiguousarray(a)

    # --- Gymnasium's vector API --------------------------------------------------------

    def reset(self, *, seed=None, options=None):
        """Resets every sub-environment, or those of options["reset_mask"] (a bool array
        [num_envs]; the others keep their observation and have no info). seed: None, an
        int (env i gets seed + i) or a list of n ints / None (unseeded sub-environments
        are seeded from entropy at their first reset); options: {"profile": name or
        index, or one per sub-environment}."""
        self._require_open()
        mask, options = reset_mask(options, self.num_envs, not self._was_reset)
        which = [int(i) for i in np.flatnonzero(mask)]
        if not which:
            return self._view(self._obs, self.num_envs), {}
        if len(which) < self.num_envs and not self._rows_are_envs:
            raise ValueError("options['reset_mask'] after recv(): the rows of the other "
                             "sub-environments are not theirs; reset them all, or step "
                             "with step()")
        profiles = _profiles(options, self.num_envs)
        seeds = [None] * self.num_envs
        for i, s in zip(which, batch_seeds(seed, which, self.num_envs, self._seeded)):
            seeds[i] = s
        full = len(which) == self.num_envs
        flags = self._core.reset(None if full else mask, seeds, profiles)
        self._seeded[which] = True
        self._was_reset = True
        self._rows_are_envs = True
        if full:
            obs, _, _, _, infos = self._result(self.num_envs, flags | 4)
            return obs, infos
        part = {k: v[which] for k, v in self._infos(self._info, self.num_envs, flags | 4).items()
                if not k.startswith("_")}
        return self._view(self._obs, self.num_envs), scatter_infos(part, which, self.num_envs)

    def step(self, actions):
        self._require_open()
        if not self._was_reset:
            raise gymnasium.error.ResetNeeded("step() before the first reset()")
        flags = self._core.step(self._actions(actions, self.num_envs))
        self._rows_are_envs = True
        return self._result(self.num_envs, flags)

    def action_masks(self):
        """[num_envs, mask size] bool: each sub-environment's flat action mask (see
        TierEnv.action_masks), as MaskablePPO's vectorised path stacks them. After recv(),
        the rows are those of the batch received (infos["env_id"])."""
        self._require_open()
        if not self._was_reset:
            raise gymnasium.error.ResetNeeded("action_masks() before the first reset()")
        return np.stack([flat_mask(m) for m in self._info["action_mask"]])

    # --- EnvPool's asynchronous API ------------------------------------------------------

    def async_reset(self, *, seed=None, options=None):
        """Queues the reset of every sub-environment; recv() returns their first
        observations, batch_size at a time."""
        self._require_open()
        options = dict(options or {})
        if "reset_mask" in options:
            raise ValueError("async_reset resets every sub-environment (no reset_mask)")
        profiles = _profiles(options, self.num_envs)
        seeds = batch_seeds(seed, list(range(self.num_envs)), self.num_envs, self._seeded)
        self._core.send_reset(seeds, profiles)
        self._seeded[:] = True
        self._was_reset = True

    def send(self, actions, env_ids=None):
        """Queues one step of each environment of env_ids (default: all) with its action
        (one row per env_id) and returns at once."""
        self._require_open()
        ids = self._all_ids if env_ids is None else np.ascontiguousarray(env_ids, dtype=np.int32)
        self._core.send(ids.reshape(-1), self._actions(actions, ids.size))

    def recv(self):
        """The first batch_size environments whose step (or async reset) finished:
        (obs, rewards, terminations, truncations, infos) with infos["env_id"]."""
        self._require_open()
        rows = self.batch_size
        flags = self._core.recv(rows)
        self._rows_are_envs = False
        result = self._result(rows, flags | 4)  # rows are other environments every call
        result[4]["env_id"] = self._env_id[:rows].copy()
        result[4]["_env_id"] = result[4]["_step"]
        return result

    @property
    def in_flight(self):
        """Steps sent and not yet received."""
        return self._core.in_flight

    def _require_open(self):
        if self.closed:
            raise gymnasium.error.ClosedEnvironmentError(
                "this tiergym InProcessVectorEnv is closed (its environments were freed by "
                "close())")

    def close_extras(self, **kwargs):
        """Frees the environments (VectorEnv.close() calls this once)."""
        # The core (its environments and threads) goes when the last array viewing its
        # buffers does; steps in flight are dropped.
        self._core = None
        self._obs = self._reward = self._terminated = self._truncated = None
        self._env_id = self._ended = self._final_obs = self._info = self._final_info = None
        self._static = {}
        self._profiles_cache = {}

    def __repr__(self):
        return (f"tiergym.InProcessVectorEnv({self.num_envs}, threads={self.threads}, "
                f"autoreset_mode={self._mode!r})")
