"""tiergym.datasets: named, versioned splits of applications and machines to train and
evaluate placement agents on (CompilerGym's datasets are the model).

    import tiergym
    from tiergym import datasets
    datasets.names()                     # the splits, with their versions
    train = datasets.get("procedural-train-v1")
    env = tiergym.make("tiergym/TierPlacement-v1", profiles="procedural-train-v1")  # its pool
    envs = tiergym.make_vec("tiergym/TierPlacement-v1", 64, inprocess=True,
                            observation="relative", **train.config(n=1024))       # 1024 apps
    for app in datasets.get("bundled-v1").apps: ...

A split is a list of applications (profiles) and the configuration keys an episode on it
needs (the machine it runs on). Its name ends in a version, "-v1": what a name holds never
changes; a change makes a new version, and results name the version they were made on.

| split | what | size |
| --- | --- | ---: |
| procedural-train-v1 | procedural applications, seeds 0 ... (traces/SYNTH.md section 11) on knl; the training distribution | unbounded (seeds below 1,000,000); a pool of the first 256 by default |
| procedural-test-v1 | procedural applications, seeds 1,000,000 ... 1,000,063 on knl: the same distribution, seeds disjoint from training | 64 |
| bundled-v1 | the bundled mini-apps minife, lulesh, nekbone, lammps on knl (held-out programs: written by hand after real codes, not drawn from the distribution) | 4 |
| real-v1 | real, unmodified programs from Debian's packages (LAMMPS's melt and crack examples, HPC Challenge), recorded once with tiergym-prof's timer backend and projected onto knl (held out; also `profiles="real"`) | 3 |
| machine-xeonmax-v2 | the bundled mini-apps on xeonmax (Xeon Max 9480 along published Mess bandwidth-latency curves: DDR5 measured on its Sapphire Rapids siblings, HBM as the A64FX's measured HBM2E), a machine no split trains on | 4 |

machine-xeonmax-v1 (retired) was the same programs on the xeonmax whose HBM tier was derived
from DDR5's curves; since the HBM is the measured HBM2E, the split is v2. Results on v1 say so.

Every split of an evaluation uses the task's other keys (512 MiB of fast tier, 16 regions,
...): `config()` gives only `profiles` and `machine`.

Profiles are generated on first use into the tiergym cache ($XDG_CACHE_HOME/tiergym or
~/.cache/tiergym, under datasets-v1/MACHINE-DIGEST-seed1-sSAMPLES/APP/profile, DIGEST twelve
hex digits of a hash of the machine's description: machine_digest) by the tiergym
binary (`tiergym trace synth --app procedural:SEED --format bin --no-runs`; 20,000 samples
for procedural applications, 200,000 for programs, as the bundled profiles), each written
to a temporary directory and renamed into place, so that processes preparing the same
split at once are safe; later uses find them there. `tiergym.datasets.prepare(name, n)`
(or `python -m tiergym.datasets prepare NAME`) makes them ahead.

The real programs (traces/real/README.md) are shipped as their recordings, compressed
binary traces (`traces/real/<program>.tgt.xz`, installed as tiergym/data/real/). On first
use each is decompressed and projected onto the machine asked for (`tiergym trace project
--machine M --format bin`, traces/PROJECTION.md) into the cache, under
datasets-v1/real-<projection model>/MACHINE/DIGEST/PROGRAM/profile (MACHINE a bundled
machine's name and a digest of its description, or `file-` and a digest of a machine
file's contents; DIGEST the shipped
recording's), so a new recording or projection model is projected anew.
`real-v1` runs on knl; configuration keys that name `real-v1` (or its alias "real") and
a `machine` get the programs projected onto that machine.

In configuration keys (`gymnasium.make`, `tiergym.VectorEnv`, `InProcessVectorEnv`),
`profiles` may name splits: "procedural-train-v1" (its default pool), "procedural-train-v1:1024"
(the first 1024 applications), and mix them with profile names ("minife,procedural-test-v1").
They are resolved in this process into profile directories, so the server must see this
process's files: a private server (the default) or an in-process vector environment does;
a server elsewhere needs the directories prepared on its machine and given by path.
"""

import dataclasses
import functools
import hashlib
import lzma
import os
import pathlib
import random
import shutil
import subprocess
import sys
import tempfile
import threading

# The version of this module's cache layout and of the split definitions below.
VERSION = 1
# Samples of a generated profile's run on the default tier: the bundled profiles' 200,000
# for programs; a tenth of it for procedural applications, which are many (a pool of 256
# loaded in one process takes about 1.4 GB at 20,000 samples, 3.2 GB at 50,000: measured,
# env/README.md "Datasets").
SAMPLES = 200_000
PROCEDURAL_SAMPLES = 20_000
# The seed of the synthetic sampling and noise (the bundled profiles' too).
SYNTH_SEED = 1
# Procedural seeds: training draws below TEST_SEED_BASE, testing from it on.
TRAIN_SEED_LIMIT = 1_000_000
TEST_SEED_BASE = 1_000_000
DEFAULT_POOL = 256

_BUNDLED = ("minife", "lulesh", "nekbone", "lammps")
# The real programs (traces/real/README.md): each shipped as traces/real/NAME.tgt.xz.
_REAL = ("lammps-melt", "lammps-crack", "hpcc")
# The projection model `tiergym trace project` writes into its traces' headers
# (projection_model=): part of the cache's path, so that profiles projected by another
# model are never taken for this one's.
PROJECTION_MODEL = "v3"
# Another name of the real programs' split in `profiles`.
ALIASES = {"real": "real-v1"}


def real_dir():
    """The directory of the bundled real programs' recordings: installed in the package
    (data/real) or in the source tree (traces/real); None when neither holds them."""
    here = pathlib.Path(__file__).resolve().parent
    for path in (here / "data" / "real", here.parents[2] / "traces" / "real"):
        if all((path / f"{name}.tgt.xz").is_file() for name in _REAL):
            return path
    return None


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A split: `name` (with its version), `kind` ("procedural", "programs", "real" or
    "machine"), `description`, the machine its applications run on, and its applications:
    procedural seeds (`seeds`, a range) or named models (`apps`)."""

    name: str
    kind: str
    description: str
    machine: str = "knl"
    seeds: range = None
    apps: tuple = ()
    default_pool: int = 0
    available: bool = True
    unavailable_reason: str = ""
    # The server's bundled profiles (served by name, by any server): no generation here.
    served_by_name: bool = False
    # Samples of each generated profile's run on the default tier.
    samples: int = SAMPLES

    def __len__(self):
        return len(self.seeds) if self.seeds is not None else len(self.apps)

    @property
    def size(self):
        return len(self)

    def app_names(self, n=None):
        """The names of the first `n` applications (default: the default pool for an
        unbounded split, else all): "procedural-v1-17", "minife"."""
        return [app_name(m) for m in self.models(n)]

    def models(self, n=None):
        """What `tiergym trace synth --app` takes for the first `n` applications:
        "procedural:17", "minife"."""
        self._require_available()
        if self.seeds is not None:
            count = self.default_pool if n is None else int(n)
            if not 0 < count <= len(self.seeds):
                raise ValueError(f"{self.name}: {count} applications asked for, it holds "
                                 f"{len(self.seeds)}")
            return [f"procedural:{s}" for s in self.seeds[:count]]
        count = len(self.apps) if n is None else int(n)
        if not 0 < count <= len(self.apps):
            raise ValueError(f"{self.name}: {count} applications asked for, it holds "
                             f"{len(self.apps)}")
        return list(self.apps[:count])

    def profiles(self, n=None, progress=None, machine=None):
        """The profile directories of the first `n` applications, generated on first use
        (module docstring), or their names for the server's bundled profiles (which every
        server serves by name). progress(line) is called for each one generated. `machine`
        (a bundled machine's name or a machine file) projects a real program's split onto
        that machine instead of its own; the other splits are generated for theirs."""
        if self.served_by_name:
            return self.models(n)
        machine = self.machine if machine is None or self.kind != "real" else str(machine)
        key = (self.name, n, self.samples, machine, str(cache_dir()))
        dirs = _resolved.get(key)
        if dirs is None or not all(os.path.isdir(d) for d in dirs[:1]):
            if self.kind == "real":
                dirs = [ensure_real_profile(m, machine, progress=progress)
                        for m in self.models(n)]
            else:
                dirs = [ensure_profile(m, self.machine, self.samples, progress=progress)
                        for m in self.models(n)]
            _resolved[key] = dirs
        return list(dirs)

    def config(self, n=None, progress=None, machine=None):
        """The configuration keys of an episode on this split: its profiles (directories)
        and its machine (`machine` instead of its own, for real programs: see
        profiles())."""
        machine = self.machine if machine is None or self.kind != "real" else machine
        return {"profiles": self.profiles(n, progress, machine), "machine": machine}

    def _require_available(self):
        if not self.available:
            raise LookupError(f"{self.name}: {self.unavailable_reason}")


_SPLITS = [
    Dataset("procedural-train-v1", "procedural",
            "procedural applications (traces/SYNTH.md section 11), seeds 0 and up, on knl: "
            "the training distribution",
            seeds=range(0, TRAIN_SEED_LIMIT), default_pool=DEFAULT_POOL,
            samples=PROCEDURAL_SAMPLES),
    Dataset("procedural-test-v1", "procedural",
            "procedural applications of the same distribution, seeds 1,000,000-1,000,063, "
            "disjoint from training, on knl",
            seeds=range(TEST_SEED_BASE, TEST_SEED_BASE + 64), default_pool=64,
            samples=PROCEDURAL_SAMPLES),
    Dataset("bundled-v1", "programs",
            "the bundled mini-apps (minife, lulesh, nekbone, lammps) on knl: programs written "
            "after real codes, not drawn from the distribution",
            apps=_BUNDLED, served_by_name=True),
    Dataset("real-v1", "real",
            "real, unmodified programs from Debian (LAMMPS melt and crack, HPC Challenge) "
            "recorded once with tiergym-prof's timer backend, projected onto knl",
            apps=_REAL, available=real_dir() is not None,
            unavailable_reason="the bundled real programs' recordings (traces/real/*.tgt.xz, "
                               "installed as tiergym/data/real) are missing from this "
                               "installation: reinstall tiergym"),
    Dataset("machine-xeonmax-v2", "machine",
            "the bundled mini-apps on xeonmax (Xeon Max 9480 along measured "
            "bandwidth-latency curves: DDR5, and the A64FX's HBM2E for its HBM), a machine "
            "no split trains on",
            machine="xeonmax", apps=_BUNDLED),
]
DATASETS = {d.name: d for d in _SPLITS}


def names():
    """The splits' names, training split first."""
    return list(DATASETS)


def get(name):
    """A split by name; KeyError lists the known ones."""
    try:
        return DATASETS[name]
    except KeyError:
        raise KeyError(f"no dataset {name!r} (known: {', '.join(DATASETS)})") from None


def app_name(model):
    """The application (profile) name of a model as `tiergym trace synth --app` takes it:
    "procedural:17" -> "procedural-v1-17", "minife" -> "minife"."""
    if model.startswith("procedural:"):
        return f"procedural-v{VERSION}-{int(model.partition(':')[2])}"
    return model


def cache_dir():
    """$XDG_CACHE_HOME/tiergym, else ~/.cache/tiergym (where `tiergym serve` keeps the
    bundled profiles)."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg.startswith("/"):
        return pathlib.Path(xdg) / "tiergym"
    return pathlib.Path.home() / ".cache" / "tiergym"


def machine_digest(machine):
    """Twelve hex digits of a hash of `machine`'s description: a machine file's bytes, a
    bundled machine's `tiergym trace synth --print-model MACHINE`. Profiles are kept per
    description, so that a machine whose numbers change under the same name (xeonmax's HBM
    tier did) gets new profiles rather than those generated on its old description. A
    file is read each time (it may be edited while a process runs); a bundled machine's
    description is asked of the binary once per process."""
    if os.path.isfile(machine):
        return _file_digest(machine)[:12]
    return _bundled_machine_digest(str(machine))


@functools.lru_cache(maxsize=None)
def _bundled_machine_digest(machine):
    from .connection import find_binary  # noqa: PLC0415 (the binary knows the presets)

    done = subprocess.run([find_binary(), "trace", "synth", "--print-model", machine],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise ValueError(f"machine {machine!r}: {done.stderr.strip()}")
    return hashlib.sha256(done.stdout.encode()).hexdigest()[:12]


def profile_root(machine, samples=SAMPLES):
    return (cache_dir() / f"datasets-v{VERSION}" /
            f"{machine}-{machine_digest(machine)}-seed{SYNTH_SEED}-s{samples}")


_lock = threading.Lock()
# (split, n, samples, cache) -> its profile directories, once they all exist.
_resolved = {}


def _make_once(dest, label, progress, command):
    """Makes `dest` (a directory) once, under the lock: runs the tiergym binary with the
    arguments command(tmp) returns, with their output directory in a temporary directory
    `tmp` beside `dest`, and renames what it made, tmp / dest.name, into place (atomic; when
    another process was first, its result stands). `label` says what is made in the
    progress line and the error."""
    from .connection import find_binary  # noqa: PLC0415 (only when making)

    with _lock:
        if dest.is_dir():
            return
        dest.parent.mkdir(parents=True, exist_ok=True)
        if progress is not None:
            progress(f"{label} into {dest.parent}")
        tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".tmp-{dest.name}-", dir=dest.parent))
        try:
            done = subprocess.run([find_binary(), *command(tmp)], capture_output=True,
                                  text=True)
            if done.returncode != 0:
                raise RuntimeError(f"{label} failed (exit {done.returncode}): "
                                   f"{done.stderr.strip()}")
            try:
                os.rename(tmp / dest.name, dest)
            except OSError:
                if not dest.is_dir():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def ensure_profile(model, machine="knl", samples=SAMPLES, progress=None):
    """The profile directory of `model` ("procedural:SEED" or a bundled model's name) on
    `machine`, generated when missing. Returns its path as a string."""
    root = profile_root(machine, samples)
    name = app_name(model)
    profile = root / name / "profile"
    if not profile.is_dir():
        _make_once(root / name, f"generating {name} on {machine}", progress,
                   lambda tmp: ["trace", "synth", "--app", model, "--machine", machine,
                                "--seed", str(SYNTH_SEED), "--samples", str(samples),
                                "--format", "bin", "--no-runs", "--quiet", "--out", str(tmp)])
    return str(profile)


def _file_digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def _machine_key(machine):
    """The cache's name of a machine: a bundled machine's name and a digest of its
    description (machine_digest: a bundled machine whose numbers change is projected
    anew), a machine file as `file-` and a digest of its contents."""
    if os.path.isfile(machine):
        return "file-" + machine_digest(machine)
    if not machine or not all(c.isalnum() or c in "-_." for c in machine) or machine[0] == ".":
        raise ValueError(f"machine {machine!r}: neither a bundled machine's name nor a file")
    return f"{machine}-{machine_digest(machine)}"


def _unpacked_recording(name, progress=None):
    """The bundled recording of real program `name`, decompressed into the cache once
    (keyed by the shipped file's digest). Returns (path, digest)."""
    where = real_dir()
    if where is None:
        raise LookupError(get("real-v1").unavailable_reason)
    packed = where / f"{name}.tgt.xz"
    digest = _file_digest(packed)
    root = cache_dir() / f"datasets-v{VERSION}" / "real-recordings"
    out = root / f"{name}-{digest}.tgt"
    if out.is_file():
        return out, digest
    root.mkdir(parents=True, exist_ok=True)
    if progress is not None:
        progress(f"unpacking the recording of {name} into {root}")
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{name}-", dir=root)
    try:
        with os.fdopen(fd, "wb") as f, lzma.open(packed) as src:
            shutil.copyfileobj(src, f, 1 << 20)
        os.rename(tmp, out)  # atomic: a concurrent unpacker writes the same bytes
    except (lzma.LZMAError, EOFError) as e:
        os.unlink(tmp)
        raise RuntimeError(f"{packed}: not a whole xz file ({e}); reinstall tiergym") from None
    except BaseException:
        os.unlink(tmp)
        raise
    return out, digest


def ensure_real_profile(name, machine="knl", progress=None):
    """The profile directory of bundled real program `name` projected onto `machine` (a
    bundled machine's name or a machine file), projected when missing (`tiergym trace
    project --machine M --format bin`). Returns its path as a string."""
    if name not in _REAL:
        raise ValueError(f"no bundled real program {name!r} (known: {', '.join(_REAL)})")
    recording, digest = _unpacked_recording(name, progress)
    # PROGRAM/profile: a server names a profile directory by its parent's name.
    root = (cache_dir() / f"datasets-v{VERSION}" / f"real-{PROJECTION_MODEL}" /
            _machine_key(machine) / digest / name)
    profile = root / "profile"
    if not profile.is_dir():
        _make_once(profile, f"projecting {name} onto {machine}", progress,
                   lambda tmp: ["trace", "project", "--machine", str(machine), "--format",
                                "bin", str(recording), str(tmp / "profile")])
    return str(profile)


def prepare(name, n=None, progress=None):
    """Generates the profiles of a split's first `n` applications now; returns their
    directories."""
    return get(name).profiles(n, progress=progress)


def parse_entry(entry):
    """(Dataset, n or None) of a `profiles` entry naming a split ("procedural-train-v1",
    "procedural-train-v1:1024", or an alias: "real"), else None."""
    name, colon, count = str(entry).partition(":")
    name = ALIASES.get(name, name)
    if name not in DATASETS:
        return None
    if not colon:
        return DATASETS[name], None
    try:
        n = int(count)
    except ValueError:
        raise ValueError(f"profiles: {entry!r}: expected {name}:N with N a number of "
                         "applications") from None
    return DATASETS[name], n


def resolve_config(config):
    """`config` with the splits `profiles` names replaced by their profile directories
    (generated on first use) and, when it names splits and no `machine`, the splits'
    machine (all of them must agree). Other configurations are returned as they are."""
    profiles = config.get("profiles")
    if profiles is None:
        return config
    entries = (list(profiles) if isinstance(profiles, (list, tuple))
               else [p for p in str(profiles).split(",")])
    parsed = [parse_entry(e.strip()) if isinstance(e, str) else None for e in entries]
    if not any(parsed):
        return config
    machines = {split[0].machine for split in parsed if split is not None}
    if "machine" not in config and len(machines) > 1:
        raise ValueError(f"profiles: the splits named run on different machines "
                         f"({', '.join(sorted(machines))}); name one or give machine=")
    out = []
    for entry, split in zip(entries, parsed):
        if split is None:
            out.append(entry)
        else:
            dataset, n = split
            machine = config.get("machine")
            out.extend(dataset.profiles(n, machine=machine if isinstance(machine, str)
                                        else None))
    resolved = dict(config, profiles=out)
    if "machine" not in config:
        resolved["machine"] = machines.pop()
    return resolved


def _main(argv):
    import argparse  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="python -m tiergym.datasets",
                                     description="tiergym's named splits (tiergym.datasets)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the splits, their sizes and what they hold")
    prep = sub.add_parser("prepare", help="generate a split's profiles now")
    prep.add_argument("name")
    prep.add_argument("-n", type=int, default=None,
                      help="the first N applications (default: the split's default pool)")
    args = parser.parse_args(argv)
    if args.command == "list":
        for d in _SPLITS:
            size = "unbounded" if d.seeds is not None and len(d.seeds) >= TRAIN_SEED_LIMIT \
                else str(len(d))
            state = "" if d.available else " (not available: " + d.unavailable_reason + ")"
            print(f"{d.name:<22} {d.kind:<11} {size:>9}  {d.description}{state}")
        return 0
    try:
        dirs = prepare(args.name, args.n, progress=lambda line: print(line, file=sys.stderr))
    except (KeyError, LookupError, ValueError, RuntimeError) as e:
        print(f"tiergym.datasets: {e}", file=sys.stderr)
        return 1
    d = get(args.name)
    where = "served by name" if d.served_by_name else f"under {profile_root(d.machine, d.samples)}"
    print(f"{args.name}: {len(dirs)} profiles {where}")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
