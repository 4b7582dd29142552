#!/usr/bin/env python3
"""Plot a family of sensitivity curves with its smoothed fits, like the contention paper's Figure 4.

Input is the JSON that `tiergym contention validate --plot FILE.png` feeds this script on
its standard input (or a file holding it):

  {"app": "lulesh",
   "curves": [{"read_pct": 50,
               "points": [[interference_gbps, normalized_perf], ...],
               "fits": {"linear/all": [[x, y], ...], "poly2/all": [...],
                        "interpolation/all": [...], "interpolation/sampled": [...], ...}},
              ...]}

One panel per smoothing (linear, poly2, interpolation over all points, and the sampled
interpolation that Memgen uses): every curve's measured points as dots and its fit as a
line, coloured by the interferer's read share.

usage: /usr/bin/python3 scripts/plot_contention.py DATA.json|- --out FILE.png
Needs Debian's python3-matplotlib. Exit status 1, with a message, on bad input.
"""
import argparse
import json
import sys

PANELS = [
    ("linear/all", "linear least squares, all points"),
    ("poly2/all", "polynomial (degree 2), all points"),
    ("interpolation/all", "interpolation, all points"),
    ("interpolation/sampled", "interpolation, sampled points (Memgen at 75 %)"),
]


def load(source):
    """Returns the parsed data, checked to have the keys the plot needs."""
    text = sys.stdin.read() if source == "-" else open(source, encoding="utf-8").read()
    name = "<stdin>" if source == "-" else source
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{name}:{e.lineno}:{e.colno}: not JSON: {e.msg}")
    if not isinstance(data, dict) or not isinstance(data.get("curves"), list):
        raise ValueError(f"{name}: expected an object with a 'curves' list")
    if not data["curves"]:
        raise ValueError(f"{name}: the family has no curves")
    for i, c in enumerate(data["curves"]):
        for key in ("read_pct", "points", "fits"):
            if key not in c:
                raise ValueError(f"{name}: curves[{i}] has no '{key}'")
        for p in c["points"]:
            if not (isinstance(p, list) and len(p) == 2):
                raise ValueError(f"{name}: curves[{i}].points: expected [x, y] pairs")
    return data


def plot(data, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import cm, colors

    shares = [c["read_pct"] for c in data["curves"]]
    norm = colors.Normalize(vmin=min(shares), vmax=max(shares) if max(shares) > min(shares)
                            else min(shares) + 1)
    cmap = plt.get_cmap("viridis")
    fig, axes = plt.subplots(2, 2, figsize=(12, 9), sharex=True, sharey=True)
    for ax, (key, title) in zip(axes.flat, PANELS):
        for c in data["curves"]:
            colour = cmap(norm(c["read_pct"]))
            xs = [p[0] for p in c["points"]]
            ys = [p[1] for p in c["points"]]
            ax.scatter(xs, ys, s=7, color=colour, alpha=0.45, linewidths=0)
            fit = c["fits"].get(key)
            if fit:
                ax.plot([p[0] for p in fit], [p[1] for p in fit], color=colour, linewidth=1.4)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("interferer's solo bandwidth (GB/s)")
    for ax in axes[:, 0]:
        ax.set_ylabel("normalized performance")
    fig.suptitle(f"{data.get('app', '?')}: family of sensitivity curves and smoothed fits")
    bar = fig.colorbar(cm.ScalarMappable(norm=norm, cmap=cmap), ax=axes, shrink=0.8)
    bar.set_label("interferer's reads (%)")
    fig.savefig(out, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="the JSON of `tiergym contention validate --plot`, or -")
    parser.add_argument("--out", required=True, help="PNG file to write")
    args = parser.parse_args()
    try:
        data = load(args.data)
    except (OSError, ValueError) as e:
        print(f"plot_contention: {e}", file=sys.stderr)
        return 1
    plot(data, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
