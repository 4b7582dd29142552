"""VectorEnv: n sessions stepped together through step_batch, with Gymnasium's vector API.

    envs = tiergym.VectorEnv(8, num_regions=16)
    obs, infos = envs.reset(seed=42)           # env i is seeded 42 + i
    obs, rewards, terminations, truncations, infos = envs.step(actions)

Autoreset: "next_step" (default; Gymnasium's default): the step after an episode ended
resets that sub-environment, ignores its action and returns its first observation with
reward 0 and terminated = truncated = False. "same_step": the step that ends an episode
resets it at once; `obs` holds the new episode's first observation and
infos["final_obs"] / infos["final_info"] (masked by "_final_obs" / "_final_info") hold the
last observation and info of the old one. The mode is declared in metadata["autoreset_mode"].
Infos are dicts of arrays with one row per sub-environment and "_key" masks.
"""

import numpy as np

from . import spaces
from ._protocol import ENV_ID, decode_array, decode_info_columns, decode_spec, encode_array
from .connection import DEFAULT_TIMEOUT_S
from .env import close_connection, config_to_wire, open_connection

if spaces.HAVE_GYMNASIUM:  # pragma: no cover - depends on the machine
    import gymnasium.vector as _gym_vector
    _Base = _gym_vector.VectorEnv
    _AutoresetMode = getattr(_gym_vector, "AutoresetMode", None)
else:
    _Base = object
    _AutoresetMode = None

NEXT_STEP = "next_step"
SAME_STEP = "same_step"


def _mode_value(mode):
    if _AutoresetMode is not None:
        return _AutoresetMode.NEXT_STEP if mode == NEXT_STEP else _AutoresetMode.SAME_STEP
    return mode


class VectorEnv(_Base):
    def __new__(cls, num_envs=1, address=None, *, inprocess=False, **kwargs):
        # inprocess=True: the environments in this process (tiergym.InProcessVectorEnv).
        if inprocess:
            if address is not None:
                raise ValueError("inprocess=True runs the environments in this process; "
                                 "it takes no address")
            from .inprocess import InProcessVectorEnv
            return InProcessVectorEnv(num_envs, **kwargs)
        return super().__new__(cls)

    def __init__(self, num_envs, address=None, *, autoreset_mode=NEXT_STEP,
                 timeout=DEFAULT_TIMEOUT_S, server_args=(), inprocess=False, **config):
        if autoreset_mode not in (NEXT_STEP, SAME_STEP):
            raise ValueError(f"autoreset_mode must be {NEXT_STEP!r} or {SAME_STEP!r}, "
                             f"got {autoreset_mode!r}")
        if int(num_envs) < 1:
            raise ValueError("num_envs must be at least 1")
        self.num_envs = int(num_envs)
        self.autoreset_mode = autoreset_mode
        self.metadata = {"render_modes": [], "autoreset_mode": _mode_value(autoreset_mode)}
        self.render_mode = None
        self.closed = False
        self.sessions = []
        self._connection, self._server = open_connection(address, timeout, server_args)
        try:
            wire = config_to_wire(config)
            for _ in range(self.num_envs):
                reply = self._connection.call("make", env=ENV_ID, config=wire)
                self.sessions.append(reply["session"])
        except BaseException:
            self.close()
            raise
        self.tier_spec = decode_spec(reply["spec"])
        self.config = reply["config"]
        self.tiers = list(self.tier_spec["tiers"])          # as TierEnv has them
        self.profiles = list(self.tier_spec["profiles"])
        self.num_regions = int(self.tier_spec["num_regions"])
        self.single_observation_space = spaces.from_spec(self.tier_spec["observation"])
        self.single_action_space = spaces.from_spec(self.tier_spec["action"])
        self.observation_space = spaces.batched(self.single_observation_space, self.num_envs)
        self.action_space = spaces.batched(self.single_action_space, self.num_envs)
        self._move_mode = self.tier_spec["action"]["type"] == "discrete"
        self._autoreset = np.zeros(self.num_envs, dtype=bool)

    def _actions_to_wire(self, actions):
        a = np.asarray(actions, dtype=np.int64)
        want = (self.num_envs,) if self._move_mode else (self.num_envs, self.tier_spec["num_regions"])
        if a.shape != want:
            a = a.reshape(want)  # ValueError names both shapes when it cannot
        return encode_array(a, "int64")

    def _batch(self, actions, reset, seeds=None, options=None, autoreset="none"):
        fields = {"sessions": self.sessions, "actions": actions,
                  "reset": encode_array(reset, "bool"), "autoreset": autoreset}
        if seeds is not None:
            fields["seeds"] = seeds
        if options is not None:
            fields["options"] = options
        return self._connection.call("step_batch", **fields)

    def reset(self, *, seed=None, options=None):
        """Resets every sub-environment. seed: None, an int (env i gets seed + i) or a list
        of n ints/None; options: {"profile": name or index} for all."""
        if seed is None:
            seeds = [None] * self.num_envs
        elif isinstance(seed, (list, tuple, np.ndarray)):
            if len(seed) != self.num_envs:
                raise ValueError(f"{len(seed)} seeds for {self.num_envs} environments")
            seeds = [None if s is None else int(s) for s in seed]
        else:
            seeds = [int(seed) + i for i in range(self.num_envs)]
        opts = None
        if options:
            opts = [dict(options) for _ in range(self.num_envs)]
        zeros = np.zeros((self.num_envs,) if self._move_mode
                         else (self.num_envs, self.tier_spec["num_regions"]), dtype=np.int64)
        reply = self._batch(encode_array(zeros, "int64"), np.ones(self.num_envs, dtype=bool),
                            seeds, opts)
        self._autoreset[:] = False
        return decode_array(reply["obs"]), decode_info_columns(reply["info"])

    def step(self, actions):
        wire = self._actions_to_wire(actions)
        if self.autoreset_mode == NEXT_STEP:
            reply = self._batch(wire, self._autoreset.copy())
        else:
            reply = self._batch(wire, np.zeros(self.num_envs, dtype=bool), autoreset=SAME_STEP)
        obs = decode_array(reply["obs"])
        rewards = decode_array(reply["reward"])
        terminations = decode_array(reply["terminated"])
        truncations = decode_array(reply["truncated"])
        infos = decode_info_columns(reply["info"])
        if self.autoreset_mode == NEXT_STEP:
            self._autoreset = terminations | truncations
        elif "final_obs" in reply:
            ended = terminations | truncations
            final_obs = decode_array(reply["final_obs"])
            infos["final_obs"] = np.array([final_obs[i] if ended[i] else None
                                           for i in range(self.num_envs)], dtype=object)
            infos["_final_obs"] = ended.copy()
            infos["final_info"] = decode_info_columns(reply["final_info"])
            infos["_final_info"] = ended.copy()
        return obs, rewards, terminations, truncations, infos

    def close(self, **kwargs):
        """Closes the sessions and stops a private server. Idempotent."""
        if getattr(self, "closed", False) and self._connection is None:
            return
        self.closed = True
        connection, server = self._connection, self._server
        self._connection = self._server = None
        close_connection(connection, server, self.sessions)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return f"tiergym.VectorEnv({self.num_envs}, autoreset_mode={self.autoreset_mode!r})"
