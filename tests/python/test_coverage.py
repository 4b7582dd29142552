"""agents_examples/coverage.py's per-application statistics, on access shares worked out by
hand (the fast tier filled densest first, as the oracle's knapsack fills it)."""

import importlib.util
import pathlib

import numpy as np
import pytest

# By its path: "coverage" is also the name of a PyPI package a test run may have imported.
_PATH = pathlib.Path(__file__).resolve().parents[2] / "agents_examples" / "coverage.py"
_SPEC = importlib.util.spec_from_file_location("tiergym_agents_coverage", _PATH)
coverage = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(coverage)


SIZE = np.array([1.0, 1.0, 2.0, 4.0])  # bytes per region; 8 in all


def test_the_statistics_of_a_steady_application():
    # Access shares 0.4, 0.2, 0.3, 0.1 against byte shares 1/8, 1/8, 2/8, 4/8: densities
    # 3.2, 1.6, 1.2, 0.2; a fast tier of 2 bytes holds regions 0 and 1 (0.6 of the accesses
    # in 0.25 of the bytes), and the same two in both halves of the run.
    shares = np.tile([0.4, 0.2, 0.3, 0.1], (4, 1))
    stats = coverage._stats(shares, SIZE, 2.0)
    assert stats == pytest.approx({"hot_density": 2.4, "top_density": 3.2, "footprint": 4.0,
                                   "hot_change": 0.0})


def test_a_hot_set_that_switches_halfway_changes_the_whole_fast_tier():
    # First half: region 0 then 1 hottest; second half: regions 2 (2 bytes) densest. The
    # 2-byte tier holds {0, 1} then {2}: nothing in common.
    shares = np.array([[0.5, 0.4, 0.05, 0.05]] * 2 + [[0.05, 0.05, 0.85, 0.05]] * 2)
    assert coverage._stats(shares, SIZE, 2.0)["hot_change"] == pytest.approx(1.0)
    # Regions never accessed are never placed, whatever the room.
    placed = coverage._fill_densest(np.array([0.0, 2.0, 0.0, 1.0]), SIZE, 8.0)
    assert placed.tolist() == [False, True, False, True]
