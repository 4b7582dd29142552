"""The observation's set-structured layout (tiergym.wrappers: SetObservation,
SetObservationVector, split_observation, feature_names) holds the same numbers as the flat
observation, in every observation mode, for one environment over ZeroMQ and for vector
environments in every autoreset mode; and the relative mode's features are what
env/README.md ("Observations that transfer") says, on a three-tier machine too."""

import subprocess

import gymnasium
import numpy as np
import pytest

from tiergym_testing import server_fixture
import tiergym
from tiergym import inprocess, wrappers

CORE_REASON = ""
try:
    inprocess.load_core()
except ImportError as e:  # pragma: no cover - depends on the build
    CORE_REASON = f"the extension is not built: {e}"
needs_core = pytest.mark.skipif(bool(CORE_REASON), reason=CORE_REASON)

server = server_fixture("--threads", "1")

CONFIG = dict(num_regions=8, steps=6, tier_capacity_mib="hbm:512", action_mode="keep",
              profiles="minife,lulesh")
MODES = ("raw", "normalized", "relative", "relative-load")


def check_split(flat, split, spec):
    """split == flat, element for element: rows of region features, then the globals."""
    k, f, g, n = wrappers.observation_layout(spec)
    flat = np.asarray(flat)
    regions, globals_ = split["regions"], split["globals"]
    assert regions.shape == flat.shape[:-1] + (k, f)
    assert globals_.shape == flat.shape[:-1] + (n,)
    for r in range(k):
        np.testing.assert_array_equal(regions[..., r, :], flat[..., r * f:(r + 1) * f])
    np.testing.assert_array_equal(globals_, flat[..., g:])
    np.testing.assert_array_equal(wrappers.join_observation(regions, globals_), flat)


@pytest.mark.parametrize("mode", MODES)
def test_set_observation_holds_the_flat_observation(server, mode):
    flat_env = tiergym.TierEnv(address=server, observation=mode, **CONFIG)
    set_env = wrappers.SetObservation(tiergym.TierEnv(address=server, observation=mode,
                                                      **CONFIG))
    try:
        spec = flat_env.tier_spec
        names, global_names = wrappers.feature_names(spec)
        assert len(names) == spec["obs_region_features"]
        assert set_env.observation_space["regions"].shape == (8, len(names))
        assert set_env.observation_space["globals"].shape == (len(global_names),)
        a, _ = flat_env.reset(seed=3)
        b, _ = set_env.reset(seed=3)
        check_split(a, b, spec)
        assert set_env.observation_space.contains(b)
        rng = np.random.default_rng(0)
        for _ in range(6):
            action = rng.integers(0, 3, size=8)
            a, ra, *_ = flat_env.step(action)
            b, rb, *_ = set_env.step(action)
            assert ra == rb
            check_split(a, b, spec)
    finally:
        flat_env.close()
        set_env.close()


class Recorder(gymnasium.vector.VectorWrapper):
    """Keeps the flat observations (and infos) a vector environment returns."""

    def reset(self, **kwargs):
        self.last = self.env.reset(**kwargs)
        return self.last

    def step(self, actions):
        self.last = self.env.step(actions)
        return self.last


@needs_core
@pytest.mark.parametrize("autoreset", [tiergym.NEXT_STEP, tiergym.SAME_STEP])
def test_set_observation_vector_holds_the_flat_observations(autoreset):
    flat = Recorder(tiergym.InProcessVectorEnv(3, observation="relative", copy=True,
                                               autoreset_mode=autoreset, **CONFIG))
    split = wrappers.SetObservationVector(flat)
    spec = flat.env.tier_spec
    try:
        assert split.observation_space["regions"].shape == (3, 8, 20)
        assert split.single_observation_space["globals"].shape == (4 + 8,)
        b, _ = split.reset(seed=1)
        check_split(flat.last[0], b, spec)
        rng = np.random.default_rng(1)
        ended = 0
        for _ in range(14):  # past the end of the first episodes
            b, _, term, _, ib = split.step(rng.integers(0, 3, size=(3, 8)))
            a, ia = flat.last[0], flat.last[4]
            check_split(a, b, spec)
            if "final_obs" in ia:
                for i in np.flatnonzero(ia["_final_obs"]):
                    check_split(np.asarray(ia["final_obs"][i], dtype=np.float32),
                                ib["final_obs"][i], spec)
                    ended += 1
            ended += int(term.sum()) if autoreset == tiergym.NEXT_STEP else 0
        assert ended > 0
    finally:
        split.close()


@needs_core
def test_relative_features_carry_the_rank_against_the_fast_tier(tmp_path):
    """The rank feature marks exactly the regions a densest-first fill of the fast tier
    takes, by decayed density; room and migration read the spec's capacities; on a
    three-tier machine every per-tier block has three columns."""
    envs = tiergym.InProcessVectorEnv(1, observation="relative", copy=True, **CONFIG)
    try:
        spec = envs.tier_spec
        names, _ = wrappers.feature_names(spec)
        col = {n: i for i, n in enumerate(names)}
        envs.reset(seed=0)
        for _ in range(3):
            obs, *_ = envs.step(np.zeros((1, 8), dtype=np.int64))
        regions, _ = wrappers.split_observation(obs[0], spec)
        density = np.where(regions[:, 3] > 0, regions[:, 2] / regions[:, 3], 0)
        bytes_ = np.diff(spec["region_bounds"][0], axis=1)[:, 0].astype(np.float64)
        hbm = spec["tiers"].index("hbm")
        capacity = float(spec["tier_capacity_bytes"][hbm])
        order = np.argsort(-density, kind="stable")
        ahead = np.empty(8)
        ahead[order] = np.cumsum(bytes_[order])
        rank = regions[:, col["rank_decayed[hbm]"]]
        np.testing.assert_allclose(rank / (1 - rank), ahead / capacity, rtol=1e-4)
        assert ((rank <= 0.5) == (ahead <= capacity)).all()
        room = regions[:, col["room[hbm]"]]
        np.testing.assert_allclose(room / (1 - room), bytes_ / capacity, rtol=1e-4)
    finally:
        envs.close()
    # A profile generated for the three-tier machine (few samples: quick).
    subprocess.run([tiergym.find_binary(), "trace", "synth", "--app", "nekbone", "--machine",
                    "disagg", "--samples", "5000", "--chunks", "20", "--format", "bin",
                    "--no-runs", "--quiet", "--out", str(tmp_path)], check=True,
                   capture_output=True)
    profile = str(tmp_path / "nekbone" / "profile")
    three = tiergym.InProcessVectorEnv(1, observation="relative", machine="disagg",
                                       num_regions=4, steps=3, tier_capacity_mib="hbm:512",
                                       profiles=profile)
    try:
        names, global_names = wrappers.feature_names(three.tier_spec)
        assert len(names) == 10 + 5 * 3 == three.tier_spec["obs_region_features"]
        assert "migration[remote]" in names and "latency[remote]" in global_names
        obs, _ = three.reset(seed=0)
        regions, globals_ = wrappers.split_observation(obs[0], three.tier_spec)
        on = regions[:, [names.index(f"on[{t}]") for t in three.tier_spec["tiers"]]]
        np.testing.assert_array_equal(on.sum(axis=1), np.ones(4))
        assert on[:, 0].all()  # every episode starts on the default tier
    finally:
        three.close()
