"""tiergym.datasets: the named splits are listed with their versions, the procedural
training and test seeds are disjoint, an application is the same for the same seed
(byte-identical profiles), a split named in `profiles` is served as its profile
directories (in-process and through a private server), and bad names say what to fix."""

import hashlib
import pathlib

import numpy as np
import pytest

from tiergym_testing import needs_binary
import tiergym
from tiergym import datasets, inprocess

CORE_REASON = ""
try:
    inprocess.load_core()
except ImportError as e:  # pragma: no cover - depends on the build
    CORE_REASON = f"the extension is not built: {e}"

TASK = dict(tiergym.DEFAULT_TASK, steps=5)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh tiergym cache, and small profiles (quick to make)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(datasets, "PROCEDURAL_SAMPLES", 3000)
    for d in datasets.DATASETS.values():
        if d.kind == "procedural":
            monkeypatch.setitem(datasets.DATASETS, d.name,
                                datasets.dataclasses.replace(d, samples=3000))
    datasets._resolved.clear()
    yield tmp_path
    datasets._resolved.clear()


def test_the_splits_are_named_versioned_and_disjoint():
    names = datasets.names()
    assert names[0] == "procedural-train-v1"
    for name in ("procedural-test-v1", "bundled-v1", "real-v1", "machine-xeonmax-v2"):
        assert name in names
    assert all(n.rsplit("-", 1)[1].startswith("v") for n in names)
    train, test = datasets.get("procedural-train-v1"), datasets.get("procedural-test-v1")
    assert set(train.seeds).isdisjoint(test.seeds)
    assert len(test) == 64 and len(train) == datasets.TRAIN_SEED_LIMIT
    assert train.app_names(3) == ["procedural-v1-0", "procedural-v1-1", "procedural-v1-2"]
    assert test.app_names(1) == ["procedural-v1-1000000"]
    assert not set(train.app_names(1000)) & set(test.app_names())
    assert datasets.get("bundled-v1").app_names() == ["minife", "lulesh", "nekbone", "lammps"]
    assert datasets.get("machine-xeonmax-v2").machine == "xeonmax"
    with pytest.raises(KeyError, match="known: procedural-train-v1"):
        datasets.get("procedural-train-v0")


def test_an_unavailable_split_says_why(monkeypatch):
    # An installation without the real programs' recordings (a split's files missing).
    real = datasets.dataclasses.replace(datasets.get("real-v1"), available=False)
    monkeypatch.setitem(datasets.DATASETS, "real-v1", real)
    with pytest.raises(LookupError, match="reinstall tiergym"):
        real.profiles()
    found, _ = datasets.parse_entry("real")
    assert found is real and not found.available


def digest(profile):
    h = hashlib.sha256()
    for f in sorted(pathlib.Path(profile).iterdir()):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()


@needs_binary
def test_an_application_is_the_same_for_the_same_seed(cache, tmp_path_factory, monkeypatch):
    a = datasets.get("procedural-train-v1").profiles(2)
    assert [pathlib.Path(p).parent.name for p in a] == ["procedural-v1-0", "procedural-v1-1"]
    assert all(pathlib.Path(p, "ddr.tgt").is_file() and pathlib.Path(p, "hbm.tgt").is_file()
               for p in a)
    assert digest(a[0]) != digest(a[1])
    first = digest(a[0])
    # Made again in another cache: byte for byte the same.
    other = tmp_path_factory.mktemp("other")
    monkeypatch.setenv("XDG_CACHE_HOME", str(other))
    datasets._resolved.clear()
    b = datasets.get("procedural-train-v1").profiles(1)
    assert b[0].startswith(str(other))
    assert digest(b[0]) == first
    # Found in the cache the second time (not generated again).
    mtime = pathlib.Path(b[0], "ddr.tgt").stat().st_mtime_ns
    datasets._resolved.clear()
    assert datasets.get("procedural-train-v1").profiles(1) == b
    assert pathlib.Path(b[0], "ddr.tgt").stat().st_mtime_ns == mtime


@pytest.mark.skipif(bool(CORE_REASON), reason=CORE_REASON)
@needs_binary
def test_a_split_named_in_profiles_is_served(cache):
    envs = tiergym.InProcessVectorEnv(2, profiles="procedural-test-v1:3", **TASK)
    try:
        assert envs.tier_spec["profiles"] == ["procedural-v1-1000000", "procedural-v1-1000001",
                                              "procedural-v1-1000002"]
        assert envs.configs[0]["machine"] == "knl"
        envs.reset(seed=0, options={"profile": "procedural-v1-1000001"})
        _, rewards, *_ = envs.step(np.zeros((2, 16), dtype=np.int64))
        assert np.isfinite(rewards).all()
    finally:
        envs.close()
    # A private server (given one of them to load first: quick) serves them too.
    first = datasets.get("procedural-test-v1").profiles(1)[0]
    env = tiergym.TierEnv(profiles=["procedural-test-v1:1"], server_args=["--profiles", first],
                          **TASK)
    try:
        assert env.profiles == ["procedural-v1-1000000"]
        env.reset(seed=0)
    finally:
        env.close()
    # Names and splits mix; bundled programs stay names (every server serves them).
    mixed = datasets.resolve_config({"profiles": "minife,procedural-test-v1:2"})
    assert mixed["profiles"][0] == "minife" and len(mixed["profiles"]) == 3
    # The config as given is what pickles: resolved again where it is unpickled.
    assert datasets.resolve_config({"profiles": "bundled-v1"}) == {
        "profiles": ["minife", "lulesh", "nekbone", "lammps"], "machine": "knl"}
    assert datasets.resolve_config({"profiles": "minife"}) == {"profiles": "minife"}


def test_bad_split_entries_say_what_to_fix(cache):
    with pytest.raises(ValueError, match="procedural-train-v1:N"):
        datasets.resolve_config({"profiles": "procedural-train-v1:many"})
    with pytest.raises(ValueError, match="64 applications asked for|65 applications"):
        datasets.resolve_config({"profiles": "procedural-test-v1:65"})
    with pytest.raises(ValueError, match="different machines"):
        datasets.resolve_config({"profiles": "bundled-v1,machine-xeonmax-v2"})


@needs_binary
def test_profiles_are_kept_per_machine_description(cache, tmp_path):
    # A machine whose numbers change under its name (xeonmax's HBM tier did) gets a new
    # cache directory, not the profiles generated on its old description.
    knl, xeonmax, cxl = (datasets.machine_digest(m) for m in ("knl", "xeonmax", "ddr5cxl"))
    assert len({knl, xeonmax, cxl}) == 3 and all(len(d) == 12 for d in (knl, xeonmax, cxl))
    assert datasets.profile_root("xeonmax").name == f"xeonmax-{xeonmax}-seed1-s200000"
    machine = tmp_path / "m.json"
    text = tiergym_print_model("ddr5cxl")
    machine.write_text(text)
    first = datasets.machine_digest(str(machine))
    assert first == cxl  # the file holds what the preset prints
    other = tmp_path / "m2.json"
    other.write_text(text.replace('"migration_gbps": 8', '"migration_gbps": 9'))
    assert datasets.machine_digest(str(other)) != first
    machine.write_text(other.read_text())  # the same file edited: its new description counts
    assert datasets.machine_digest(str(machine)) == datasets.machine_digest(str(other))
    with pytest.raises(ValueError, match="nosuch"):
        datasets.machine_digest("nosuch")


def tiergym_print_model(name):
    import subprocess  # noqa: PLC0415
    from tiergym.connection import find_binary  # noqa: PLC0415
    return subprocess.run([find_binary(), "trace", "synth", "--print-model", name],
                          capture_output=True, text=True, check=True).stdout
