"""InProcessVectorEnv: n environments in this process, stepped in C++ on a thread pool.

    envs = tiergym.InProcessVectorEnv(64, threads=2, num_regions=64)
    # or: tiergym.VectorEnv(64, inprocess=True, threads=2, num_regions=64)
    obs, infos = envs.reset(seed=42)                 # env i is seeded 42 + i
    obs, rewards, terminations, truncations, infos = envs.step(actions)

The same environments, spaces, configuration keys, autoreset modes and info keys as
tiergym.VectorEnv (the ZeroMQ client of `tiergym serve`), and the same episodes for the same
seeds and actions, bit for bit; but no server, no messages: the compiled core
(tiergym._core, env/vector/vector_env.h) holds the environments, steps them with the GIL
released, and writes observations, rewards, flags and infos straight into numpy arrays
allocated once. Those arrays are returned without a copy, so they are overwritten by the
next reset/step/recv (as EnvPool's and Gymnasium's copy=False); pass copy=True to get
fresh arrays every call.

EnvPool-style asynchronous stepping:

    envs = tiergym.InProcessVectorEnv(64, threads=2, batch_size=16)
    envs.async_reset(seed=0)
    while training:
        obs, rewards, terminations, truncations, infos = envs.recv()   # 16 ready envs
        envs.send(policy(obs), infos["env_id"])

recv() returns the first batch_size environments whose step finished, infos["env_id"]
saying which; send(actions, env_ids) queues their next steps and returns at once.

The extension is built by CMake (TIERGYM_BUILD_PYTHON_EXT, needs nanobind) into
build/python/tiergym/; it is imported from the package when installed there, else from
$TIERGYM_PYTHON_EXT_DIR, $TIERGYM_BIN_DIR/../python/tiergym or the repository's build tree.
"""

import glob
import importlib.util
import numbers
import os
import pathlib
import sys

import numpy as np

from . import spaces
from .vector import NEXT_STEP, SAME_STEP, _Base, _mode_value

_core = None


def _candidate_dirs():
    dirs = []
    if os.environ.get("TIERGYM_PYTHON_EXT_DIR"):
        dirs.append(pathlib.Path(os.environ["TIERGYM_PYTHON_EXT_DIR"]))
    if os.environ.get("TIERGYM_BIN_DIR"):
        dirs.append(pathlib.Path(os.environ["TIERGYM_BIN_DIR"]).parent / "python" / "tiergym")
    dirs.append(pathlib.Path(__file__).resolve().parents[3] / "build" / "python" / "tiergym")
    return dirs


def load_core():
    """The extension module tiergym._core; ImportError says where it was looked for."""
    global _core
    if _core is not None:
        return _core
    try:
        from . import _core as module  # installed beside the package
        _core = module
        return _core
    except ImportError:
        pass
    dirs = _candidate_dirs()
    for d in dirs:
        found = sorted(glob.glob(str(d / "_core*.so")))
        if not found:
            continue
        spec = importlib.util.spec_from_file_location(__package__ + "._core", found[0])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[__package__ + "._core"] = module
        _core = module
        return _core
    raise ImportError(
        "the in-process extension tiergym._core was not found (looked in the package, "
        "$TIERGYM_PYTHON_EXT_DIR, $TIERGYM_BIN_DIR/../python/tiergym and "
        f"{dirs[-1]}); build it with CMake and nanobind: pip install nanobind, then "
        "cmake -DPython_EXECUTABLE=$(which python) ... (TIERGYM_BUILD_PYTHON_EXT)")


def have_core():
    try:
        load_core()
        return True
    except ImportError:
        return False


def _config_strings(config):
    """Configuration values as strings, exactly as the server turns the wire's values into
    strings (env/protocol ReadConfig): ints in decimal, floats with 6 significant digits,
    bools as true/false, lists joined by commas."""
    out = {}
    for key, value in config.items():
        if isinstance(value, (list, tuple)):
            items = [str(v) for v in value]
            for j, item in enumerate(items):
                if "," in item:
                    raise ValueError(f"config.{key}[{j}]: an element of a list may not contain "
                                     "a comma")
            out[key] = ",".join(items)
        elif isinstance(value, (bool, np.bool_)):
            out[key] = "true" if value else "false"
        elif isinstance(value, numbers.Integral):
            out[key] = str(int(value))
        elif isinstance(value, numbers.Real):
            out[key] = format(float(value), ".6g")
        else:
            out[key] = str(value)
    return out


def _seeds(seed, n):
    if seed is None:
        return []
    if isinstance(seed, (list, tuple, np.ndarray)):
        if len(seed) != n:
            raise ValueError(f"{len(seed)} seeds for {n} environments")
        return [None if s is None else int(s) for s in seed]
    return [int(seed) + i for i in range(n)]


def _profile(options):
    if not options:
        return None
    unknown = set(options) - {"profile"}
    if unknown:
        raise ValueError(f"options: unknown keys {sorted(unknown)} (known: 'profile')")
    p = options.get("profile")
    return None if p is None else str(p)


class InProcessVectorEnv(_Base):
    def __init__(self, num_envs, *, autoreset_mode=NEXT_STEP, threads=1, batch_size=None,
                 copy=False, **config):
        if autoreset_mode not in (NEXT_STEP, SAME_STEP):
            raise ValueError(f"autoreset_mode must be {NEXT_STEP!r} or {SAME_STEP!r}, "
                             f"got {autoreset_mode!r}")
        if int(num_envs) < 1:
            raise ValueError("num_envs must be at least 1")
        if int(threads) < 1:
            raise ValueError("threads must be at least 1 (the calling thread)")
        self.num_envs = int(num_envs)
        self.batch_size = self.num_envs if batch_size is None else int(batch_size)
        if not 1 <= self.batch_size <= self.num_envs:
            raise ValueError(f"batch_size must be in [1, {self.num_envs}], got {batch_size}")
        self.autoreset_mode = autoreset_mode
        self.metadata = {"render_modes": [], "autoreset_mode": _mode_value(autoreset_mode)}
        self.render_mode = None
        self.closed = False
        self.copy = bool(copy)
        core = load_core()
        self._core = core.VectorCore(_config_strings(config), self.num_envs, int(threads),
                                     autoreset_mode == SAME_STEP)
        self.threads = int(threads)
        self.tier_spec = dict(self._core.spec)
        self.config = dict(self._core.config)
        self.tiers = list(self.tier_spec["tiers"])
        self.profiles = list(self.tier_spec["profiles"])
        self.num_regions = int(self.tier_spec["num_regions"])
        self.single_observation_space = spaces.from_spec(self.tier_spec["observation"])
        self.single_action_space = spaces.from_spec(self.tier_spec["action"])
        self.observation_space = spaces.batched(self.single_observation_space, self.num_envs)
        self.action_space = spaces.batched(self.single_action_space, self.num_envs)
        self._move_mode = self.tier_spec["action"]["type"] == "discrete"
        self._action_shape = (() if self._move_mode else (self.num_regions,))
        b = self._core.buffers()
        self._obs, self._reward = b["obs"], b["reward"]
        self._terminated, self._truncated = b["terminated"], b["truncated"]
        self._env_id, self._ended, self._final_obs = b["env_id"], b["ended"], b["final_obs"]
        self._info, self._final_info = b["info"], b["final_info"]
        self._profile_names = np.array(self.profiles + ["?"], dtype=object)  # -1: "?"
        self._ones = np.ones(self.num_envs, dtype=bool)
        self._ones.flags.writeable = False
        self._empty_refused = np.zeros(0, dtype=np.int32)
        self._empty_refused.flags.writeable = False
        self._all_ids = np.arange(self.num_envs, dtype=np.int32)
        self._static = {}
        self._profiles_cache = {}
        self._no_refusals = {}

    # --- outputs ---------------------------------------------------------------------

    def _view(self, a, rows):
        a = a if rows == self.num_envs else a[:rows]
        return a.copy() if self.copy else a

    _INFO_ARRAYS = ("step", "interval_ns", "default_interval_ns", "migration_ns",
                    "migrated_bytes", "elapsed_ns", "default_elapsed_ns", "default_total_ns",
                    "tier_used_bytes", "action_mask")

    def _static_infos(self, cols, rows):
        """The part of an info dict that is the same every call: views of the buffers (or
        nothing, with copy=True) and the "_key" masks."""
        mask = self._ones if rows == self.num_envs else self._ones[:rows]
        out = {}
        if not self.copy:
            for key in self._INFO_ARRAYS:
                out[key] = cols[key] if rows == self.num_envs else cols[key][:rows]
        for key in ("profile",) + self._INFO_ARRAYS + ("refused_regions",):
            out["_" + key] = mask
        return out

    def _infos(self, cols, rows, flags):
        """Column-wise infos as tiergym.VectorEnv returns them, over `rows` rows. The
        object columns are rebuilt only when they may have changed (flags from the core:
        2 a refused move, 4 a reset, which may change the profile); a column that is
        reused is never modified afterwards (a new one replaces it)."""
        key = (id(cols), rows)
        static = self._static.get(key)
        if static is None:
            static = self._static[key] = self._static_infos(cols, rows)
        out = dict(static)
        if self.copy:
            for k in self._INFO_ARRAYS:
                out[k] = cols[k][:rows].copy()
        profile = self._profiles_cache.get(key)
        if profile is None or flags & 4:
            profile = self._profile_names[cols["profile"][:rows]]
            profile.flags.writeable = False
            self._profiles_cache[key] = profile
        out["profile"] = profile
        if flags & 2:
            refused = np.empty(rows, dtype=object)
            refused.fill(self._empty_refused)
            counts = cols["refused_count"][:rows]
            for i in np.flatnonzero(counts):
                refused[i] = cols["refused_regions"][i, :counts[i]].copy()
        else:
            refused = self._no_refusals.get(rows)
            if refused is None:
                refused = np.empty(rows, dtype=object)
                refused.fill(self._empty_refused)
                refused.flags.writeable = False
                self._no_refusals[rows] = refused
        out["refused_regions"] = refused
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
            infos["final_info"] = self._infos(self._final_info, rows, flags | 4)
            infos["_final_info"] = ended.copy()
        return obs, rewards, terminations, truncations, infos

    def _actions(self, actions, rows):
        a = actions
        if (type(a) is np.ndarray and a.dtype == np.int64 and a.flags.c_contiguous
                and a.shape == ((rows, *self._action_shape))):
            return a
        a = np.ascontiguousarray(actions, dtype=np.int64)
        want = (rows, *self._action_shape)
        if a.shape != want:
            a = np.ascontiguousarray(a.reshape(want))  # ValueError names both shapes
        return a

    # --- Gymnasium's vector API --------------------------------------------------------

    def reset(self, *, seed=None, options=None):
        """Resets every sub-environment. seed: None, an int (env i gets seed + i) or a list
        of n ints/None; options: {"profile": name or index} for all."""
        self._check_open()
        flags = self._core.reset(_seeds(seed, self.num_envs), _profile(options))
        obs, _, _, _, infos = self._result(self.num_envs, flags | 4)
        return obs, infos

    def step(self, actions):
        self._check_open()
        flags = self._core.step(self._actions(actions, self.num_envs))
        return self._result(self.num_envs, flags)

    # --- EnvPool's asynchronous API ------------------------------------------------------

    def async_reset(self, *, seed=None, options=None):
        """Queues the reset of every sub-environment; recv() returns their first
        observations, batch_size at a time."""
        self._check_open()
        self._core.send_reset(_seeds(seed, self.num_envs), _profile(options))

    def send(self, actions, env_ids=None):
        """Queues one step of each environment of env_ids (default: all) with its action
        (one row per env_id) and returns at once."""
        self._check_open()
        ids = self._all_ids if env_ids is None else np.ascontiguousarray(env_ids, dtype=np.int32)
        self._core.send(ids.reshape(-1), self._actions(actions, ids.size))

    def recv(self):
        """The first batch_size environments whose step (or async reset) finished:
        (obs, rewards, terminations, truncations, infos) with infos["env_id"]."""
        self._check_open()
        rows = self.batch_size
        flags = self._core.recv(rows)
        result = self._result(rows, flags | 4)  # rows are other environments every call
        result[4]["env_id"] = self._env_id[:rows].copy()
        result[4]["_env_id"] = result[4]["_step"]
        return result

    @property
    def in_flight(self):
        """Steps sent and not yet received."""
        return self._core.in_flight

    def close(self, **kwargs):
        """Frees the environments. Idempotent."""
        if self.closed:
            return
        self.closed = True
        # The core (its environments and threads) goes when the last array viewing its
        # buffers does; steps in flight are dropped.
        self._core = None
        self._obs = self._reward = self._terminated = self._truncated = None
        self._env_id = self._ended = self._final_obs = self._info = self._final_info = None
        self._static = {}

    def _check_open(self):
        if self.closed:
            raise RuntimeError("the vector environment is closed")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return (f"tiergym.InProcessVectorEnv({self.num_envs}, threads={self.threads}, "
                f"autoreset_mode={self.autoreset_mode!r})")
