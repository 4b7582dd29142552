"""scripts/estimator_family.py's fit of the interval prior (estimator/README.md, "Intervals that
hold their level"): the narrowest prior whose 90 % interval holds 90 % of the runs, on runs
drawn with a known noise and model error."""

import importlib.util
import pathlib
import random

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load():
    spec = importlib.util.spec_from_file_location(
        "estimator_family", ROOT / "scripts" / "estimator_family.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(noise, model_error, n, seed):
    """Rows as score() returns them: (name, kind, error %, inside, measured, estimate, paper)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        delta = rng.choice([0.0, 0.05, 0.2])
        estimate = 1e9
        paper = estimate * (1 + delta)
        sd = (noise ** 2 + (model_error * delta) ** 2) ** 0.5
        measured = estimate * (1 + rng.gauss(0, sd))
        error = 100 * abs(estimate - measured) / measured
        out.append((f"run{i}", "fractions", error, None, measured, estimate, paper))
    return out


def test_the_fitted_prior_holds_its_level_on_fresh_runs_and_finds_both_scales():
    family = load()
    noise, model_error = family.fit_prior(family.prior_terms(rows(0.01, 0.1, 1500, 1)))
    # The least width trades one scale for the other a little; neither is lost.
    assert 0.007 <= noise <= 0.014
    assert 0.05 <= model_error <= 0.15
    fresh = family.prior_terms(rows(0.01, 0.1, 3000, 2))
    assert 0.87 <= family.prior_coverage(fresh, noise, model_error) <= 0.93


def test_a_prior_without_the_model_term_misses_the_corrected_runs():
    family = load()
    terms = family.prior_terms(rows(0.01, 0.1, 1500, 3))
    corrected = [t for t in terms if t[1] > 0.1]
    assert family.prior_coverage(corrected, 0.01, 0.0) < 0.6
    assert family.prior_coverage(corrected, 0.01, 0.1) > 0.85
