#!/usr/bin/env python3
"""Writes the bundled machines made of published Mess curves: traces/synth/models/
machine_xeonmax.json and machine_ddr5cxl.json (traces/SYNTH.md, "Machines from measured
curves").

Sources (every measured number below is transcribed from them; nothing else is measured):

[SPR] DDR5: the Mess benchmark's bandwidth-latency curves of an Intel Xeon Platinum 8480+
(Sapphire Rapids, one socket, 8 channels of DDR5-4800) on the MareNostrum 5 general-purpose
nodes, published with P. Esmaili-Dokht, F. Sgherzi, V. S. Girelli, I. Boixaderas,
M. Carmin, A. Momeni, A. Armejach, E. Mercadal, G. Llort, P. Radojkovic, M. Moreto,
J. Gimenez, X. Martorell, E. Ayguade, J. Labarta, E. Confalonieri, R. Dubey and J. Adlard,
"A Mess of Memory System Benchmarking, Simulation and Application Profiling" (MICRO 2024),
in the Mess benchmark repository (bsc-mem/Mess-benchmark,
CPU/Actual-hardware/x86/Intel-SapphireRapids-Xeon-Platinum-8480/measuring/output/
bandwidth-latency.csv; its `type` column reads DDR4-2666, a label the tool left in place:
the node has DDR5-4800). Transcribed: the rows of rd_percentage 54 (rd_mapped 69: 69 % of
the traffic at the memory controller is reads) and 100 (rd_mapped 100), columns pause,
bandwidth_mean (MB/s) and latency_mean (ns).

[A64FX] HBM2E: the curves of a Fujitsu A64FX (48 cores, 2.2 GHz, four HBM2 stacks) measured
with the Mess benchmark on the CTE-ARM cluster of MareNostrum 4, as the same authors publish
them for the Mess simulator (bsc-mem/Mess-simulator, Standalone/data/a64fx-hbm2e/
bwlat_68.txt, bwlat_70.txt and bwlat_100.txt at commits 2eb5ef69/7746acbf; the folder's
README, Standalone/data/README.md, describes the system). Columns: bandwidth (MB/s),
latency (unit per file, below).

[CXL] CXL expander: the Mess simulator's CXL memory-expander curves, "generated through
detailed simulations using Micron technology" (Standalone/data/README.md; the paper's CXL
section), bsc-mem/Mess-simulator Standalone/data/cxl/bwlat_68.txt, bwlat_70.txt and
bwlat_100.txt (commits 2eb5ef69/feff71c8). Columns: bandwidth (MB/s), latency (unit per
file, below).

The latency unit of the simulator's files, settled per file. The sources disagree:
Standalone/data/README.md says "Column 2: Latency (cycles)", and scripts/hbm-exp.sh says
"latency values are saved in cycles" (converted with the curve's frequency: 2.2 GHz for the
A64FX, 2.1 GHz for CXL in scripts/cxl-exp.sh), while one version of the simulator's loader
(Standalone/src/mess_mem_ctrl.cpp) reads them as "in ns". The files' own digits decide:
  - The Mess benchmark stores its pointer-chase latency in cycles per access (its A64FX
    processing/calculator.py, LatencyPerfCalculator: "# cycles per access", printed in ns
    only after dividing by cpu-freq, 2.2 in config/A64FX.toml) and averages point-reps = 3
    repetitions of 9-decimal values.
  - a64fx-hbm2e/bwlat_68.txt and bwlat_70.txt: three times every value has at most 9
    decimals (41 of 41 rows each): plain means of the benchmark's cycles. Idle 284.1 and
    284.2 cycles = 129.1 and 129.2 ns at 2.2 GHz; saturated 726 cycles = 330 ns.
  - a64fx-hbm2e/bwlat_100.txt: 6.6 (3 x 2.2) times every value has at most 9 decimals (41
    of 41 rows; 3 times: 2 of 41): means divided by 2.2, i.e. nanoseconds. Idle 128.9 ns,
    saturated 330.9 ns: the 68 % and 70 % curves in cycles / 2.2 idle and saturate at the
    same latencies, as curves of one memory at nearby read shares do. Read as all
    nanoseconds (as an earlier version of this script did), the 68 % curve would idle at
    284 ns against 129 ns with all reads.
  - cxl/bwlat_68.txt and bwlat_100.txt: every value divided by 2.1 has at most 3 decimals
    (37 of 37 rows each): nanoseconds of the Micron model (3 decimals) times 2.1, i.e.
    cycles at 2.1 GHz. Idle 225.6 cycles = 107.4 ns.
  - cxl/bwlat_70.txt: its values have 3 decimals themselves: nanoseconds, idle 107.433 ns,
    exactly bwlat_68.txt's 225.6093 / 2.1.
So every latency below is converted to nanoseconds: A64FX 68 % and 70 % divided by 2.2, CXL
68 % and 100 % divided by 2.1, the others as published.
Where the latency is measured. The A64FX's curves, like [SPR], run from a core to memory
(a pointer chase on a core). The CXL curves run from the CXL host port to the device's
memory: scripts/hbm-exp.sh, "the curve data (except for CXL) includes the full
latency - from the core to main memory", and scripts/cxl-exp.sh sets the on-chip latency to
0 where the other scripts subtract 51 ns, "Latency (in nanoseconds) from the CPU core to
the memory controller" (Standalone/README.md). A tier's latency here is a core's
load-to-use latency, so the CXL tier adds that on-chip latency, 51 ns (the simulator's
value for its Skylake host; no Sapphire Rapids value is published): 107.4 + 51 = 158.4 ns
idle, against [SPR]'s 110.0 ns for local DDR5. The 51 ns is an assumption.
Bandwidths are unambiguous (MB/s).

Derivation (nothing below the transcription is a measurement):
  1. Points in order of increasing load (pause descending for [SPR]; the simulator's files
     list the highest load first, so their order is reversed), bandwidth in GB/s = MB/s /
     1000, latency in ns as settled above.
  2. Upper envelope: a point is kept only when its bandwidth is above every kept point's
     (the saturated region, where more issued load lowers bandwidth while latency rises,
     is not a function of bandwidth; its highest-bandwidth point is kept).
  3. Latency made non-decreasing by a running maximum (removes measurement jitter and the
     dip where the controller's queues drain).
  4. Every tier of a machine must be measured at the same read shares (traces/SYNTH.md):
     [SPR] has 69 % and 100 %. The 69 % curves of [A64FX] and [CXL] are interpolated half
     way between their 68 % and 70 % curves, as TierSpec::CurveAt interpolates between
     read shares: peak
     bandwidth, idle latency and the ratio of latency to idle latency at each utilisation
     linearly in the read share.
Machines:
  xeonmax  Intel Xeon Max 9480 (56 cores) in flat mode: ddr = [SPR] (the same compute tiles
           and DDR5 controllers), 128 GiB on node 0; hbm = [A64FX] (measured HBM2 of
           another processor standing in for the Xeon Max's HBM2e, for which no measured
           curve is published; its peak, 943 GB/s, is below the Xeon Max's theoretical
           1.64 TB/s), 64 GiB on node 1.
  ddr5cxl  the same socket's DDR5 [SPR], 128 GiB on node 0, and one CXL memory expander
           [CXL] plus the 51 ns on-chip latency, 256 GiB on CPU-less node 1 (26.8 GB/s
           peak with all reads, 158.4 ns idle).
  Migration throughputs (10 GB/s into DDR5 and HBM, 8 GB/s into CXL) are assumptions.
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


# [A64FX] and [CXL]: (bandwidth MB/s, latency), in file order (highest load first), rounded
# to 0.001 MB/s and 0.0001, latency in the file's own unit: A64FX_68, A64FX_70 in cycles at
# 2.2 GHz; A64FX_100 in ns; CXL_68, CXL_100 in cycles at 2.1 GHz; CXL_70 in ns.
A64FX_68 = [
    (872952.470, 724.4088), (873551.081, 725.1651), (876028.239, 725.6472),
    (876519.869, 725.2873), (878003.312, 726.2501), (877807.029, 724.5379),
    (868003.070, 692.3481), (851968.907, 572.1273), (812276.618, 495.6066),
    (752297.105, 454.9486), (698237.680, 425.4846), (651212.541, 402.8264),
    (610017.394, 384.6464), (573772.638, 371.7352), (541549.505, 360.4309),
    (486784.054, 344.2815), (442123.524, 334.4810), (404923.695, 327.7852),
    (346670.917, 318.1128), (303016.822, 313.4540), (269123.512, 309.2874),
    (242046.473, 307.1010), (219924.403, 305.2935), (201503.647, 303.6611),
    (172590.959, 301.3339), (150936.916, 299.9754), (134107.019, 298.7022),
    (120657.008, 297.7938), (102638.316, 296.4936), (81633.815, 294.9897),
    (75247.132, 294.3667), (65071.851, 293.2408), (57319.876, 292.5273),
    (51217.513, 291.7735), (46289.765, 291.0693), (31278.631, 289.3312),
    (23609.569, 288.1317), (15838.657, 286.9468), (9551.448, 285.7905),
    (1200.967, 284.4850), (480.151, 284.1152)]
A64FX_70 = [
    (876028.487, 721.5719), (876978.374, 721.9714), (879378.616, 723.4391),
    (880287.581, 722.7188), (880951.023, 725.3040), (880297.521, 720.2645),
    (868368.201, 671.8109), (849614.179, 547.6510), (801720.429, 477.7442),
    (741076.082, 439.4604), (687676.341, 412.7739), (641319.792, 392.4667),
    (600778.079, 377.2020), (565042.917, 365.3534), (533290.039, 355.1462),
    (479420.309, 341.0628), (435377.564, 332.1669), (398767.608, 326.1920),
    (341417.385, 317.0030), (298330.164, 312.5496), (265045.832, 308.4398),
    (238378.990, 306.4702), (216587.336, 304.5314), (198448.602, 303.1184),
    (169975.429, 300.8683), (148645.974, 299.5443), (132073.634, 298.4133),
    (118825.538, 297.5321), (101080.986, 296.2295), (80401.756, 294.8281),
    (74111.650, 294.1036), (64087.476, 293.2022), (56453.067, 292.4245),
    (50442.031, 291.6484), (45590.073, 290.8627), (30808.468, 289.4489),
    (23251.992, 288.2699), (15599.552, 286.8552), (9406.937, 285.9257),
    (1182.801, 284.3806), (472.890, 284.1581)]
A64FX_100 = [
    (942607.008, 328.4283), (939122.707, 330.9302), (936746.502, 326.5265),
    (935273.736, 324.0148), (928476.110, 198.1551), (833891.569, 174.1662),
    (749036.009, 167.4936), (679514.098, 160.6780), (621672.131, 155.8482),
    (572865.672, 149.0282), (531161.325, 148.4243), (495117.282, 145.2600),
    (463646.840, 144.6287), (435921.083, 142.5465), (411341.599, 141.5820),
    (369634.875, 140.0626), (335623.716, 138.7376), (307337.146, 137.5094),
    (263129.531, 136.1659), (229924.372, 136.0276), (204191.260, 135.5576),
    (183612.013, 135.2727), (166814.568, 135.0162), (152823.974, 134.7724),
    (130880.105, 134.2563), (114447.787, 133.9999), (101677.388, 133.6774),
    (91473.010, 133.4479), (77803.976, 133.0142), (61821.467, 132.5926),
    (56987.971, 132.3444), (49281.940, 132.1405), (43413.804, 131.7923),
    (38792.986, 131.5818), (35061.235, 131.3990), (23713.275, 130.8838),
    (17896.950, 130.4979), (12005.556, 130.1741), (7239.159, 129.6838),
    (912.048, 129.2886), (364.822, 128.9380)]
CXL_68 = [
    (38133.967, 1029.5985), (38134.739, 1029.5019), (38135.560, 1029.5355),
    (38135.898, 1029.4326), (38136.236, 1029.5187), (38133.198, 1029.5208),
    (38133.725, 1029.5544), (38135.419, 1029.5712), (38133.773, 1029.4242),
    (38135.419, 1028.9895), (38134.647, 1024.9617), (37621.078, 344.4987),
    (35533.051, 293.6073), (33662.527, 281.8431), (31981.897, 274.4175),
    (30459.310, 269.1675), (29075.962, 265.3560), (27812.092, 262.0359),
    (26654.185, 259.4319), (25588.022, 257.3235), (24604.321, 255.4209),
    (23693.845, 253.7325), (22847.842, 252.0798), (22060.423, 250.9962),
    (21325.474, 249.7887), (18279.900, 245.2380), (15995.521, 242.0250),
    (14218.766, 239.0955), (12797.209, 237.2937), (8532.101, 232.5624),
    (6399.312, 230.4645), (4266.365, 228.4338), (3199.832, 227.4090),
    (2559.893, 226.7937), (1279.974, 226.0209), (639.994, 225.6261),
    (319.999, 225.6093)]
CXL_70 = [
    (37126.210, 499.680), (37127.811, 499.672), (37129.139, 499.627),
    (37125.569, 499.633), (37128.635, 499.648), (37126.717, 499.652),
    (37128.681, 499.625), (37125.756, 499.631), (37127.857, 499.595),
    (37128.273, 499.428), (37129.047, 498.870), (37128.719, 483.847),
    (35533.051, 143.062), (33662.527, 135.049), (31981.897, 130.927),
    (30459.310, 128.186), (29075.962, 126.215), (27812.092, 124.566),
    (26654.185, 123.297), (25588.022, 122.246), (24604.321, 121.348),
    (23693.845, 120.520), (22847.842, 119.736), (22060.423, 119.213),
    (21325.474, 118.644), (18279.900, 116.495), (15995.521, 115.016),
    (14218.766, 113.650), (12797.209, 112.816), (8532.101, 110.628),
    (6399.312, 109.671), (4266.365, 108.735), (3199.832, 108.265),
    (2559.893, 107.979), (1279.974, 107.625), (639.994, 107.440),
    (319.999, 107.433)]
CXL_100 = [
    (26758.866, 1285.0047), (26758.866, 1285.0047), (26758.866, 1285.0047),
    (26758.866, 1285.0047), (26758.866, 1285.0047), (26758.866, 1285.0047),
    (26758.866, 1285.0047), (26758.866, 1285.0047), (26758.866, 1284.9669),
    (26758.866, 1284.8997), (26758.866, 1284.8640), (26758.866, 1284.8136),
    (26758.866, 1284.7485), (26758.866, 1284.6561), (26758.866, 1284.5175),
    (26758.866, 1284.2844), (26758.842, 1283.8182), (26758.771, 1282.3587),
    (26654.092, 285.4656), (25588.026, 259.1358), (24604.507, 250.6728),
    (23693.985, 245.7252), (22848.062, 242.4492), (22060.553, 240.2589),
    (21325.307, 238.8288), (18279.957, 235.4142), (15995.590, 234.1059),
    (14218.730, 231.8169), (12797.183, 230.6745), (8532.084, 228.6543),
    (6399.299, 227.7996), (4266.356, 226.9764), (3199.826, 226.5165),
    (2559.889, 226.2750), (1279.973, 225.7962), (639.993, 225.6072),
    (319.999, 225.5841)]


A64FX_GHZ = 2.2  # Mess-benchmark A64FX/config/A64FX.toml cpu-freq; scripts/hbm-exp.sh
CXL_GHZ = 2.1  # scripts/cxl-exp.sh frequencyCurve
ON_CHIP_NS = 51.0  # core to memory controller, scripts/ddr4-exp.sh and hbm-exp.sh


def by_load(file_rows, per_ns=1.0, add_ns=0.0):
    """The simulator's rows (highest load first) as [SPR]-like (order key, MB/s, latency
    ns): latency / per_ns (the curve's GHz for a file in cycles) + add_ns."""
    return [(i, mbps, lat / per_ns + add_ns) for i, (mbps, lat) in enumerate(file_rows)]


def interpolate(lo_points, hi_points, w):
    """The curve a fraction w of the way from lo_points to hi_points, as TierSpec::CurveAt
    reads it: peak, idle latency and the latency ratio at each utilisation, linearly."""
    def normalise(points):
        peak, idle = points[-1][0], points[0][1]
        return peak, idle, [(b / peak, l / idle) for b, l in points]

    def ratio_at(curve, u):
        for (u0, r0), (u1, r1) in zip(curve, curve[1:]):
            if u <= u1:
                return r0 + (r1 - r0) * (u - u0) / (u1 - u0) if u1 > u0 else r1
        return curve[-1][1]

    plo, ilo, clo = normalise(lo_points)
    phi, ihi, chi = normalise(hi_points)
    peak, idle = plo + w * (phi - plo), ilo + w * (ihi - ilo)
    points, lat_max = [], 0.0
    for u in sorted(set(u for u, _ in clo) | set(u for u, _ in chi)):
        r = (1 - w) * ratio_at(clo, u) + w * ratio_at(chi, u)
        b, lat_max = round(u * peak, 3), max(lat_max, round(r * idle, 3))
        if points and b <= points[-1][0]:
            continue
        points.append([b, lat_max])
    return points


def tier(name, capacity, numa, migration, curve69, curve100):
    return {"name": name, "capacity_bytes": capacity, "migration_gbps": migration,
            "numa_node": numa,
            "curves": [{"read_pct": 69, "points": curve69},
                       {"read_pct": 100, "points": curve100}]}


SPR_DDR = ("ddr", 128 << 30, 0, 10, derive(RD54), derive(RD100))
A64FX_HBM = ("hbm", 64 << 30, 1, 10,
             interpolate(derive(by_load(A64FX_68, A64FX_GHZ)),
                         derive(by_load(A64FX_70, A64FX_GHZ)), 0.5),
             derive(by_load(A64FX_100)))
CXL = ("cxl", 256 << 30, 1, 8,
       interpolate(derive(by_load(CXL_68, CXL_GHZ, ON_CHIP_NS)),
                   derive(by_load(CXL_70, 1.0, ON_CHIP_NS)), 0.5),
       derive(by_load(CXL_100, CXL_GHZ, ON_CHIP_NS)))

MACHINES = [
    {"name": "xeonmax",
     "description": (
         "Intel Xeon Max 9480 (Sapphire Rapids with HBM2e), one socket in flat mode, 56 "
         "cores: DDR5-4800 (8 channels, 128 GiB) on NUMA node 0, 64 GiB of HBM on node 1. "
         "ddr: measured bandwidth-latency curves (69 % and 100 % reads) of a Xeon Platinum "
         "8480+ socket with the same compute tiles and DDR5 controllers (Mess benchmark, "
         "Esmaili-Dokht et al., 'A Mess of Memory System Benchmarking, Simulation and "
         "Application Profiling', MICRO 2024; bsc-mem/Mess-benchmark, "
         "Intel-SapphireRapids-Xeon-Platinum-8480/measuring/output/bandwidth-latency.csv). "
         "hbm: measured curves of the Fujitsu A64FX's HBM2 (the same authors' Mess "
         "simulator data, bsc-mem/Mess-simulator Standalone/data/a64fx-hbm2e, bwlat_68/70 "
         "in cycles at 2.2 GHz interpolated to 69 %, bwlat_100 in ns), standing in for the "
         "Xeon Max's HBM2e, of which no measured curve is published: 942.6 GB/s peak, "
         "128.9 ns idle. Upper envelopes, latency made non-decreasing. Written by "
         "scripts/derive_machines.py, which cites every row, settles each file's latency "
         "unit and states every step."),
     "cores": 56, "cache_line_bytes": 64, "pebs_event": "MEM_LOAD_RETIRED:L3_MISS",
     "tiers": [tier(*SPR_DDR), tier(*A64FX_HBM)]},
    {"name": "ddr5cxl",
     "description": (
         "A Sapphire Rapids socket (Xeon Platinum 8480+, 56 cores) with 128 GiB of "
         "DDR5-4800 on NUMA node 0 and a 256 GiB CXL memory expander on CPU-less node 1. "
         "ddr: the Mess benchmark's measured curves of that socket (Esmaili-Dokht et al., "
         "'A Mess of Memory System Benchmarking, Simulation and Application Profiling', "
         "MICRO 2024; bsc-mem/Mess-benchmark, Intel-SapphireRapids-Xeon-Platinum-8480/"
         "measuring/output/bandwidth-latency.csv). cxl: the Mess simulator's CXL expander "
         "curves, from a detailed Micron model of the device (bsc-mem/Mess-simulator "
         "Standalone/data/cxl, bwlat_68 and bwlat_100 in cycles at 2.1 GHz, bwlat_70 in ns; "
         "69 % interpolated), host port to memory, plus an assumed 51 ns from core to host "
         "port (the simulator's on-chip latency): 26.8 GB/s peak with all reads, 158.4 ns "
         "idle. Upper envelopes, latency made non-decreasing. Written by "
         "scripts/derive_machines.py, which cites every row, settles each file's latency "
         "unit and states every step."),
     "cores": 56, "cache_line_bytes": 64, "pebs_event": "MEM_LOAD_RETIRED:L3_MISS",
     "tiers": [tier(*SPR_DDR), tier(*CXL)]},
]

models = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "traces", "synth",
                      "models")
for machine in MACHINES:
    out = os.path.join(models, f"machine_{machine['name']}.json")
    text = json.dumps(machine, indent=2)
    # One [bandwidth, latency] point per line.
    text = re.sub(r"\[\s+([0-9.]+),\s+([0-9.]+)\s+\]", r"[\1, \2]", text)
    with open(out, "w") as f:
        f.write(text + "\n")
    print("wrote", os.path.normpath(out))
