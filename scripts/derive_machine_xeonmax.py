#!/usr/bin/env python3
"""Writes traces/synth/models/machine_xeonmax.json from published Mess measurements.

Source of every measured number below: the Mess benchmark's bandwidth-latency curves of an
Intel Xeon Platinum 8480+ (Sapphire Rapids, one socket, 8 channels of DDR5-4800) on the
MareNostrum 5 general-purpose nodes, published with P. Esmaili-Dokht, F. Sgherzi,
V. S. Girelli, I. Boixaderas, M. Carmin, A. Momeni, A. Armejach, E. Mercadal, G. Llort,
P. Radojkovic, M. Moreto, J. Gimenez, X. Martorell, E. Ayguade, J. Labarta,
E. Confalonieri, R. Dubey and J. Adlard, "A Mess of Memory System Benchmarking,
Simulation and Application Profiling" (MICRO 2024), in the Mess benchmark repository
(CPU/Actual-hardware/x86/Intel-SapphireRapids-Xeon-Platinum-8480/measuring/output/
bandwidth-latency.csv; its `type` column reads DDR4-2666, a label the tool left in place:
the node has DDR5-4800). Transcribed: the rows of rd_percentage 54 (rd_mapped 69: 69 % of
the traffic at the memory controller is reads) and 100 (rd_mapped 100), columns pause,
bandwidth_mean (MB/s) and latency_mean (ns).

Derivation (nothing below the transcription is a measurement):
  1. Points in order of increasing load (pause descending), bandwidth in GB/s = MB/s / 1000.
  2. Upper envelope: a point is kept only when its bandwidth is above every kept point's
     (the saturated region, where more issued load lowers bandwidth while latency rises,
     is not a function of bandwidth; its highest-bandwidth point is kept).
  3. Latency made non-decreasing by a running maximum (removes 0.001 ns measurement jitter
     and the dip where the controller's queues drain).
  4. ddr: the result, read_pct = rd_mapped.
  5. hbm: the same curves with every bandwidth multiplied by 1638.4 / 307.2 = 5.33, the
     ratio of the theoretical peaks of the Xeon Max's HBM2e (4 stacks x 1024 bit x 3.2 GT/s
     = 1638.4 GB/s; Intel's figure "up to 1.64 TB/s") and of 8 channels of DDR5-4800
     (307.2 GB/s), latencies unchanged. This assumes HBM2e loads like DDR5 relative to its
     peak and has DDR5's idle latency; it is a derived tier, not a measurement of HBM.
  Capacities: 64 GiB HBM2e (4 x 16 GiB) and 128 GiB DDR5 (8 x 16 GiB DIMMs), 56 cores
  (Xeon Max 9480). Migration throughputs are assumptions (10 GB/s each way).
"""
import json
import os
import re

# (pause, bandwidth_mean MB/s, latency_mean ns), transcribed from the CSV above.
RD100 = [(100000, 404.27, 109.982), (40000, 848.23, 114.981), (5000, 5913.92, 114.981),
         (3000, 9726.61, 114.981), (2000, 14382.71, 114.981), (1500, 18992.05, 114.981),
         (1000, 28050.12, 114.981), (900, 31044.43, 114.981), (800, 34723.93, 114.981),
         (700, 39345.19, 114.981), (600, 45460.36, 114.981), (550, 49344.33, 114.98),
         (450, 59325.21, 114.98), (380, 69278.08, 119.979), (340, 76519.32, 119.979),
         (300, 85306.64, 119.979), (260, 94621.50, 119.979), (220, 108376.26, 124.978),
         (200, 116418.68, 124.978), (180, 122070.00, 124.978), (160, 132541.17, 124.977),
         (140, 187133.06, 139.973), (120, 206871.04, 149.969), (100, 226484.88, 164.964),
         (90, 231393.80, 169.962), (80, 227527.24, 164.964), (70, 235234.81, 174.96),
         (65, 240332.14, 174.96), (60, 241230.98, 174.96), (55, 243050.17, 179.958),
         (50, 243977.90, 179.958), (45, 247436.59, 179.958), (40, 246829.85, 184.956),
         (35, 251392.83, 189.954), (30, 252069.80, 189.954), (25, 253065.03, 194.951),
         (20, 254916.04, 199.949), (15, 257726.35, 209.944), (10, 260175.63, 219.939),
         (5, 263380.05, 234.932), (0, 263570.34, 234.932)]
RD54 = [(100000, 577.18, 109.982), (40000, 1279.82, 114.981), (5000, 9397.68, 114.981),
        (3000, 15520.08, 114.981), (2000, 23031.90, 114.981), (1500, 30402.39, 114.98),
        (1000, 44969.47, 119.979), (900, 49675.79, 119.979), (800, 55586.61, 119.979),
        (700, 63096.31, 119.979), (600, 72687.09, 119.979), (550, 78843.94, 124.978),
        (450, 95025.32, 124.978), (380, 110647.96, 129.976), (340, 122241.35, 134.975),
        (300, 136107.11, 139.973), (260, 150761.30, 149.97), (220, 171824.39, 159.965),
        (200, 184930.60, 174.96), (180, 188110.31, 174.96), (160, 201721.82, 189.953),
        (140, 235966.16, 319.88), (120, 235712.10, 319.88), (100, 235494.46, 329.873),
        (90, 236460.42, 329.873), (80, 236349.62, 329.873), (70, 236336.85, 329.874),
        (65, 236312.53, 324.876), (60, 236307.36, 329.874), (55, 236429.08, 334.869),
        (50, 236370.16, 334.869), (45, 236377.83, 334.869), (40, 236224.30, 334.869),
        (35, 236567.26, 339.867), (30, 236449.77, 334.869), (25, 236369.05, 334.869),
        (20, 236053.15, 329.872), (15, 235399.01, 324.876), (10, 234971.54, 314.884),
        (5, 233973.20, 304.891), (0, 233675.66, 299.894)]
HBM_SCALE = 1638.4 / 307.2


def derive(rows, scale=1.0):
    points, lat_max = [], 0.0
    for _, mbps, lat in sorted(rows, key=lambda r: -r[0]):
        lat_max = max(lat_max, lat)
        gbps = round(mbps / 1000.0 * scale, 3)
        if points and gbps <= points[-1][0]:
            continue
        points.append([gbps, round(lat_max, 3)])
    # Latency of kept points: running maximum over the kept points only.
    for i in range(1, len(points)):
        points[i][1] = max(points[i][1], points[i - 1][1])
    return points


def tier(name, capacity, scale, numa):
    return {"name": name, "capacity_bytes": capacity, "migration_gbps": 10, "numa_node": numa,
            "curves": [{"read_pct": 69, "points": derive(RD54, scale)},
                       {"read_pct": 100, "points": derive(RD100, scale)}]}


machine = {
    "name": "xeonmax",
    "description": (
        "Intel Xeon Max 9480 (Sapphire Rapids with HBM2e), one socket in flat mode, 56 cores: "
        "DDR5-4800 (8 channels, 128 GiB) on NUMA node 0, 64 GiB HBM2e on node 1. ddr: measured "
        "bandwidth-latency curves (69 % and 100 % reads) of a Xeon Platinum 8480+ socket with "
        "the same compute tiles and DDR5 controllers, from the Mess benchmark (Esmaili-Dokht et "
        "al., 'A Mess of Memory System Benchmarking, Simulation and Application Profiling', "
        "MICRO 2024), upper envelope, latency made non-decreasing. hbm: DERIVED, not measured: "
        "the ddr curves with bandwidths scaled by 1638.4/307.2 (theoretical HBM2e over DDR5 "
        "peak), latencies unchanged. Written by scripts/derive_machine_xeonmax.py, which cites "
        "the rows and states every step."),
    "cores": 56,
    "cache_line_bytes": 64,
    "pebs_event": "MEM_LOAD_RETIRED:L3_MISS",
    "tiers": [tier("ddr", 128 << 30, 1.0, 0), tier("hbm", 64 << 30, HBM_SCALE, 1)],
}

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "traces", "synth",
                   "models", "machine_xeonmax.json")
text = json.dumps(machine, indent=2)
# One [bandwidth, latency] point per line.
text = re.sub(r"\[\s+([0-9.]+),\s+([0-9.]+)\s+\]", r"[\1, \2]", text)
with open(out, "w") as f:
    f.write(text + "\n")
print("wrote", os.path.normpath(out))
