#!/usr/bin/env python3
"""Draw measured vs estimated runtime per run, like the differential-tracing paper's Figures 5 and 6.

Input: the JSON that `tiergym validate --json` prints (`tiergym validate --plot FILE.png`
calls this script itself). One group of bars per measured run: the measured runtime and
the estimate of every model the JSON holds (paper, and concurrent with --machine), with
the error of each estimate above its bar; runs are ordered as in runs.csv.

usage: /usr/bin/python3 scripts/plot_validation.py VALIDATION.json|- --out FILE.png
       [--title TEXT]            (- reads the JSON from standard input)
Needs Debian's python3-matplotlib.
"""
import argparse
import json
import sys


def load(path):
    """Returns (run names, measured seconds, {model: estimated seconds}, {model: errors})."""
    if path == "-":
        path = "<stdin>"
        doc = json.load(sys.stdin)
    else:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    runs = doc.get("runs")
    if not isinstance(runs, list):
        raise ValueError(f"{path}: 'runs' must be a list (the output of tiergym validate --json)")
    names, measured = [], []
    estimated, errors = {}, {}
    for i, run in enumerate(runs):
        for key in ("name", "measured_ns", "estimated_ns"):
            if key not in run:
                raise ValueError(f"{path}: runs[{i}] has no '{key}'")
        names.append(run["name"])
        measured.append(run["measured_ns"] / 1e9)
        models = run.get("models") or {doc.get("model", "paper"): run}
        for model, value in models.items():
            estimated.setdefault(model, []).append(value["estimated_ns"] / 1e9)
            errors.setdefault(model, []).append(value["error_pct"])
    return names, measured, estimated, errors


def plot(names, measured, estimated, errors, out, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = 1 + len(estimated)
    width = 0.8 / groups
    fig, ax = plt.subplots(figsize=(min(18.0, max(6.0, 0.5 * len(names) + 2)), 6.0))
    xs = range(len(names))
    ax.bar([x - 0.4 + width / 2 for x in xs], measured, width, label="measured", color="0.3")
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red"]
    order = sorted(estimated, key=lambda m: (m != "paper", m))  # the paper's model first
    for k, model in enumerate(order):
        values = estimated[model]
        offset = -0.4 + width * (k + 1.5)
        bars = ax.bar([x + offset for x in xs], values, width,
                      label=f"estimated ({model})", color=colors[k % len(colors)])
        for bar, err in zip(bars, errors[model]):
            ax.annotate(f"{err:.0f}%", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        xytext=(0, 2), textcoords="offset points",
                        ha="center", va="bottom", fontsize=7, rotation=90)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("runtime (s)")
    ax.set_ylim(0, max(measured + [v for vs in estimated.values() for v in vs]) * 1.18)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", ncol=groups)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("json", help="output of `tiergym validate --json`, or - for stdin")
    parser.add_argument("--out", required=True, help="PNG file to write")
    parser.add_argument("--title", default="measured vs estimated runtime")
    args = parser.parse_args(argv)
    try:
        names, measured, estimated, errors = load(args.json)
    except (OSError, ValueError, KeyError, TypeError) as e:  # json errors are ValueErrors
        print(f"plot_validation.py: {e}", file=sys.stderr)
        return 1
    plot(names, measured, estimated, errors, args.out, args.title)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
