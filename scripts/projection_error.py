#!/usr/bin/env python3
"""Measures the error of `tiergym trace project` where the truth is known.

For each synthetic application, bundled machine and seed: `tiergym trace synth` writes the
generated per-tier profile and the measured runs; the run on the machine's first tier is
projected onto the machine (`tiergym trace project`); `tiergym validate --machine M` then
estimates every measured run from both profiles. Two figures per application and machine:

- projection error: |estimate from the projected profile - estimate from the generated
  one| / the generated one, per run, in % (its mean and maximum);
- the estimator's error against the measured runtimes with each profile (mean, %), and
  their difference in percentage points (projected minus generated).

The overall means close the table (traces/PROJECTION.md states them).

  scripts/projection_error.py [--apps minife,lulesh,procedural:7,...]
                              [--machines knl,disagg,xeonmax]
                              [--seeds 2,3,4] [--samples 50000] [--tiergym build/bin/tiergym]
                              [--work DIR] [--jobs 2] [--json OUT.json]
                              [-- PROJECT OPTIONS...]

With --work DIR the generated profiles and their estimates are kept there and reused by
the next run with the same DIR (only the projection and its estimates are redone): the
way to compare projection options quickly. Delete DIR when the generator changes.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"projection_error: {' '.join(map(str, cmd))} failed:\n"
                           f"{r.stdout}{r.stderr}")
    return r.stdout


def estimates(t, profile, runs, machine):
    out = json.loads(run([t, "validate", "--profile", profile, "--runs", runs, "--machine",
                          machine, "--json"]))
    return {r["name"]: (r["estimated_ns"], r["measured_ns"]) for r in out["runs"]}


def one_case(t, work, app, machine, first_tier, seed, samples, extra, tag):
    """The per-run figures of one application, machine and seed."""
    d = os.path.join(work, f"{app.replace(':', '-')}-{machine}-{seed}-s{samples}")
    cached = os.path.join(d, "generated_estimates.json")
    if not os.path.exists(cached):
        shutil.rmtree(d, ignore_errors=True)
        run([t, "trace", "synth", "--app", app, "--machine", machine, "--seed", seed,
             "--samples", samples, "--out", d, "--quiet"])
    # The profile's folder is the model's name (procedural:SEED writes procedural-v1-SEED).
    name = next(e for e in sorted(os.listdir(d)) if os.path.isdir(os.path.join(d, e)))
    gen = os.path.join(d, name, "profile")
    runs = os.path.join(d, name, "runs", "runs.csv")
    if not os.path.exists(cached):
        with open(cached + ".tmp", "w") as f:
            json.dump(estimates(t, gen, runs, machine), f)
        os.rename(cached + ".tmp", cached)
    with open(cached) as f:
        gen_est = json.load(f)
    proj = os.path.join(d, name, f"projected-{tag}")
    shutil.rmtree(proj, ignore_errors=True)
    run([t, "trace", "project", "--machine", machine, *extra,
         os.path.join(gen, first_tier + ".csv"), proj])
    proj_est = estimates(t, proj, runs, machine)
    shutil.rmtree(proj, ignore_errors=True)
    rows = []
    for name, (g, measured) in gen_est.items():
        p = proj_est[name][0]
        rows.append({"run": name, "projection_pct": abs(p - g) / g * 100,
                     "generated_error_pct": abs(g - measured) / measured * 100,
                     "projected_error_pct": abs(p - measured) / measured * 100})
    return rows


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--apps", default="minife,lulesh,nekbone,lammps,phasedrift")
    ap.add_argument("--machines", default="knl,disagg,xeonmax")
    ap.add_argument("--seeds", default="2,3,4")
    ap.add_argument("--samples", default="50000", help="samples per generated trace")
    ap.add_argument("--tiergym", default=os.path.join(root, "build", "bin", "tiergym"))
    ap.add_argument("--work", default=None,
                    help="keep the generated profiles here and reuse them (default: a temp dir)")
    ap.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2)")
    ap.add_argument("--json", default=None, help="also write every run's figures here")
    a = ap.parse_args(argv)
    if not os.access(a.tiergym, os.X_OK):
        sys.exit(f"projection_error: {a.tiergym} is not built (./scripts/build.sh)")
    work = a.work or tempfile.mkdtemp(prefix="tiergym-projection.")
    os.makedirs(work, exist_ok=True)
    t = a.tiergym
    tag = str(os.getpid())
    cases = []
    for machine in a.machines.split(","):
        info = json.loads(run([t, "trace", "synth", "--print-model", machine]))
        first_tier = info["tiers"][0]["name"]
        for app in a.apps.split(","):
            for seed in a.seeds.split(","):
                cases.append((app, machine, first_tier, seed))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        futures = {c: pool.submit(one_case, t, work, c[0], c[1], c[2], c[3], a.samples, extra,
                                  tag) for c in cases}
        results = {c: f.result() for c, f in futures.items()}
    print(f"{'app':<11} {'machine':<8} {'runs':>5} {'proj mean %':>11} {'proj max %':>10} "
          f"{'est err gen %':>13} {'est err proj %':>14} {'diff pp':>7}")
    everything = []
    for machine in a.machines.split(","):
        for app in a.apps.split(","):
            rows = [r for c, rs in results.items() if c[0] == app and c[1] == machine
                    for r in rs]
            everything += [dict(r, app=app, machine=machine) for r in rows]
            p = [r["projection_pct"] for r in rows]
            eg = statistics.mean(r["generated_error_pct"] for r in rows)
            ep = statistics.mean(r["projected_error_pct"] for r in rows)
            print(f"{app:<11} {machine:<8} {len(rows):>5} {statistics.mean(p):>11.2f} "
                  f"{max(p):>10.2f} {eg:>13.2f} {ep:>14.2f} {ep - eg:>+7.2f}", flush=True)
    p = [r["projection_pct"] for r in everything]
    eg = statistics.mean(r["generated_error_pct"] for r in everything)
    ep = statistics.mean(r["projected_error_pct"] for r in everything)
    print(f"overall: {len(p)} runs, projection error mean {statistics.mean(p):.2f} % "
          f"(max {max(p):.2f} %); estimator error {eg:.2f} % (generated) vs {ep:.2f} % "
          f"(projected): {ep - eg:+.2f} pp")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(everything, f, indent=1)


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as e:
        sys.exit(str(e))
