#!/usr/bin/env python3
"""Plot the memory accesses of a trace or a profile over time, like the differential-tracing paper's Figure 4.

Each run gets one panel, its width proportional to its runtime: sampled accesses as dots
(x: time, y: touched page, pages numbered densely in address order so that the gaps
between mappings do not flatten the plot) and phasemarks as vertical lines.

usage: /usr/bin/python3 scripts/plot_trace.py PATH [--out FILE.png] [--max-points N]
PATH is a trace CSV v1 file or a profile directory of them (binary .tgt traces: convert
them first with `tiergym trace convert`). Needs Debian's python3-matplotlib and numpy.
"""
import argparse
import os
import sys


def read_trace(path):
    """Returns (device, times_s, addresses, mark_times_s, end_s, page_size) of a CSV v1."""
    import numpy as np
    device, page_size = None, 4096
    times, addrs, marks, end = [], [], [], None
    with open(path, encoding="utf-8") as f:
        first = f.readline().strip()
        if first != "# tiergym trace v1":
            raise ValueError(f"{path}:1: version: the first line must be '# tiergym trace v1'")
        lineno = 1
        for line in f:
            lineno += 1
            line = line.strip()
            if not line:
                continue
            if line.startswith("#"):
                key, _, value = line[1:].strip().partition("=")
                if key.strip() == "device":
                    device = value.strip()
                elif key.strip() == "page_size":
                    page_size = int(value)
                continue
            if line.startswith("type,"):
                continue
            fields = line.split(",")
            try:
                kind, t = fields[0], int(fields[1]) / 1e9
                if kind == "S":
                    times.append(t)
                    addrs.append(int(fields[5], 0))
                elif kind == "M":
                    marks.append(t)
                elif kind == "E":
                    end = t
            except (ValueError, IndexError):
                raise ValueError(f"{path}:{lineno}: not a valid trace row: {line!r} "
                                 f"(check it with 'tiergym trace validate')")
    if device is None:
        raise ValueError(f"{path}: missing-device: no '# device=' header line")
    if end is None:
        raise ValueError(f"{path}: missing-end: no E row")
    return device, np.array(times), np.array(addrs, dtype=np.uint64), marks, end, page_size


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", help="trace CSV v1 file or profile directory")
    parser.add_argument("--out", default="trace.png", help="output PNG (default: trace.png)")
    parser.add_argument("--until", type=float, default=None,
                        help="show only the first SECONDS of each run (zoom into phases)")
    parser.add_argument("--max-points", type=int, default=200000,
                        help="dots drawn per run at most; more are thinned evenly")
    args = parser.parse_args()

    import numpy as np
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if os.path.isdir(args.path):
        files = sorted(os.path.join(args.path, f) for f in os.listdir(args.path)
                       if f.endswith(".csv") and not f.startswith("."))
    else:
        files = [args.path]
    if not files:
        print(f"error: {args.path}: no trace CSV files", file=sys.stderr)
        return 1
    try:
        runs = [read_trace(f) for f in files]
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    # Dense page numbering shared by all runs, so the panels line up.
    shift = int(runs[0][5]).bit_length() - 1
    all_pages = np.unique(np.concatenate([r[2] >> np.uint64(shift) for r in runs]))
    if args.until is not None:
        if args.until <= 0:
            print("error: --until must be positive", file=sys.stderr)
            return 2
        runs = [(d, t[t <= args.until], a[t <= args.until], [m for m in mk if m <= args.until],
                 min(e, args.until), ps) for d, t, a, mk, e, ps in runs]
    widths = [max(r[4], 1e-9) for r in runs]
    fig, axes = plt.subplots(1, len(runs), figsize=(12, 5), sharey=True,
                             gridspec_kw={"width_ratios": widths}, squeeze=False)
    for ax, (device, times, addrs, marks, end, _) in zip(axes[0], runs):
        dense = np.searchsorted(all_pages, addrs >> np.uint64(shift))
        step = max(1, len(times) // args.max_points)
        ax.scatter(times[::step], dense[::step], s=0.3, alpha=0.5, linewidths=0)
        # Phasemarks: every one when they stay readable, else evenly thinned to ~120.
        for m in marks[1::max(1, len(marks) // 120)]:
            ax.axvline(m, color="red", linewidth=0.4, alpha=0.7)
        ax.set_xlim(0, end)
        ax.set_title(f"{device}: {end:.2f} s, {len(times)} samples, {len(marks)} phases",
                     fontsize=9)
        ax.set_xlabel("time (s)")
    axes[0][0].set_ylabel("touched page (dense index, address order)")
    name = os.path.normpath(args.path)
    if os.path.basename(name) == "profile":
        name = os.path.dirname(name)
    fig.suptitle(os.path.basename(name) +
                 ": sampled accesses, phasemarks in red")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
