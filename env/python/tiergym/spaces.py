"""Spaces: Gymnasium's when gymnasium is importable, else minimal ones with the same API.

The fallback classes implement what agents use: `shape`, `dtype`, `contains` (and `in`),
`sample`, `seed` (which returns the seed list), `np_random`, `n` / `nvec` / `low` /
`high`. `from_spec` builds a space from a protocol space description (env/PROTOCOL.md).
"""

import numpy as np

try:  # pragma: no cover - depends on the machine
    import gymnasium
    from gymnasium import spaces as _gym_spaces
except ImportError:  # pragma: no cover
    gymnasium = None
    _gym_spaces = None

HAVE_GYMNASIUM = gymnasium is not None


class Space:
    """Base of the fallback spaces."""

    def __init__(self, shape, dtype, seed=None):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self._np_random = None
        if seed is not None:
            self.seed(seed)

    @property
    def np_random(self):
        if self._np_random is None:
            self.seed()
        return self._np_random

    def seed(self, seed=None):
        seed_seq = np.random.SeedSequence(seed)
        self._np_random = np.random.Generator(np.random.PCG64(seed_seq))
        return [seed_seq.entropy if seed is None else seed]

    def __contains__(self, x):
        return self.contains(x)


class Box(Space):
    def __init__(self, low, high, shape, dtype=np.float32, seed=None):
        super().__init__(shape, dtype, seed)
        self.low = np.full(self.shape, low, dtype=self.dtype)
        self.high = np.full(self.shape, high, dtype=self.dtype)

    def contains(self, x):
        x = np.asarray(x)
        return (x.shape == self.shape and np.can_cast(x.dtype, self.dtype)
                and bool(np.all(x >= self.low)) and bool(np.all(x <= self.high)))

    def sample(self):
        return self.np_random.uniform(self.low, self.high, size=self.shape).astype(self.dtype)

    def __repr__(self):
        return f"Box({self.low.min()}, {self.high.max()}, {self.shape}, {self.dtype})"


class Discrete(Space):
    def __init__(self, n, seed=None, start=0):
        super().__init__((), np.int64, seed)
        self.n = int(n)
        self.start = int(start)

    def contains(self, x):
        if isinstance(x, (np.ndarray, np.generic)):
            if x.shape != () or not np.issubdtype(x.dtype, np.integer):
                return False
            x = int(x)
        elif not isinstance(x, (int, np.integer)) or isinstance(x, bool):
            return False
        return self.start <= x < self.start + self.n

    def sample(self):
        return np.int64(self.start + self.np_random.integers(self.n))

    def __repr__(self):
        return f"Discrete({self.n})"


class MultiDiscrete(Space):
    def __init__(self, nvec, dtype=np.int64, seed=None):
        self.nvec = np.asarray(nvec, dtype=dtype)
        super().__init__(self.nvec.shape, dtype, seed)

    def contains(self, x):
        x = np.asarray(x)
        return (x.shape == self.shape and np.issubdtype(x.dtype, np.integer)
                and bool(np.all(x >= 0)) and bool(np.all(x < self.nvec)))

    def sample(self):
        return (self.np_random.random(self.shape) * self.nvec).astype(self.dtype)

    def __repr__(self):
        return f"MultiDiscrete({self.nvec})"


def box(low, high, shape):
    if HAVE_GYMNASIUM:
        return _gym_spaces.Box(low=low, high=high, shape=tuple(shape), dtype=np.float32)
    return Box(low, high, shape, np.float32)


def discrete(n):
    return _gym_spaces.Discrete(n) if HAVE_GYMNASIUM else Discrete(n)


def multi_discrete(nvec):
    if HAVE_GYMNASIUM:
        return _gym_spaces.MultiDiscrete(np.asarray(nvec, dtype=np.int64))
    return MultiDiscrete(nvec)


def from_spec(space):
    """A space from its protocol description."""
    kind = space["type"]
    if kind == "box":
        return box(space["low"], space["high"], space["shape"])
    if kind == "discrete":
        return discrete(space["n"])
    if kind == "multi_discrete":
        return multi_discrete(np.full(space["shape"], space["nvec"], dtype=np.int64))
    raise ValueError(f"unknown space type {kind!r}")


def batched(space, n):
    """The space of `n` stacked elements of `space` (Gymnasium's batch_space for these kinds)."""
    if isinstance(space, Box) or (HAVE_GYMNASIUM and isinstance(space, _gym_spaces.Box)):
        return box(float(np.min(space.low)), float(np.max(space.high)), (n, *space.shape))
    if isinstance(space, Discrete) or (HAVE_GYMNASIUM and isinstance(space, _gym_spaces.Discrete)):
        return multi_discrete(np.full(n, space.n, dtype=np.int64))
    return multi_discrete(np.tile(space.nvec, (n, 1)))
