#!/usr/bin/env python3
"""Evaluates placement policies on the tiergym environment: every policy (agents_examples/
policies.py) on every served application, fixed seeds; prints a table (estimated runtime,
speedup over the default tier, bytes migrated, capacity refusals) and saves a plot. With
--real-runs DIR it also exports the policies' placements for `tiergym-prof run-placed` and
compares the environment's estimates with the runtimes measured in DIR's runs.csv.

    python agents_examples/evaluate.py                       # bundled apps, all policies
    python agents_examples/evaluate.py --policies oracle,hemem --steps 50
    python agents_examples/evaluate.py --profiles data/hotset/profile --machine small.json
    python agents_examples/evaluate.py --real-runs data/synth/lulesh --policies oracle,memtis
    python agents_examples/evaluate.py --split procedural-test-v1:8 --tier-capacity-mib hbm:512

--real-runs DIR: DIR holds runs.csv (or runs/runs.csv, as `tiergym trace synth` writes it)
with the measured runs of one application, whose profile is DIR/profile or is named by
--real-runs-profile (a served profile name or a profile directory). For each policy, one
episode is run on that profile and the placement in force for the longest (estimated) time
is written as a range placement, RUNS/placements/policy-NAME.json (RUNS: the directory of
runs.csv), for `tiergym-prof run-placed --placement` (which applies one static placement,
or a schedule changing at phasemarks). With --steps 0 (one decision per phase) the whole
schedule is written too, policy-NAME.schedule.json, for `run-placed --schedule`: step i
of the episode is phase i of the run, exact when no phase is empty. Then every run of
runs.csv is estimated (a static placement with the environment's estimator, a run of
NAME's schedule, named policy-NAME.phase0+policy-NAME.schedule by run-placed, with NAME's
episode) and compared with its measured runtime: error
per run, mean and max. The same runs.csv strictness as `tiergym validate` applies.

Exit status: 0 success, 1 a runtime failure (server, profile, malformed runs.csv or
placement), 2 a usage error (unknown policy, missing directory, bad option).
"""

import argparse
import json
import math
import os
import pathlib
import re
import sys
import time

import numpy as np

import tiergym
import policies as policy_lib

GIB = float(1 << 30)


class UsageError(Exception):
    """A bad command line: exit status 2."""


class InputError(Exception):
    """Input that cannot be used (malformed runs.csv, ...): exit status 1."""


# --- Measured runs -----------------------------------------------------------------------


def read_measured_runs(path):
    """[(name, placement path, runtime_ns, line)] of a measured-runs CSV
    (traces/TRACE_CSV.md section 3), as strictly as traces/measured_runs.h reads it:
    InputError "FILE:LINE: RULE: detail" for every rule it names."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text ({e})") from None
    if text and not text.endswith("\n"):
        raise InputError(f"{path}:{text.count(chr(10)) + 1}: truncated-last-line: the file does "
                         "not end with a newline (it was cut short)")
    lines = text.split("\n")[:-1] if text else []
    header = None
    runs = []
    seen = {}
    for number, raw in enumerate(lines, start=1):
        line = raw[:-1] if raw.endswith("\r") else raw
        if not line.strip():
            continue
        fields = line.split(",")
        if header is None:
            header = {}
            for i, name in enumerate(fields):
                name = name.strip()
                if name in header:
                    raise InputError(f"{path}:{number}: duplicate-column: column '{name}' "
                                     "appears twice")
                header[name] = i
            missing = [c for c in ("name", "placement", "runtime_ns") if c not in header]
            if missing:
                raise InputError(f"{path}:{number}: missing-column: the column line lacks "
                                 f"{', '.join(missing)} (need name,placement,runtime_ns)")
            columns = len(fields)
            continue
        if len(fields) != columns:
            raise InputError(f"{path}:{number}: field-count: {len(fields)} fields, the column "
                             f"line has {columns}")
        name = fields[header["name"]].strip()
        placement = fields[header["placement"]].strip()
        runtime = fields[header["runtime_ns"]].strip()
        if not name:
            raise InputError(f"{path}:{number}: empty-name: the run has no name")
        if name in seen:
            raise InputError(f"{path}:{number}: duplicate-name: run '{name}' already on line "
                             f"{seen[name]}")
        if not placement:
            raise InputError(f"{path}:{number}: empty-placement: run '{name}' names no "
                             "placement file")
        if not runtime.isdigit() or int(runtime) >= 1 << 64:
            raise InputError(f"{path}:{number}: non-numeric: runtime_ns '{runtime}' is not a "
                             "decimal integer below 2^64")
        if int(runtime) == 0:
            raise InputError(f"{path}:{number}: zero-runtime: run '{name}' has runtime_ns 0")
        resolved = os.path.join(os.path.dirname(os.path.abspath(path)), placement)
        if not os.path.isfile(resolved):
            raise InputError(f"{path}:{number}: missing-placement: {resolved} does not exist "
                             "or is not a regular file")
        seen[name] = number
        runs.append((name, resolved, int(runtime), number))
    if header is None:
        raise InputError(f"{path}: empty: no column line (expected name,placement,runtime_ns)")
    return runs


# --- Placements out of an episode ----------------------------------------------------------


def placement_of(action, ranges, tiers):
    """A range placement (traces/TRACE_CSV.md section 2) as a dict: regions off the default
    tier as ranges (bounds as 0x hex strings), neighbours on the same tier merged."""
    out = []
    for r in np.argsort([s for s, _ in ranges], kind="stable"):
        start, end = ranges[r]
        tier = int(action[r])
        if tier == 0 or end <= start:
            continue
        if out and out[-1]["tier"] == tiers[tier] and out[-1]["end"] == start:
            out[-1]["end"] = end
            continue
        out.append({"start": start, "end": end, "tier": tiers[tier]})
    return {"default": tiers[0],
            "ranges": [{"start": hex(x["start"]), "end": hex(x["end"]), "tier": x["tier"]}
                       for x in out]}


def placement_json(action, ranges, tiers):
    """placement_of(...) as JSON text (a file's contents)."""
    return json.dumps(placement_of(action, ranges, tiers), indent=1) + "\n"


def most_used(schedule):
    """The placement in force for the longest estimated time, and that share of the run."""
    totals = {}
    for action, interval_ns in schedule:
        key = tuple(int(a) for a in action)
        totals[key] = totals.get(key, 0.0) + interval_ns
    best = max(totals, key=lambda k: totals[k])
    whole = sum(totals.values())
    return np.asarray(best, dtype=np.int64), (totals[best] / whole if whole > 0 else 1.0)


def write_atomically(path, text):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def export_policy(result, env, out_dir, steps_per_phase):
    """Writes policy-NAME.json (and with steps_per_phase the schedule); returns the paths."""
    ranges = policy_lib.region_address_ranges(env, result["profile"])
    tiers = env.tiers
    stem = f"policy-{result['policy']}"
    action, share = most_used(result["schedule"])
    static = os.path.join(out_dir, f"{stem}.json")
    write_atomically(static, placement_json(action, ranges, tiers))
    written = {"placement": static, "share": share}
    if steps_per_phase:
        for old in pathlib.Path(out_dir).glob(f"{stem}.phase*.json"):
            old.unlink()  # an earlier export's schedule: its phases may differ
        steps = []
        previous = None
        for phase, (a, _) in enumerate(result["schedule"]):
            if previous is not None and np.array_equal(a, previous):
                continue
            name = f"{stem}.phase{phase}.json"
            write_atomically(os.path.join(out_dir, name), placement_json(a, ranges, tiers))
            if phase == 0:
                written["first"] = os.path.join(out_dir, name)
            else:
                steps.append({"from_phase": phase, "placement": name})
            previous = a
        if steps:
            schedule = os.path.join(out_dir, f"{stem}.schedule.json")
            body = ",\n  ".join(json.dumps(step) for step in steps)
            write_atomically(schedule, f'{{"steps": [\n  {body}\n]}}\n')
            written["schedule"] = schedule
    return written


# --- Running -------------------------------------------------------------------------------


def progress(args, text):
    if not args.quiet:
        print(text, file=sys.stderr, flush=True)


def evaluate(env, names, profiles, args):
    results = []
    total = len(names) * len(profiles)
    done = 0
    for profile in profiles:
        for name in names:
            done += 1
            policy = policy_lib.make_policy(name, seed=args.seed)
            started = time.monotonic()
            r = policy_lib.run_episode(env, policy, seed=args.seed, profile=profile)
            r["policy"] = name.partition("@")[0]  # a trained agent by its module's name
            progress(args, f"[{done}/{total}] {profile:<10} {name:<10} time saved "
                           f"{r['speedup']:+.4f}  ({time.monotonic() - started:.1f} s)")
            results.append(r)
    return results


def format_table(results, header):
    w = max([12] + [len(r["profile"]) for r in results])  # procedural names are longer
    lines = [header, "",
             f"{'application':<{w}} {'policy':<10} {'runtime s':>10} {'default s':>10} "
             f"{'time saved':>11} {'speedup':>8} {'migrated GiB':>13} {'refused':>8}"]
    for r in results:
        lines.append(
            f"{r['profile']:<{w}} {r['policy']:<10} {r['runtime_ns'] / 1e9:>10.3f} "
            f"{r['default_runtime_ns'] / 1e9:>10.3f} {r['speedup']:>+11.4f} "
            f"{r['default_runtime_ns'] / r['runtime_ns']:>7.3f}x "
            f"{r['migrated_bytes'] / GIB:>13.2f} {r['refused']:>8d}")
    apps = sorted({r["profile"] for r in results})
    if len(apps) > 1:
        lines += ["", f"over the {len(apps)} applications: mean time saved, geometric-mean speedup",
                  f"{'policy':<10} {'time saved':>11} {'speedup':>8}"]
        for name in dict.fromkeys(r["policy"] for r in results):
            mine = [r for r in results if r["policy"] == name]
            saved = sum(r["speedup"] for r in mine) / len(mine)
            geo = math.exp(sum(math.log(r["default_runtime_ns"] / r["runtime_ns"]) for r in mine)
                           / len(mine))
            lines.append(f"{name:<10} {saved:>+11.4f} {geo:>7.3f}x")
    return "\n".join(lines)


def pyplot_or_none():
    """matplotlib.pyplot drawing into files, or None (saying how to install it)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib is not installed (pip install matplotlib, or "
              "./scripts/setup.sh examples); no plot", file=sys.stderr)
        return None
    return plt


def save_plot(results, path, title):
    """Grouped bars: speedup over the default tier per application and policy."""
    plt = pyplot_or_none()
    if plt is None:
        return False
    apps = list(dict.fromkeys(r["profile"] for r in results))
    names = list(dict.fromkeys(r["policy"] for r in results))
    width = 0.8 / max(1, len(names))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.4 * len(apps) + 3), 4.2))
    for j, name in enumerate(names):
        values = []
        for app in apps:
            r = next((x for x in results if x["profile"] == app and x["policy"] == name), None)
            values.append(r["default_runtime_ns"] / r["runtime_ns"] if r else float("nan"))
        ax.bar([i + (j - (len(names) - 1) / 2) * width for i in range(len(apps))], values,
               width, label=name)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(apps)))
    ax.set_xticklabels(apps)
    ax.set_ylabel("speedup over the default tier (estimated)")
    ax.set_title(title, fontsize="medium")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0), title="policy")
    fig.tight_layout()
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def find_real_runs(args):
    """(runs.csv path or None, its runs or None, placements output dir, profile) of
    --real-runs DIR, read before anything runs so that a bad file fails at once."""
    directory = args.real_runs
    runs_csv = next((p for p in (os.path.join(directory, "runs.csv"),
                                 os.path.join(directory, "runs", "runs.csv")) if os.path.isfile(p)),
                    None)
    runs = read_measured_runs(runs_csv) if runs_csv else None
    out_dir = os.path.join(os.path.dirname(runs_csv) if runs_csv else directory, "placements")
    profile = args.real_runs_profile
    if profile is None:
        profile = os.path.join(directory, "profile")
        if not os.path.isdir(profile):
            raise UsageError(f"--real-runs {directory}: no {profile} directory; name the "
                             "application's profile with --real-runs-profile NAME|DIR")
    if os.path.isdir(profile):
        profile = os.path.abspath(profile)
    return runs_csv, runs, out_dir, profile


def schedule_run_policy(name):
    """The policy whose exported schedule a run named as `tiergym-prof run-placed` names it
    (placement stem + "+" + schedule stem, "-k" appended when taken:
    "policy-hemem.phase0+policy-hemem.schedule-2") was measured with, or None."""
    head = re.sub(r"-\d+$", "", name).split("+", 1)[0]
    head = re.sub(r"\.phase0$", "", head)
    return head[len("policy-"):] if head.startswith("policy-") else None


def real_runs(args, names, address, config, found):
    """The --real-runs part: export, then compare with runs.csv."""
    directory = args.real_runs
    runs_csv, runs, out_dir, profile = found
    cfg = dict(config, profiles=[profile])
    print()
    with tiergym.make(address=address, **cfg) as env:
        app = env.profiles[0]
        os.makedirs(out_dir, exist_ok=True)
        exported = {}
        episodes = {}
        for name in names:
            policy = policy_lib.make_policy(name, seed=args.seed)
            r = policy_lib.run_episode(env, policy, seed=args.seed, profile=app)
            r["policy"] = name.partition("@")[0]  # a trained agent by its module's name
            episodes[name] = r
            exported[name] = export_policy(r, env, out_dir, args.steps == 0)
            progress(args, f"exported {name}: {exported[name]['placement']}")
        print(f"Placements for real runs of {app}, written to {os.path.relpath(out_dir)}:")
        print(f"{'policy':<10} {'episode s':>10} {'static s':>10} {'in force':>8}  file")
        for name in names:
            e = exported[name]
            with open(e["placement"], encoding="utf-8") as f:
                static = env.estimate(app, f.read())["runtime_ns"]
            print(f"{name:<10} {episodes[name]['runtime_ns'] / 1e9:>10.3f} "
                  f"{static / 1e9:>10.3f} {100 * e['share']:>7.0f}%  "
                  f"{os.path.basename(e['placement'])}"
                  + (f" (+ {os.path.basename(e['schedule'])})" if "schedule" in e else ""))
        print("episode s: the policy's episode (migrations charged); static s: the exported "
              "placement from the start;\nin force: the exported placement's share of the "
              "episode's time.")
        machine = config.get("machine", "knl")
        runs_path = os.path.relpath(runs_csv or os.path.join(directory, "runs.csv"))
        first = exported[names[0]]
        print(f"Measure one: tiergym-prof run-placed --machine {machine} --placement "
              f"{os.path.relpath(first['placement'])} --runs {runs_path} -- COMMAND")
        if "schedule" in first:
            print(f"or its schedule: tiergym-prof run-placed --machine {machine} --placement "
                  f"{os.path.relpath(first['first'])} --schedule "
                  f"{os.path.relpath(first['schedule'])} --runs {runs_path} -- COMMAND")
        if runs is None:
            print(f"\nno runs.csv in {directory} (nor {directory}/runs): nothing measured to "
                  "compare with yet")
            return {"runs_csv": None, "runs": [], "exported": exported,
                    "episodes": {n: e["runtime_ns"] for n, e in episodes.items()},
                    "mean_error_pct": None, "max_error_pct": None}
        print()
        print(f"Estimates against the measured runs of {os.path.relpath(runs_csv)} "
              f"({config.get('model', 'paper')} model):")
        print(f"{'run':<28} {'measured s':>11} {'estimated s':>11} {'error %':>8}")
        rows = []
        skipped = []
        for name, placement_path, measured, line in runs:
            if "+" in name:  # run-placed names a schedule run PLACEMENT+SCHEDULE[-k]
                policy = schedule_run_policy(name)
                if policy not in episodes:
                    skipped.append(name)
                    continue
                estimated = episodes[policy]["runtime_ns"]
            else:
                with open(placement_path, encoding="utf-8") as f:
                    text = f.read()
                try:
                    estimated = env.estimate(app, text)["runtime_ns"]
                except tiergym.ServerError as e:
                    raise InputError(f"{runs_csv}:{line}: run {name} ({placement_path}): "
                                     f"{e.message}") from None
            error = 100.0 * abs(estimated - measured) / measured
            rows.append({"name": name, "measured_ns": measured, "estimated_ns": estimated,
                         "error_pct": error})
            print(f"{name:<28} {measured / 1e9:>11.3f} {estimated / 1e9:>11.3f} {error:>8.2f}")
        if skipped:
            print(f"not estimated (schedules of no policy evaluated here): {', '.join(skipped)}")
        if rows:
            errors = [r["error_pct"] for r in rows]
            print(f"{len(rows)} runs: mean error {sum(errors) / len(errors):.2f} %, max error "
                  f"{max(errors):.2f} %")
        return {"runs_csv": runs_csv, "runs": rows, "exported": exported,
                "episodes": {n: e["runtime_ns"] for n, e in episodes.items()},
                "mean_error_pct": (sum(r["error_pct"] for r in rows) / len(rows)) if rows else None,
                "max_error_pct": max((r["error_pct"] for r in rows), default=None)}


def parse_args(argv):
    doc = __doc__.split("\n\n")
    parser = argparse.ArgumentParser(
        prog="evaluate.py", description=doc[0].strip(),
        epilog="\n\n".join(part.rstrip() for part in doc[1:]).strip("\n"),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policies", default=",".join(policy_lib.POLICIES),
                        help="comma-separated policies (default: all: %(default)s); "
                             "MODULE:FACTORY loads another one")
    parser.add_argument("--profiles", help="comma-separated profile directories to serve "
                        "(default: the bundled applications minife, lulesh, nekbone, lammps)")
    parser.add_argument("--split", metavar="NAME[:N]",
                        help="evaluate on a split of tiergym.datasets (e.g. procedural-test-v1, "
                             "bundled-v1, machine-xeonmax-v2; NAME:N its first N applications): "
                             "its applications and its machine, instead of --profiles and "
                             "--machine (real-v1 is projected onto --machine when it is given)")
    parser.add_argument("--machine",
                        help="machine: knl, disagg, xeonmax, ddr5cxl or a machine JSON file "
                             "(default knl)")
    parser.add_argument("--tier-capacity-mib", metavar="TIER:MIB[,...]",
                        help="shrink tiers of the machine, e.g. hbm:512: every bundled "
                             "application fits knl's 16 GiB of HBM, so only a smaller fast "
                             "tier makes the policies differ (default: the machine's)")
    parser.add_argument("--steps", type=int, default=100,
                        help="decision intervals per episode; 0 = one per phase (default 100)")
    parser.add_argument("--num-regions", type=int, default=64, help="regions (default 64)")
    parser.add_argument("--seed", type=int, default=0, help="episode and policy seed (default 0)")
    parser.add_argument("--model", default="paper", choices=("paper", "concurrent"),
                        help="estimator model of the environment (default paper)")
    parser.add_argument("--address", help="a running tiergym server (default: a private one)")
    parser.add_argument("--plot", default="evaluation.png",
                        help="plot file (default evaluation.png in the current directory)")
    parser.add_argument("--no-plot", action="store_true", help="do not draw the plot")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--real-runs", metavar="DIR", help="export placements for "
                        "tiergym-prof run-placed and compare estimates with DIR's runs.csv")
    parser.add_argument("--real-runs-profile", metavar="NAME|DIR",
                        help="profile of the real runs (default DIR/profile)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    args.machine_given = args.machine is not None
    args.machine = args.machine or "knl"
    names = [n.strip() for n in args.policies.split(",") if n.strip()]
    if not names:
        raise UsageError("--policies: no policy named")
    for n in names:
        try:
            policy_lib.make_policy(n)
        except ValueError as e:
            raise UsageError(f"--policies: {e}") from None
    if args.steps < 0:
        raise UsageError("--steps must be >= 0")
    if args.num_regions < 1:
        raise UsageError("--num-regions must be >= 1")
    if args.profiles:
        missing = [p for p in args.profiles.split(",") if p and not os.path.isdir(p)]
        if missing:
            raise UsageError(f"--profiles: not a directory: {', '.join(missing)}")
    if args.split:
        if args.profiles:
            raise UsageError("--split and --profiles: give one")
        try:
            found = tiergym.datasets.parse_entry(args.split)
        except ValueError as e:
            raise UsageError(f"--split: {e}") from None
        if found is None:
            raise UsageError(f"--split: no split {args.split!r} (known: "
                             f"{', '.join(tiergym.datasets.names())})")
        if not found[0].available:
            raise UsageError(f"--split: {found[0].name}: {found[0].unavailable_reason}")
        args.split_found = found
    if args.real_runs is not None and not os.path.isdir(args.real_runs):
        raise UsageError(f"--real-runs: {args.real_runs} is not a directory")
    return args, names


def main(argv=None):
    try:
        args, names = parse_args(sys.argv[1:] if argv is None else argv)
    except UsageError as e:
        print(f"evaluate.py: error: {e}", file=sys.stderr)
        return 2
    # The relative observation: its first four features per region are the raw ones every
    # policy reads; Colloid- and ARMS-like need the rest.
    config = {"num_regions": args.num_regions, "steps": args.steps, "machine": args.machine,
              "model": args.model, "observation": "relative"}
    if args.tier_capacity_mib:
        config["tier_capacity_mib"] = args.tier_capacity_mib
    server = None
    try:
        found = find_real_runs(args) if args.real_runs else None
        dirs = [os.path.abspath(p) for p in (args.profiles or "").split(",") if p]
        if args.split:
            split, n = args.split_found
            progress(args, f"preparing {split.name} (first use: generated into the cache)...")
            # A real program's recording projects onto any machine; other splits are
            # generated for their own.
            onto = args.machine if split.kind == "real" and args.machine_given else split.machine
            served = split.profiles(n, progress=lambda line: progress(args, line), machine=onto)
            args.machine = config["machine"] = onto
            if split.served_by_name:
                config["profiles"] = served
            else:
                dirs = served
        if args.address:
            address = args.address
        else:
            machine = (os.path.abspath(args.machine) if os.path.isfile(args.machine)
                       else args.machine)
            server_args = ["--machine", machine]  # the machine the profiles were recorded on
            if dirs:
                server_args += ["--profiles", ",".join(dirs)]
            progress(args, "starting a private tiergym server...")
            server = tiergym.Server(args=server_args)
            address = server
        if dirs and args.address:
            config["profiles"] = dirs
        with tiergym.make(address=address, **config) as env:
            capacities = ", ".join(
                f"{t} {int(c) >> 20} MiB"
                for t, c in zip(env.tiers, env.tier_spec["tier_capacity_bytes"]))
            machine = os.path.basename(args.machine) + (
                f" with {args.tier_capacity_mib.replace(':', ' ')} MiB" if args.tier_capacity_mib
                else "")
            header = (f"Evaluation: machine {machine} ({capacities}), "
                      f"{env.num_regions} regions, {args.steps or 'one per phase'} steps, seed "
                      f"{args.seed}, {args.model} model; runtimes estimated by the environment")
            results = evaluate(env, names, env.profiles, args)
        print(format_table(results, header))
        title = (f"estimated speedup over {env.tiers[0]}: machine {machine}, "
                 f"{env.num_regions} regions,\n{args.steps or 'one per phase'} steps, seed {args.seed}, "
                 f"{args.model} model")
        if not args.no_plot and save_plot(results, args.plot, title):
            print(f"\nplot: {args.plot}")
        real = real_runs(args, names, address, config, found) if found else None
        if args.json:
            doc = {"config": config, "seed": args.seed,
                   "results": [{k: v for k, v in r.items() if k != "schedule"} for r in results],
                   "real_runs": real}
            write_atomically(args.json, json.dumps(doc, indent=1, default=str) + "\n")
        return 0
    except UsageError as e:
        print(f"evaluate.py: error: {e}", file=sys.stderr)
        return 2
    except (InputError, tiergym.TierGymError) as e:
        print(f"evaluate.py: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        if server is not None:
            server.close()


if __name__ == "__main__":
    sys.exit(main())
