#!/usr/bin/env python3
"""Scores the runtime estimator on a family of ground truths (estimator/README.md, "Held out
on a family of ground truths"; the family: traces/SYNTH.md section 10).

For every (truth member, machine, seed, application) it generates the synthetic profile and
its measured runs once (`tiergym trace synth --truth M`, cached under --cache), runs
`tiergym validate --json` with the estimator options given after `--` (or `tiergym
calibrate` with --calibrate, cross-validated), and prints the mean and max error and the
coverage of the 90 % interval per member and placement kind:

  fractions  hbmNN runs (10-90 % of the footprint on the fast tier)
  ranges     range-* runs (address ranges on the fast tier)
  mixes      mix-* runs (three tiers: fast, far and the default tier)

With --bound it scores nothing: for members whose profiles are the same byte for byte it
prints the least worst error any estimate from the profile can reach on them, from the
measured runs alone (estimator/README.md, "A bound no uncalibrated estimate passes").

usage: scripts/estimator_family.py [--members spec,overlap,...] [--machines knl,disagg]
       [--seeds 1,2] [--apps minife,...] [--pairs 1:minife,2:lammps] [--cache DIR]
       [--json OUT.json] [--calibrate] [--configs FILE] [--fit-prior [--prior-candidates]]
       [--bound] [-- VALIDATE OPTIONS...]

The tiergym command is the one on PATH, or TIERGYM (environment). Progress on stderr.
"""
import argparse
import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

ALL_MEMBERS = ["spec", "overlap", "smooth", "hiding", "exposed", "queueing", "drift",
               "mixed-a", "mixed-b"]
ALL_APPS = ["minife", "lulesh", "nekbone", "lammps", "phasedrift", "hotset"]


def kind_of(run_name):
    if run_name.startswith("mix-"):
        return "mixes"
    if run_name.startswith("range-"):
        return "ranges"
    return "fractions"


def tiergym():
    return os.environ.get("TIERGYM", "tiergym")


def run(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def profile_dir(cache, member, machine, seed, app):
    return os.path.join(cache, f"{member}-{machine}-s{seed}", app)


# What a generated profile is stamped with (GENERATOR_STAMP in its directory): the digest of
# the generator's sources the binary was built from (sources_id over GENERATOR_SOURCE_DIRS:
# the time model, the ground-truth members, the bundled application and machine models,
# the trace writers).
GENERATOR_STAMP = "generator.json"
GENERATOR_SOURCE_DIRS = ("traces",)


def ensure_profile(cache, member, machine, seed, app):
    """The directory of the profile and measured runs of (member, machine, seed, app),
    generated when missing or when it was made by another generator than the binary's (its
    stamp differs: a change to the time model or a bundled model; the directory, scores
    included, is made anew). A profile without a stamp (made before stamps) is taken as
    this generator's and stamped; where the sources cannot vouch for the binary (outside a
    build tree, or edited since), the profile is kept as it is."""
    d = profile_dir(cache, member, machine, seed, app)
    stamp = os.path.join(d, GENERATOR_STAMP)
    generator = generator_id()
    if os.path.exists(os.path.join(d, "runs", "runs.csv")):
        made_by = read_stamp(stamp)
        if generator is None or made_by == generator:
            return d
        if made_by is not None:
            print(f"estimator_family: {d} was made by another generator: made anew",
                  file=sys.stderr)
            shutil.rmtree(d)
    if not os.path.exists(os.path.join(d, "runs", "runs.csv")):
        run([tiergym(), "trace", "synth", "--app", app, "--machine", machine, "--truth",
             member, "--seed", str(seed), "--format", "bin", "--quiet",
             "--out", os.path.dirname(d)])
    if generator is not None:
        with open(stamp, "w") as f:
            json.dump({"generator": generator}, f)
    return d


_GENERATOR_IDS = {}  # tiergym() -> generator_id()


def generator_id():
    """The digest of the generator's sources the binary was built from (sources_id over
    GENERATOR_SOURCE_DIRS), or None; once per command and process."""
    command = tiergym()
    if command not in _GENERATOR_IDS:
        _GENERATOR_IDS[command] = sources_id(binary_path(), GENERATOR_SOURCE_DIRS)
    return _GENERATOR_IDS[command]


def read_stamp(path):
    """The generator digest a profile's stamp names, or None (no stamp, or unreadable)."""
    try:
        with open(path) as f:
            return json.load(f).get("generator")
    except (OSError, ValueError, AttributeError):
        return None


# What a validate row holds (score_uncached): 2 added the access shares.
VALIDATE_ROWS = 2


def score_keys(options, calibrate):
    """The keys a profile's scores are cached under, one per identity of the estimator that
    runs (estimator_ids), each with the options, the command and (validate) the rows'
    format: scores found under any of them are this estimator's."""
    return [hashlib.sha1(json.dumps([options, calibrate, identity] + (
        [] if calibrate else [VALIDATE_ROWS])).encode()).hexdigest()[:16]
        for identity in estimator_ids()]


def score(d, machine, options, calibrate):
    """[(run name, kind, error %, inside the interval or None)] of one profile, cached in
    the profile's directory by the options and the estimator (score_keys): found under one
    key, the scores (and the calibration file) are written under the others too."""
    keys = score_keys(options, calibrate)
    paths = [os.path.join(d, f"score-{key}.json") for key in keys]
    found = next((i for i, path in enumerate(paths) if os.path.exists(path)), None)
    if found is None:
        rows, found = score_uncached(d, machine, options, calibrate, keys[0]), 0
    else:
        with open(paths[found]) as f:
            rows = [tuple(r) for r in json.load(f)]
    for key, path in zip(keys, paths):
        if calibrate and not os.path.exists(calibration_path(d, key)) and os.path.exists(
                calibration_path(d, keys[found])):
            shutil.copyfile(calibration_path(d, keys[found]), calibration_path(d, key))
        if not os.path.exists(path):
            with open(path, "w") as f:
                json.dump(rows, f)
    return rows


_BINARY_DIGEST = {}  # tiergym() -> the SHA-256 of the binary it runs
_ESTIMATOR_IDS = {}  # tiergym() -> estimator_ids()

# The sources a score depends on, relative to the source tree the binary was built from:
# every C++ source and header, CMake file and bundled JSON model (machines, applications)
# under these folders, and the top-level CMakeLists.txt (the compile options). The server,
# the environment, the profiler and the documentation are not among them.
SCORE_SOURCE_DIRS = ("estimator", "traces")
SCORE_SOURCE_SUFFIXES = (".cc", ".h", ".json", "CMakeLists.txt")
# The build's settings (CMakeCache.txt) that change what the same sources compile to.
SCORE_BUILD_SETTINGS = ("CMAKE_BUILD_TYPE", "CMAKE_CXX_COMPILER", "CMAKE_CXX_FLAGS")


def binary_path():
    """The tiergym binary that runs: tiergym() itself, or, when that is the Python package's
    launcher (a script that execs the binary installed in the package), that binary."""
    path = shutil.which(tiergym()) or tiergym()
    with open(path, "rb") as f:
        head = f.readline()
    if not head.startswith(b"#!"):
        return path
    interpreter = head[2:].decode().strip().split()
    proc = subprocess.run(interpreter + ["-c", "from tiergym.connection import find_binary; "
                                         "print(find_binary(use_path=False))"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    found = proc.stdout.strip()
    return found if proc.returncode == 0 and os.path.isfile(found) else path


def binary_id():
    """Identifies the tiergym binary by its content (SHA-256), so that a rebuild that changes
    nothing it computes keeps the cached scores and one that does rescores. Once per
    command and process: finding the binary behind the launcher starts a Python process,
    and every score's key asks for it."""
    command = tiergym()
    if command not in _BINARY_DIGEST:
        digest = hashlib.sha256()
        with open(binary_path(), "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        _BINARY_DIGEST[command] = digest.hexdigest()
    return _BINARY_DIGEST[command]


def build_settings(binary):
    """{name: value} of the CMake build tree holding `binary` (BUILD/bin/tiergym: BUILD's
    CMakeCache.txt), with CMAKE_HOME_DIRECTORY, the source tree; None outside a build tree
    (the Python package's installed binary)."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(binary))),
                        "CMakeCache.txt")
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    wanted = ("CMAKE_HOME_DIRECTORY",) + SCORE_BUILD_SETTINGS
    settings = {}
    for line in lines:
        name, _, value = line.partition("=")
        name = name.split(":")[0]
        if name in wanted or name.startswith("CMAKE_CXX_FLAGS_"):
            settings[name] = value
    return settings if "CMAKE_HOME_DIRECTORY" in settings else None


def score_sources(root, folders=SCORE_SOURCE_DIRS):
    """[(path relative to root, absolute path)] of the sources under `folders` (default:
    those the scores depend on) and the top-level CMakeLists.txt."""
    found = []
    for top in folders:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            found += [(os.path.relpath(os.path.join(folder, f), root), os.path.join(folder, f))
                      for f in sorted(files) if f.endswith(SCORE_SOURCE_SUFFIXES)]
    found.append(("CMakeLists.txt", os.path.join(root, "CMakeLists.txt")))
    return sorted(found)


def sources_id(binary, folders=SCORE_SOURCE_DIRS):
    """The SHA-256 of the sources under `folders` (default: the estimator's) `binary` was
    built from and of its build settings, or None where that cannot be vouched for: the
    binary lies outside a CMake build tree, or a source is newer than it (not rebuilt
    since: it may compute something else)."""
    settings = build_settings(binary)
    if settings is None:
        return None
    built = os.path.getmtime(binary)
    digest = hashlib.sha256(json.dumps(sorted(
        (k, v) for k, v in settings.items() if k != "CMAKE_HOME_DIRECTORY")).encode())
    for rel, path in score_sources(settings["CMAKE_HOME_DIRECTORY"], folders):
        try:
            if os.path.getmtime(path) > built:
                print(f"estimator_family: {path} is newer than {binary} (rebuild it): the "
                      "scores are cached by the binary's content", file=sys.stderr)
                return None
            with open(path, "rb") as f:
                content = f.read()
        except OSError:
            return None
        digest.update(f"{rel}\0{len(content)}\0".encode())
        digest.update(content)
    return digest.hexdigest()


def estimator_ids():
    """What the scores of the tiergym that runs depend on, either of which vouches for them:
    the digest of the estimator's sources it was built from (sources_id), which a rebuild for
    anything else keeps (the server, another worktree's paths), and the binary's content
    (binary_id), which a change to the sources that compiles to the same bytes keeps (a
    reformatting). Only the binary's where the sources cannot vouch for it. Once per command
    and process."""
    command = tiergym()
    if command not in _ESTIMATOR_IDS:
        sources = sources_id(binary_path())
        _ESTIMATOR_IDS[command] = ([f"sources {sources}"] if sources else []) + [binary_id()]
    return _ESTIMATOR_IDS[command]


def score_uncached(d, machine, options, calibrate, key):
    profile, runs = os.path.join(d, "profile"), os.path.join(d, "runs", "runs.csv")
    if calibrate:
        out = calibration_path(d, key)
        text = run([tiergym(), "calibrate", "--profile", profile, "--runs", runs, "--machine",
                    machine, "--out", out, "--json", "--quiet"] + options)
        doc = json.loads(text)
        return [(r["name"], kind_of(r["name"]), r["cv_error_pct"], r.get("cv_inside"))
                for r in doc["runs"]]
    text = run([tiergym(), "validate", "--profile", profile, "--runs", runs, "--machine", machine,
                "--json"] + options)
    doc = json.loads(text)
    return [(r["name"], kind_of(r["name"]), r["error_pct"], r.get("inside"), r["measured_ns"],
             r["estimated_ns"], r["models"]["paper"]["estimated_ns"], r.get("access_share"),
             r.get("serialization", 0.0))
            for r in doc["runs"]]


def calibration_path(d, key):
    """Where the calibration of profile directory d scored under `key` is written."""
    return os.path.join(d, f"calibration-{key}.json")


def fitted_parameters(d, options):
    """(compute_overlap, tier_overlap, queue_strength, fit tolerance, limit smoothness) of the
    calibration score() wrote for d and `options`, or None (queue_strength 0 in files without
    a queueing fit, the tolerance 0 in files before version 8, the smoothness 0 before
    version 7)."""
    paths = [calibration_path(d, key) for key in score_keys(options, True)]
    try:
        with open(next((p for p in paths if os.path.exists(p)), paths[0])) as f:
            doc = json.load(f)
    except OSError:
        return None
    recorded = doc.get("options", {})
    tolerance = float(recorded.get("fit-tolerance", 0))
    smoothness = float(recorded.get("limit-smoothness", 0))
    return (doc["compute_overlap"], doc["tier_overlap"], doc.get("queue_strength", 0.0), tolerance,
            smoothness)


# The calibrated parameters' bounds (estimator/calibration.h): the compute overlap's 0 and 1
# are physical; the tier overlap's 1 is physical (concurrent tiers), 0.4 the grid's least;
# the queue strength's 0 is physical (a flat latency), 2 the grid's largest.
BOUNDS = {"compute_overlap": (0.0, 1.0), "tier_overlap": (0.4, 1.0), "queue_strength": (0.0, 2.0)}


def fit_text(seed, app, fit):
    """'seed:app o/f/q', each parameter at a bound of its grid starred, then the concurrency
    fit's tolerance where it is not 0 ('~0.01') and the limit smoothness where it is not 0
    ('^4')."""
    o, f, q, t, p = fit
    return (f"{seed}:{app} {o:g}{'*' if o in BOUNDS['compute_overlap'] else ''}/{f:g}"
            f"{'*' if f == BOUNDS['tier_overlap'][0] else ''}/{q:.1f}"
            f"{'*' if q == BOUNDS['queue_strength'][1] else ''}{f'~{t:g}' if t > 0 else ''}"
            f"{f'^{p:g}' if p > 0 else ''}")


def report_bounds(fits, members):
    """Per member: every profile's fitted (compute overlap, tier overlap, queue strength, fit
    tolerance, limit smoothness), and which sit at a bound of their grid (fits: {(member,
    seed, app): (o, f, q, t, p)})."""
    print("calibrated parameters per member (compute overlap / tier overlap / queue strength "
          "per seed:app, ~ the concurrency fit's tolerance and ^ the limit smoothness where "
          "not 0; * at a bound: compute "
          "overlap 0 or 1, tier overlap 0.4, queue strength 2; tier overlap 1 and queue "
          "strength 0 are physical bounds)")
    print("| member | fitted | compute overlap at 0 or 1 | tier overlap at 0.4 | at 1 | "
          "queue strength > 0 | at 2 | fit tolerance > 0 | limit smoothness > 0 |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for member in members:
        mine = sorted((k, v) for k, v in fits.items() if k[0] == member and v is not None)
        text = ", ".join(fit_text(seed, app, fit) for (_, seed, app), fit in mine)
        count = len(mine)
        at_o = sum(v[0] in BOUNDS["compute_overlap"] for _, v in mine)
        at_low = sum(abs(v[1] - BOUNDS["tier_overlap"][0]) < 1e-9 for _, v in mine)
        at_one = sum(abs(v[1] - 1) < 1e-9 for _, v in mine)
        queues = sum(v[2] > 0 for _, v in mine)
        at_top = sum(abs(v[2] - BOUNDS["queue_strength"][1]) < 1e-9 for _, v in mine)
        tolerant = sum(v[3] > 0 for _, v in mine)
        smooth = sum(v[4] > 0 for _, v in mine)
        print(f"| {member} | {text} | {at_o} of {count} | {at_low} of {count} | "
              f"{at_one} of {count} | {queues} of {count} | {at_top} of {count} | "
              f"{tolerant} of {count} | {smooth} of {count} |")
    print()


def tree_digest(path):
    """SHA-256 of the files under `path` (their relative names and bytes), or of the file."""
    h = hashlib.sha256()
    files = [path] if os.path.isfile(path) else sorted(
        os.path.join(root, name) for root, _, names in os.walk(path) for name in names)
    for name in files:
        h.update(os.path.relpath(name, path).encode() + b"\0")
        with open(name, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def measured_runs(d):
    """{run name: (measured runtime ns, digest of its placement file)} of a profile's runs."""
    runs = {}
    with open(os.path.join(d, "runs", "runs.csv")) as f:
        for row in csv.DictReader(f):
            placement = os.path.join(d, "runs", row["placement"])
            runs[row["name"]] = (float(row["runtime_ns"]), tree_digest(placement))
    return runs


def least_worst_errors(dirs):
    """The error no estimate can go below on members it cannot tell apart.

    dirs: {(member, machine, seed, app): profile directory}. Members whose profiles of one
    (machine, seed, app) are the same byte for byte give any estimator that reads the
    profile, the machine and the placement the same input, so one estimate E per run; with
    the members' measured times t, the least worst error max |E - t| / t over them is
    (t_max - t_min) / (t_max + t_min), at E = 2 t_min t_max / (t_min + t_max). Returns
    [(members, machine, seed, app, run, kind, least worst error %)] for every group of two
    members or more and every run they all measured with the same placement."""
    groups = {}
    for (member, machine, seed, app), d in dirs.items():
        key = (machine, seed, app, tree_digest(os.path.join(d, "profile")))
        groups.setdefault(key, []).append((member, measured_runs(d)))
    out = []
    for (machine, seed, app, _), group in sorted(groups.items()):
        if len(group) < 2:
            continue
        members = tuple(m for m, _ in group)
        first = group[0][1]
        for run_name in sorted(first):
            same = [runs.get(run_name) for _, runs in group]
            if any(r is None or r[1] != first[run_name][1] for r in same):
                continue
            lo, hi = min(r[0] for r in same), max(r[0] for r in same)
            out.append((members, machine, seed, app, run_name, kind_of(run_name),
                        100 * (hi - lo) / (hi + lo)))
    return out


def report_least_worst(rows, kinds):
    """Prints least_worst_errors' rows: per group of members, the largest least worst error
    per kind (no estimate errs less on the worse member), the runs above the max target, and
    the worst runs."""
    print("members the profiles cannot tell apart (the same profile byte for byte): the "
          "largest error no estimate from the profile can go below on the worse of them, %")
    print("| members | runs | " + " | ".join(kinds) + f" | runs above {TARGETS['max']:g} % | "
          "worst runs |")
    print("| --- | ---: |" + " ---: |" * (len(kinds) + 1) + " --- |")
    for members in sorted({r[0] for r in rows}):
        mine = [r for r in rows if r[0] == members]
        cells = []
        for k in kinds:
            errors = [r[6] for r in mine if k == "all" or r[5] == k]
            cells.append(f"{max(errors):.2f}" if errors else "-")
        above = sum(r[6] > TARGETS["max"] for r in mine)
        worst = sorted(mine, key=lambda r: -r[6])[:3]
        text = ", ".join(f"{r[1]} s{r[2]} {r[3]} `{r[4]}` {r[6]:.2f}" for r in worst)
        print(f"| {', '.join(members)} | {len(mine)} | " + " | ".join(cells)
              + f" | {above} | {text} |")
    if not rows:
        print("| (none: every member's profiles differ) | 0 |" + " - |" * (len(kinds) + 1)
              + " |")
    print()


def summarize(rows):
    errors = [r[2] for r in rows]
    inside = [r[3] for r in rows if r[3] is not None]
    return {
        "runs": len(rows),
        "mean": sum(errors) / len(errors) if errors else 0.0,
        "max": max(errors) if errors else 0.0,
        "coverage": sum(inside) / len(inside) if inside else None,
    }


def cell(s):
    if s["runs"] == 0:
        return "-"
    text = f"{s['mean']:.2f} / {s['max']:.2f}"
    if s["coverage"] is not None:
        text += f" ({100 * s['coverage']:.0f} %)"
    return text


def table(all_rows, members, kinds, title):
    print(title)
    print("| member | " + " | ".join(kinds) + " |")
    print("| --- |" + " ---: |" * len(kinds))
    per_member = {}
    for member in members:
        rows = [r for r in all_rows if r[0] == member]
        stats = {k: summarize([r[4:] for r in rows if k == "all" or r[5] == k]) for k in kinds}
        per_member[member] = stats
        print(f"| {member} | " + " | ".join(cell(stats[k]) for k in kinds) + " |")
    overall = {k: summarize([r[4:] for r in all_rows if k == "all" or r[5] == k]) for k in kinds}
    print("| **all** | " + " | ".join(cell(overall[k]) for k in kinds) + " |")
    print()
    return per_member, overall


# Issue 30's targets for every member: mean and max error, %, uncalibrated and after the
# cross-validated calibration.
TARGETS = {"mean": 1.5, "max": 4.0}
CALIBRATED_TARGETS = {"mean": 1.0, "max": 3.0}


def badness(stats, targets=TARGETS):
    """How far a member's figures are from the targets: above 1 misses."""
    return max(stats["all"][k] / target for k, target in targets.items())


def targets_met(stats, targets=TARGETS):
    """How many of the targets a member's figures meet."""
    return sum(stats["all"][k] <= target for k, target in targets.items())


# The leave-one-out's two rules for choosing a configuration on the other members:
# "worst ratio", the least worst badness (how far the worst member misses); "targets", the
# most targets met over them, ties to the least worst badness (where no configuration brings
# the worst members within the targets, the first rule ranks by how far they miss, the second
# by what the configurations still meet).
CHOICE_RULES = ("worst ratio", "targets")


def choose(per_member, others, rule, targets=TARGETS):
    """The configuration of per_member ({name: {member: stats}}) chosen on the members
    `others` by `rule` (CHOICE_RULES) against `targets`; ties to the first in per_member's
    order."""
    def worst(c):
        return max(badness(per_member[c][m], targets) for m in others)
    if rule == "worst ratio":
        return min(per_member, key=worst)
    return min(per_member, key=lambda c: (
        -sum(targets_met(per_member[c][m], targets) for m in others), worst(c)))


Z90 = 1.6448536269514722  # the standard normal's 95th percentile: a two-sided 90 % interval


def prior_terms(rows):
    """(relative residual measured / estimate - 1, relative correction |estimate - paper| /
    estimate, mixing 1 - the largest device's access share, serialization) of scored runs
    (rows as score() returns them, validate only; rows without access shares have mixing 0,
    rows without a serialization 0)."""
    terms = []
    for r in rows:
        shares = r[7] if len(r) > 7 and r[7] else [1.0]
        serial = r[8] if len(r) > 8 and r[8] is not None else 0.0
        terms.append((r[4] / r[5] - 1, abs(r[5] - r[6]) / r[5], 1 - max(shares), serial))
    return terms


def fit_prior(terms, with_mixing=True):
    """(noise, model_error, mix_error) of prediction_interval.h: of the grid (noise 0.1-3 % by
    0.05 %, model_error 0-1 by 0.01, mix_error 0-0.3 by 0.005, or 0 without mixing), the
    triple whose 90 % interval holds at least 90 % of the runs with the least mean width
    (sd = sqrt(noise^2 + (model_error * delta)^2 + (mix_error * mixing)^2)); if none does,
    the one that holds the most. A normal
    likelihood would let the few large errors of some members widen every interval."""
    import numpy as np
    residual = np.abs(np.array([t[0] for t in terms]))
    delta = np.array([t[1] for t in terms])
    mixing = np.array([t[2] for t in terms])
    noises = 0.0005 * np.arange(2, 61)
    best = None
    for mix in (0.005 * np.arange(0, 61) if with_mixing else [0.0]):
        for me in 0.01 * np.arange(0, 101):
            rest = (me * delta) ** 2 + (mix * mixing) ** 2
            sd = np.sqrt(noises[:, None] ** 2 + rest[None, :])
            coverage = (residual[None, :] <= Z90 * sd).mean(axis=1)
            width = sd.mean(axis=1)
            # (meets 90 %, then least width; without any that does, the most coverage)
            held = np.minimum(coverage, 0.9)
            i = int(np.lexsort((width, -held))[0])
            candidate = (-held[i], width[i], float(noises[i]), float(me), float(mix))
            if best is None or candidate[:2] < best[:2]:
                best = candidate
    return best[2], best[3], best[4]


def fit_prior_shape(terms, with_mixing=True):
    """(noise, model_error, mix_error) whose widths follow the errors: the shape (model_error
    / noise, mix_error / noise; grids 0-100 and 0-30) of the most likely Laplace scale
    sd_i = s sqrt(1 + (a delta_i)^2 + (b mixing_i)^2) of the residuals (the scale s in
    closed form, the mean of |r_i| / g_i; a Laplace, not a normal, so that a few large errors
    do not decide the shape), then one factor so that the 90 % interval holds 90 % of the
    runs (noise = the 90th percentile of |r_i| / g_i over z)."""
    import numpy as np
    residual = np.abs(np.array([t[0] for t in terms]))
    delta = np.array([t[1] for t in terms])
    mixing = np.array([t[2] for t in terms])
    best = None
    for b in (0.25 * np.arange(0, 121) if with_mixing else [0.0]):
        for a in 0.5 * np.arange(0, 201):
            g = np.sqrt(1 + (a * delta) ** 2 + (b * mixing) ** 2)
            scale = max(float(np.mean(residual / g)), 1e-12)
            nll = len(g) * np.log(scale) + float(np.sum(np.log(g)))
            if best is None or nll < best[0] - 1e-12:
                best = (nll, float(a), float(b), g)
    _, a, b, g = best
    noise = float(np.quantile(residual / g, 0.9, method="higher")) / Z90
    return noise, a * noise, b * noise


def prior_coverage(terms, noise, model_error, mix_error=0.0, overlap_error=0.0, z=Z90):
    inside = [abs(r) <= z * (noise * noise + (model_error * delta) ** 2
                             + (mix_error * mixing) ** 2 + (overlap_error * serial) ** 2) ** 0.5
              for r, delta, mixing, serial in terms]
    return sum(inside) / len(inside) if inside else 0.0


def fit_prior_per_member(terms_by_member, floor=None):
    """(noise, model_error, mix_error = 0, overlap_error) of prediction_interval.h, how
    IntervalPrior's defaults are fitted: the "per member" rule of choose_prior (the coverage
    nearest 90 % on every member, then the narrowest) over candidate_grid's grid with the
    terms delta and serialization on the defaults' scales (DEFAULT_PRIOR_SCALES), the noise
    at least `floor` (the run-to-run noise RUN_NOISE by default).
    terms_by_member: {member: prior_terms(its rows)}."""
    import numpy as np
    floor = RUN_NOISE if floor is None else floor
    groups = [np.array(t, dtype=float).reshape(-1, 4) for t in terms_by_member.values()]
    terms = np.concatenate(groups)
    member_of = np.concatenate([np.full(len(g), i) for i, g in enumerate(groups)])
    features = {"residual": np.abs(terms[:, 0]), "delta": terms[:, 1],
                "serialization": terms[:, 3]}
    combos, inside, sd_sums, _ = candidate_grid(features, ["delta", "serialization"], member_of,
                                                range(len(groups)), DEFAULT_PRIOR_SCALES)
    counts = np.array([len(g) for g in groups])
    i = choose_prior(inside, sd_sums, counts, list(range(len(groups))), "per member",
                     combos[:, 0] >= floor - 1e-12)
    noise, model_error, overlap_error = combos[i]
    return float(noise), float(model_error), 0.0, float(overlap_error)


# The ways the prior can be fitted: (name, fit(terms) -> (noise, model_error, mix_error)).
PRIOR_FITS = [
    ("narrowest, without mixing: how IntervalPrior's defaults were fitted before the "
     "serialization term",
     lambda t: fit_prior(t, False)),
    ("likeliest shape, with mixing", lambda t: fit_prior_shape(t, True)),
    ("likeliest shape, without mixing", lambda t: fit_prior_shape(t, False)),
]


def report_held_out(all_rows, members, form, fit_without, third):
    """The leave-one-out table of one way of fitting the prior: per member the prior
    fitted without it (fit_without(member) -> (noise, model_error, mix_error[,
    overlap_error])) and its 90 % interval's coverage on the member, per placement kind;
    then the share of all held-out runs inside. third: (column name, index in the fit,
    format) of the fit's third column."""
    name, index, spec = third
    print(f"leave one member out ({form}): the prior fitted on the other members, its 90 % "
          "interval's coverage on the member left out")
    print(f"| held out | noise | model_error | {name} | fractions | ranges | mixes | all |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    held_inside = held_runs = 0
    for member in members:
        held_fit = fit_without(member)
        cells = []
        for kind in ["fractions", "ranges", "mixes", "all"]:
            held = [r[4:] for r in all_rows if r[0] == member and kind in ("all", r[5])]
            cells.append(f"{100 * prior_coverage(prior_terms(held), *held_fit):.0f} %"
                         if held else "-")
        print(f"| {member} | {held_fit[0]:.4f} | {held_fit[1]:.3f} | "
              f"{held_fit[index]:{spec}} | " + " | ".join(cells) + " |")
        held = prior_terms([r[4:] for r in all_rows if r[0] == member])
        held_inside += prior_coverage(held, *held_fit) * len(held)
        held_runs += len(held)
    print(f"\nheld-out runs inside the 90 % interval of a prior fitted without their member "
          f"({form}): {100 * held_inside / max(1, held_runs):.1f} % of {held_runs}")
    print()


def report_prior_per_member(all_rows, members):
    """fit_prior_per_member (how IntervalPrior's defaults are fitted) on all members, and on
    all but one, scoring the 90 % interval's coverage on the member left out, per kind."""
    def by_member(keep):
        return {m: prior_terms([r[4:] for r in all_rows if r[0] == m]) for m in members
                if keep(m)}
    fit = fit_prior_per_member(by_member(lambda m: True))
    terms = prior_terms([r[4:] for r in all_rows])
    form = "per member, with serialization"
    print(f"interval prior ({form}, noise >= {100 * RUN_NOISE:g} %: how IntervalPrior's "
          f"defaults are fitted), fitted on {', '.join(members)} ({len(terms)} runs): noise "
          f"{fit[0]:.4f}, model_error {fit[1]:.3f}, overlap_error {fit[3]:.3f}; coverage of "
          f"its 90 % interval there {100 * prior_coverage(terms, *fit):.1f} %")
    report_held_out(all_rows, members, form,
                    lambda member: fit_prior_per_member(by_member(lambda m: m != member)),
                    ("overlap_error", 3, ".3f"))


def report_prior(all_rows, members):
    """Fits the interval prior on all members, and on all but one, scoring the 90 % interval's
    coverage (without the sampling interval, a few hundredths of a percent) on the member left
    out, per placement kind: as the defaults are fitted (report_prior_per_member), then for
    every fit of PRIOR_FITS."""
    report_prior_per_member(all_rows, members)
    terms = prior_terms([r[4:] for r in all_rows])
    for form, fit_of in PRIOR_FITS:
        fit = fit_of(terms)
        print(f"interval prior ({form}), fitted on {', '.join(members)} ({len(terms)} runs): "
              f"noise {fit[0]:.4f}, model_error {fit[1]:.3f}, mix_error {fit[2]:.4f}; "
              f"coverage of its 90 % interval there {100 * prior_coverage(terms, *fit):.1f} %")
        report_held_out(
            all_rows, members, form,
            lambda member, fit_of=fit_of: fit_of(
                prior_terms([r[4:] for r in all_rows if r[0] != member])),
            ("mix_error", 2, ".4f"))


# Candidate prior shapes (estimator/README.md, "Intervals that hold their level": what a term
# on the placement can do): the terms beside the noise, each a function of the rows, and the
# grid each term's scale is searched over. delta and mixing as in prior_terms; three tiers: 1
# when the placement puts more than 1 % of the accesses on three devices or more; remote:
# the share of the third device (disagg's remote pool).
CANDIDATE_TERMS = {
    "delta": ["delta"],
    "delta, mixing": ["delta", "mixing"],
    "delta, three tiers": ["delta", "three tiers"],
    "delta, remote share": ["delta", "remote"],
    "delta, serialization": ["delta", "serialization"],
}
# The run-to-run noise the family's measured runs are drawn with (traces/SYNTH.md, `noise`):
# a prior whose noise is below it narrows the interval of a placement the model does not
# correct below what the runs themselves vary.
RUN_NOISE = 0.005
# The scales candidate_grid searches, each (step, count) from 0: model_error's, then every
# further term's. The candidates' (CANDIDATE_SCALES: model_error 0-0.6, a term 0-0.3, by
# 0.01) are finer and shorter than the defaults' (IntervalPrior, fit_prior_per_member:
# model_error 0-0.4 by 0.01, overlap_error 0-0.8 by 0.02).
CANDIDATE_SCALES = ((0.01, 61), (0.01, 31))
DEFAULT_PRIOR_SCALES = ((0.01, 41), (0.02, 41))


def placement_features(rows):
    """{delta, mixing, three tiers, remote, serialization, residual} of scored runs (validate
    rows), arrays."""
    import numpy as np
    terms = prior_terms(rows)
    shares = [r[7] if len(r) > 7 and r[7] else [1.0] for r in rows]
    return {"residual": np.abs(np.array([t[0] for t in terms])),
            "delta": np.array([t[1] for t in terms]),
            "mixing": np.array([t[2] for t in terms]),
            "three tiers": np.array([float(sum(x > 0.01 for x in s) >= 3) for s in shares]),
            "remote": np.array([s[2] if len(s) > 2 else 0.0 for s in shares]),
            "serialization": np.array([t[3] for t in terms])}


def candidate_grid(features, names, member_of, members, scales=CANDIDATE_SCALES):
    """Every (noise, scale of each term) of the grid (noise 0.1-2 % by 0.05 %; scales:
    model_error's and each further term's (step, count), by default CANDIDATE_SCALES), with
    per member the share of its runs inside the 90 % interval, the sum of its sd and
    (small) whether runs with delta < 1 % lie inside: (combos, inside per member, sd sums
    per member, small inside)."""
    import itertools
    import numpy as np
    (me_step, me_count), (term_step, term_count) = scales
    noises, model_errors = 0.0005 * np.arange(2, 41), me_step * np.arange(0, me_count)
    extra = [term_step * np.arange(0, term_count)] * (len(names) - 1)
    small = features["delta"] < 0.01
    combos, inside, sd_sums, small_in = [], [], [], []
    for rest in itertools.product(*extra):
        base = sum((scale * features[n]) ** 2 for scale, n in zip(rest, names[1:]))
        for me in model_errors:
            sd = np.sqrt(noises[:, None] ** 2 + ((me * features["delta"]) ** 2 + base)[None, :])
            held = features["residual"][None, :] <= Z90 * sd
            combos += [(float(n), float(me)) + tuple(float(x) for x in rest) for n in noises]
            inside.append(np.stack([held[:, member_of == m].mean(axis=1)
                                    for m in range(len(members))], 1))
            sd_sums.append(np.stack([sd[:, member_of == m].sum(axis=1)
                                     for m in range(len(members))], 1))
            small_in.append(np.stack([held[:, (member_of == m) & small].sum(axis=1)
                                      for m in range(len(members))], 1))
    return (np.array(combos), np.concatenate(inside), np.concatenate(sd_sums),
            np.concatenate(small_in))


def choose_prior(inside, sd_sums, counts, train, rule, allowed):
    """Index of the grid point a rule picks on the members `train` (indices): "narrowest"
    (the narrowest whose interval holds 90 % of their runs, as IntervalPrior's defaults) or
    "per member" (the least largest distance of a member's coverage from 90 %, then the
    narrowest); only points where `allowed`."""
    import numpy as np
    pooled = (inside[:, train] * counts[train]).sum(axis=1) / counts[train].sum()
    width = sd_sums[:, train].sum(axis=1) / counts[train].sum()
    if rule == "narrowest":
        first = -np.minimum(pooled, 0.9)
    else:
        first = np.abs(inside[:, train] - 0.9).max(axis=1)
    first = np.where(allowed, first, np.inf)
    return int(np.lexsort((width, first))[0])


def candidate_row(grid, counts, small_counts, rule, floor):
    """The cells of one candidate: coverage on each member left out (the prior chosen by
    `rule` on the others, among noises >= floor), how many hold 85-95 %, the held-out runs
    inside, the held-out runs with delta < 1 % inside, and the prior chosen on all."""
    import numpy as np
    combos, inside, sd_sums, small_in = grid
    n = len(counts)
    allowed = combos[:, 0] >= floor - 1e-12
    held = [choose_prior(inside, sd_sums, counts, [m for m in range(n) if m != h], rule, allowed)
            for h in range(n)]
    cover = np.array([inside[i, h] for h, i in enumerate(held)])
    small = sum(small_in[i, h] for h, i in enumerate(held)) / max(1, small_counts.sum())
    fit = combos[choose_prior(inside, sd_sums, counts, list(range(n)), rule, allowed)]
    return ([f"{100 * max(floor, combos[:, 0].min()):.1f} %"]
            + [f"{100 * c:.0f}" for c in cover]
            + [str(int(((cover >= 0.85) & (cover <= 0.95)).sum())),
               f"{100 * (cover * counts).sum() / counts.sum():.1f} %", f"{100 * small:.0f} %",
               ", ".join(f"{x:.3g}" for x in fit)])


def report_prior_candidates(all_rows, members):
    """For every candidate shape, rule and noise floor: the 90 % interval's coverage on each
    member left out (the prior fitted on the others), how many members hold 85-95 %, and the
    share of held-out runs with delta < 1 % inside."""
    import numpy as np
    features = placement_features([r[4:] for r in all_rows])
    member_of = np.array([members.index(r[0]) for r in all_rows])
    counts = np.array([(member_of == m).sum() for m in range(len(members))])
    small_counts = np.array([((member_of == m) & (features["delta"] < 0.01)).sum()
                             for m in range(len(members))])
    print("candidate priors, each fitted leaving one member out (% of the member's runs inside "
          "the 90 % interval; delta < 1 %: held-out runs the model barely corrects, inside)")
    print("| terms | rule | noise at least | " + " | ".join(members)
          + " | members in 85-95 % | held-out runs | delta < 1 % | fitted on all (noise, "
          "model_error, other term) |")
    print("| --- | --- | ---: |" + " ---: |" * (len(members) + 3) + " --- |")
    for label, names in CANDIDATE_TERMS.items():
        grid = candidate_grid(features, names, member_of, members)
        for rule in ("narrowest", "per member"):
            for floor in (0.0, RUN_NOISE):
                cells = candidate_row(grid, counts, small_counts, rule, floor)
                print(f"| {label} | {rule} | " + " | ".join(cells) + " |")
    print()


def main():
    argv = sys.argv[1:]
    options = []
    if "--" in argv:
        i = argv.index("--")
        argv, options = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", default=",".join(ALL_MEMBERS))
    ap.add_argument("--machines", default="knl,disagg")
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--apps", default=",".join(ALL_APPS))
    ap.add_argument("--pairs", help="seed:app pairs instead of every seed with every app, "
                    "e.g. 1:minife,1:lulesh,2:nekbone")
    ap.add_argument("--cache", default="data/family")
    ap.add_argument("--json", help="also write every run's error here")
    ap.add_argument("--calibrate", action="store_true",
                    help="score the cross-validated calibration (tiergym calibrate --json)")
    ap.add_argument("--configs", help="JSON file {name: [validate options]}: score each, then "
                    "choose among them leaving one member out at a time")
    ap.add_argument("--fit-prior", action="store_true",
                    help="fit the interval prior (noise, model_error, overlap_error) on the members' runs and "
                    "score it leaving one member out")
    ap.add_argument("--prior-candidates", action="store_true",
                    help="with --fit-prior: also score candidate prior shapes (terms on the "
                    "placement, a rule per member, a noise floor) leaving one member out")
    ap.add_argument("--bound", action="store_true",
                    help="print, for members whose profiles are the same byte for byte, the "
                    "least worst error any estimate from the profile can reach on them "
                    "(from the measured runs alone), and score nothing")
    args = ap.parse_args(argv)
    if args.prior_candidates and not (args.fit_prior and not args.calibrate):
        ap.error("--prior-candidates scores priors on validated runs: give it with --fit-prior, "
                 "without --calibrate")
    scoring = [flag for flag, given in (("--calibrate", args.calibrate),
                                        ("--configs", args.configs),
                                        ("--fit-prior", args.fit_prior),
                                        ("--json", args.json),
                                        ("options after --", options)) if given]
    if args.bound and scoring:
        ap.error(f"--bound scores nothing (it reads the measured runs alone): {scoring[0]} "
                 "has no effect with it; give them apart")
    members = args.members.split(",")
    machines = args.machines.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    apps = args.apps.split(",")
    pairs = [(s, a) for s in seeds for a in apps]
    if args.pairs:
        pairs = [(int(p.split(":")[0]), p.split(":")[1]) for p in args.pairs.split(",")]
    configs = {"given": options}
    if args.configs:
        with open(args.configs) as f:
            configs = {name: opts + options for name, opts in json.load(f).items()}

    kinds = ["fractions", "ranges", "mixes", "all"]
    if args.bound:
        dirs = {(m, machine, seed, app): ensure_profile(args.cache, m, machine, seed, app)
                for m in members for machine in machines for seed, app in pairs}
        report_least_worst(least_worst_errors(dirs), kinds)
        return
    results = {}
    started = time.time()
    total = len(members) * len(machines) * len(pairs) * len(configs)
    done = 0
    for name, opts in configs.items():
        all_rows = []  # (member, machine, seed, app, run, kind, error, inside, ...)
        fits = {}
        for member in members:
            for machine in machines:
                for seed, app in pairs:
                    d = ensure_profile(args.cache, member, machine, seed, app)
                    for r in score(d, machine, opts, args.calibrate):
                        all_rows.append((member, machine, seed, app) + tuple(r))
                    if args.calibrate:
                        fits[(member, seed, app)] = fitted_parameters(d, opts)
                    done += 1
                    print(f"[{done}/{total}, {time.time() - started:.0f} s] {name} {member} "
                          f"{machine} s{seed} {app}", file=sys.stderr)
        title = (f"{name}: mean / max error % (coverage of the 90 % interval); options: "
                 f"{' '.join(opts) or '(defaults)'}{' --calibrate' if args.calibrate else ''}")
        per_member, overall = table(all_rows, members, kinds, title)
        results[name] = {"options": opts, "rows": all_rows, "per_member": per_member,
                         "overall": overall}
        if args.fit_prior and not args.calibrate:
            report_prior(all_rows, members)
            if args.prior_candidates:
                report_prior_candidates(all_rows, members)
        if args.calibrate:
            report_bounds(fits, members)

    if len(configs) > 1:
        # Leave one member out: the configuration chosen on the other members by each rule,
        # scored on the member left out.
        per_member = {c: results[c]["per_member"] for c in configs}
        targets = CALIBRATED_TARGETS if args.calibrate else TARGETS
        for rule in CHOICE_RULES:
            print(f"leave one member out, by {rule} (targets: mean {targets['mean']:g} %, max "
                  f"{targets['max']:g} %): the configuration chosen on the other members, "
                  "scored on the member left out")
            print("| held out | chosen | " + " | ".join(kinds) + " |")
            print("| --- | --- |" + " ---: |" * len(kinds))
            for member in members:
                chosen = choose(per_member, [m for m in members if m != member], rule, targets)
                stats = results[chosen]["per_member"][member]
                print(f"| {member} | {chosen} | " + " | ".join(cell(stats[k]) for k in kinds)
                      + " |")
            print()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"calibrate": args.calibrate, "configs": results}, f)


if __name__ == "__main__":
    main()
