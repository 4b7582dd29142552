#!/usr/bin/env python3
"""Reference policies on co-scheduled tenants (tiergym.cosched): per-tenant and node-level
results on the bundled scenarios.

    python agents_examples/cosched_evaluate.py                      # every bundled scenario
    python agents_examples/cosched_evaluate.py --scenarios knl-2 --steps 30 --json out.json
    python agents_examples/cosched_evaluate.py --plot agents_examples/cosched-policies.png

Policies (placement action mode; each decides every tenant's regions every step from what
a deployed agent sees: its observation, and the step's infos):
  default       everything stays on the default tier
  blind         contention-blind greedy, HeMem-like, each tenant as if alone: its hottest
                regions (decayed access share per byte) on the fast tier up to the whole
                fast tier's capacity; the node refuses what does not fit (first come)
  aware         contention-aware: the fast tier goes first to whole tenants, those whose
                traffic per byte (weighted by their measured slowdown on the default tier)
                is highest, so that they leave the shared default tier and stop slowing
                the others; the capacity left takes the hottest remaining regions, ranked
                across tenants by the time they cost per byte
  oracle        the best static partition of the fast tier between the tenants (each
                tenant greedy within its share), chosen by running every partition of a grid
                (steps of 1/10 for two tenants, 1/4 for more) on the same seed: an oracle,
                it has seen the episodes

Results: per tenant its speedup over its solo all-on-default run (default time / elapsed
time, migration included) and its worst step's QoS (solo default interval / contended
interval + migration); per node the geometric-mean speedup, the node time (sum over steps
of the longest tenant's step) against the default policy's, and the worst QoS.

Exit status: 0 success, 1 a failure of the environment, 2 a usage error.
"""

import argparse
import itertools
import json
import math
import sys

import numpy as np

from tiergym import cosched
from evaluate import pyplot_or_none

FAST = 1  # the fast tier (hbm) is machine tier 1 on the bundled machines


class Episode:
    """One episode of a node under a policy: the policy gets (node, last result) and
    returns one action per tenant."""

    def __init__(self, node, seed):
        self.node = node
        self.seed = seed

    def run(self, policy):
        node = self.node
        r = node.reset(self.seed)
        k = len(node.tenants)
        worst_qos = [math.inf] * k
        while not r["done"]:
            r = node.step(policy(node, r))
            for i, t in enumerate(r["tenants"]):
                if t["active"]:
                    charged = t["info"]["interval_ns"] + t["info"]["migration_ns"]
                    worst_qos[i] = min(worst_qos[i], t["info"]["default_interval_ns"] / charged)
        speedups = [t["info"]["default_elapsed_ns"] / t["info"]["elapsed_ns"]
                    for t in r["tenants"]]
        return {"speedup": speedups, "worst_qos": worst_qos, "node_ns": r["elapsed_ns"],
                "geomean": float(np.exp(np.mean(np.log(speedups))))}


def region_heat(node, r, i):
    """Tenant i's regions: (decayed access share per byte, bytes)."""
    spec = node.spec
    f = spec["obs_region_features"]
    obs = r["tenants"][i]["obs"]
    n = spec["num_regions"]
    share = np.array([obs[j * f + 2] for j in range(n)])
    size = np.asarray(spec["tenant_region_bytes"][i], dtype=np.float64)
    density = np.where(size > 0, share / np.maximum(size, 1), 0.0)
    return density, size


def greedy_within(density, size, budget):
    """Hottest regions first on the fast tier while they fit `budget` bytes."""
    tiers = np.zeros(len(size), np.int64)
    used = 0.0
    for j in np.argsort(-density, kind="stable"):
        if density[j] <= 0:
            break
        if used + size[j] <= budget:
            tiers[j] = FAST
            used += size[j]
    return tiers


def fast_capacity(node):
    return float(node.spec["tier_capacity_bytes"][FAST])


def default_policy(node, r):
    return [np.zeros(node.spec["num_regions"], np.int64) for _ in node.tenants]


def blind_policy(node, r):
    cap = fast_capacity(node)
    return [greedy_within(*region_heat(node, r, i), cap) for i in range(len(node.tenants))]


def partition_policy(fractions):
    def policy(node, r):
        cap = fast_capacity(node)
        return [greedy_within(*region_heat(node, r, i), f * cap)
                for i, f in enumerate(fractions)]
    return policy


def aware_policy(node, r):
    """Whole tenants off the shared default tier first: a tenant partly on it still puts
    bandwidth there and still slows its co-runners, so the fast tier goes to the tenants
    whose default-tier traffic per byte of footprint is highest (the contention they cause
    and suffer), whole; what capacity is left takes the hottest remaining regions, ranked
    across tenants by the time they cost per byte (share x default interval x measured
    slowdown on the default tier / bytes)."""
    cap = fast_capacity(node)
    n = node.spec["num_regions"]
    actions = [np.zeros(n, np.int64) for _ in node.tenants]
    live = [i for i, t in enumerate(r["tenants"]) if not (t["waiting"] or t["terminated"])]
    heat = {i: region_heat(node, r, i) for i in live}
    # Traffic per byte: the tenant's accesses (all tiers) over its footprint, weighted by
    # its default interval (time) and the slowdown it measured on the default tier.
    def pressure(i):
        density, size = heat[i]
        t = r["tenants"][i]["info"]
        return (float(np.sum(density * size)) * t["default_interval_ns"] *
                float(t["slowdown"][0]) / max(float(np.sum(size)), 1.0))
    used = 0.0
    whole = set()
    for i in sorted(live, key=pressure, reverse=True):
        footprint = float(np.sum(heat[i][1]))
        if pressure(i) > 0 and used + footprint <= cap:
            actions[i][:] = FAST
            used += footprint
            whole.add(i)
    candidates = []
    for i in live:
        if i in whole:
            continue
        density, size = heat[i]
        t = r["tenants"][i]["info"]
        weight = t["default_interval_ns"] * float(t["slowdown"][0])
        candidates += [(density[j] * weight, i, j, size[j]) for j in range(n) if density[j] > 0]
    for _, i, j, size in sorted(candidates, key=lambda c: -c[0]):
        if used + size <= cap:
            actions[i][j] = FAST
            used += size
    return actions


def partitions(k):
    step = 10 if k == 2 else 4
    for parts in itertools.product(range(step + 1), repeat=k):
        if sum(parts) == step:
            yield [p / step for p in parts]


def evaluate(scenario, steps, seed, regions):
    node = cosched.Node(scenario, steps=steps, num_regions=regions)
    episode = Episode(node, seed)
    results = {"default": episode.run(default_policy), "blind": episode.run(blind_policy),
               "aware": episode.run(aware_policy)}
    best = None
    for fractions in partitions(len(node.tenants)):
        out = episode.run(partition_policy(fractions))
        if best is None or out["geomean"] > best[1]["geomean"]:
            best = (fractions, out)
    results["oracle"] = dict(best[1], partition=best[0])
    return node.tenants, results


POLICY_COLOURS = {"default": "#9e9e9e", "blind": "#e6862e", "aware": "#2e7bd6",
                  "oracle": "#3a9a4a"}


def save_plot(everything, path):
    """Grouped bars: the geometric-mean speedup of every policy on every scenario, each
    tenant's speedup as a dot on its policy's bar. False when matplotlib is missing."""
    plt = pyplot_or_none()
    if plt is None:
        return False
    scenarios = list(everything)
    policies = list(POLICY_COLOURS)
    width = 0.8 / len(policies)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.9 * len(scenarios) + 2), 4.2))
    markers = "osD^v<>p"
    for p_i, policy in enumerate(policies):
        xs, heights = [], []
        for s_i, scenario in enumerate(scenarios):
            out = everything[scenario]["results"].get(policy)
            if out is None:
                continue
            x = s_i + (p_i - (len(policies) - 1) / 2) * width
            xs.append(x)
            heights.append(out["geomean"])
            for t_i, speedup in enumerate(out["speedup"]):
                ax.plot(x, speedup, markers[t_i % len(markers)], color="black", markersize=3.5,
                        alpha=0.75)
        ax.bar(xs, heights, width * 0.92, color=POLICY_COLOURS[policy], zorder=0)
    # One legend entry per tenant application (the four-tenant scenarios' order).
    names = max((everything[s]["tenants"] for s in scenarios), key=len)
    handles = [plt.Line2D([], [], linestyle="", marker=markers[i % len(markers)],
                          color="black", markersize=4, label=n) for i, n in enumerate(names)]
    bars = [plt.Rectangle((0, 0), 1, 1, color=POLICY_COLOURS[p]) for p in policies]
    ax.legend(bars + handles, policies + [f"tenant: {n}" for n in names], fontsize=7,
              ncol=2, loc="upper right")
    ax.axhline(1.0, color="black", linewidth=0.6, linestyle=":")
    ax.set_xticks(range(len(scenarios)))
    ax.set_xticklabels(scenarios)
    ax.set_ylabel("speedup over solo all-on-DDR (bar: geomean; dots: tenants)")
    ax.set_title("Co-scheduled tenants: reference policies per bundled scenario")
    top = max(max(out["speedup"]) for e in everything.values() for out in e["results"].values())
    ax.set_ylim(0, max(1.6, 1.3 * top))  # room for the legend above the dots
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenarios", default=",".join(cosched.SCENARIOS),
                   help="comma-separated bundled scenarios (default: all)")
    p.add_argument("--steps", type=int, default=50, help="decision intervals per tenant")
    p.add_argument("--regions", type=int, default=16, help="regions per tenant")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--plot", help="also draw the policy table into this PNG (matplotlib)")
    args = p.parse_args(argv)
    names = [s for s in args.scenarios.split(",") if s]
    unknown = [s for s in names if s not in cosched.SCENARIOS]
    if unknown:
        p.error(f"unknown scenarios {unknown} (bundled: {', '.join(cosched.SCENARIOS)})")
    everything = {}
    for scenario in names:
        try:
            tenants, results = evaluate(scenario, args.steps, args.seed, args.regions)
        except (ValueError, RuntimeError) as e:
            print(f"cosched_evaluate: {scenario}: {e}", file=sys.stderr)
            return 1
        base_ns = results["default"]["node_ns"]
        print(f"\n{scenario}: tenants {', '.join(tenants)}")
        print(f"{'policy':<8} {'geomean':>8} {'node time':>10} {'worst QoS':>10}  "
              "per-tenant speedup")
        for name, out in results.items():
            per = " ".join(f"{t}={s:.3f}" for t, s in zip(tenants, out["speedup"]))
            extra = f"  partition {out['partition']}" if "partition" in out else ""
            print(f"{name:<8} {out['geomean']:8.3f} {out['node_ns'] / base_ns:10.3f} "
                  f"{min(out['worst_qos']):10.3f}  {per}{extra}")
        everything[scenario] = {"tenants": tenants, "results": results}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(everything, f, indent=1, default=float)
    if args.plot and save_plot(everything, args.plot):
        print(f"\nplot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
