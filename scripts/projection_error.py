#!/usr/bin/env python3
"""Measures the error of `tiergym trace project` where the truth is known.

For each synthetic application, bundled machine and seed: `tiergym trace synth` writes the
generated per-tier profile and the measured runs; the run on the machine's first tier is
projected onto the machine (`tiergym trace project`); `tiergym validate --machine M` then
estimates every measured run from both profiles. The error of a run is
|estimate from the projected profile - estimate from the generated one| / generated, in %;
the table gives its mean and maximum per application and machine, and the overall mean
(traces/PROJECTION.md states it).

  scripts/projection_error.py [--apps minife,lulesh,...] [--machines knl,disagg,xeonmax]
                              [--seeds 1,2,3] [--samples 200000] [--tiergym build/bin/tiergym]
                              [--work DIR]
                              [-- PROJECT OPTIONS...]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"projection_error: {' '.join(cmd)} failed:\n{r.stdout}{r.stderr}")
    return r.stdout


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
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--samples", default="200000", help="samples per generated trace")
    ap.add_argument("--tiergym", default=os.path.join(root, "build", "bin", "tiergym"))
    ap.add_argument("--work", default=None, help="keep the profiles here (default: a temp dir)")
    a = ap.parse_args(argv)
    work = a.work or tempfile.mkdtemp(prefix="tiergym-projection.")
    t = a.tiergym
    all_errors = []
    print(f"{'app':<11} {'machine':<8} {'runs':>5} {'mean %':>7} {'max %':>7}")
    for machine in a.machines.split(","):
        info = json.loads(run([t, "trace", "synth", "--print-model", machine]))
        first_tier = info["tiers"][0]["name"]
        for app in a.apps.split(","):
            errors = []
            for seed in a.seeds.split(","):
                d = os.path.join(work, f"{app}-{machine}-{seed}")
                run([t, "trace", "synth", "--app", app, "--machine", machine, "--seed", seed,
                     "--samples", a.samples, "--out", d, "--quiet"])
                gen = os.path.join(d, app, "profile")
                proj = os.path.join(d, app, "projected")
                run([t, "trace", "project", "--machine", machine, *extra,
                     os.path.join(gen, first_tier + ".csv"), proj])
                runs = os.path.join(d, app, "runs", "runs.csv")
                est = {}
                for name, prof in (("gen", gen), ("proj", proj)):
                    out = json.loads(run([t, "validate", "--profile", prof, "--runs", runs,
                                          "--machine", machine, "--json"]))
                    est[name] = {r["name"]: r["estimated_ns"] for r in out["runs"]}
                for run_name, g in est["gen"].items():
                    errors.append(abs(est["proj"][run_name] - g) / g * 100)
            all_errors += errors
            print(f"{app:<11} {machine:<8} {len(errors):>5} {statistics.mean(errors):>7.2f} "
                  f"{max(errors):>7.2f}", flush=True)
    print(f"overall: {len(all_errors)} runs, mean {statistics.mean(all_errors):.2f} %, "
          f"max {max(all_errors):.2f} %")


if __name__ == "__main__":
    main()
