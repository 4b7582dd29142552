"""agents_examples/training_speed_benchmark.py's bookkeeping, on made-up runs (no training:
what the learners reach is the README's table, not a test): the table's lower bounds when
a capped learner did not get there, the issue's targets checked against a run's figures,
--quick's caps and budgets, usage errors. Milliseconds, and one subprocess."""

import io
import subprocess
import sys

import pytest

from tiergym_testing import REPO

import training_speed_benchmark as tsb  # agents_examples/ (pytest's pythonpath)

SCRIPT = str(REPO / "agents_examples" / "training_speed_benchmark.py")


def run(agent, seed, steps, train_s, reached_s, cpu_s):
    """A run as the benchmark's runners return it (one evaluation: the last)."""
    point = {"steps": steps, "train_s": train_s, "returns": {}, "train": 0.9, "held_out": 0.5}
    where = {"environment": 1.0, "inference": 1.0, "update": 2.0, "python": 0.0}
    out = tsb.finish(agent, seed, [point], None, train_s, 0.5, where, cpu_s=cpu_s)
    out.update(reached_s=reached_s, reached_steps=None if reached_s is None else steps,
               repeat=False)
    return out


def summary_of(sb3_reached, fast_rate):
    """SB3 at 1,000 env steps/s (60 s each, reached at sb3_reached or not), fast-ppo at
    fast_rate reaching in 2, 3 and 4 s."""
    runs = [run("sb3-ppo-tuned", s, 60_000, 60.0, r, 30.0) for s, r in enumerate(sb3_reached)]
    runs += [run("fast-ppo", s, int(fast_rate * 10), 10.0, 2.0 + s, 1.0) for s in range(3)]
    return tsb.summarize(runs)


def test_a_learner_that_did_not_get_there_gives_a_lower_bound():
    summary = summary_of([50.0, None, 40.0], 60_000)
    sb3 = summary["sb3-ppo-tuned"]
    assert sb3["mean_reached_s"] is None
    assert sb3["mean_reached_s_at_least"] == pytest.approx((50 + 60 + 40) / 3)
    assert sb3["cpu_us_per_step"] == pytest.approx(500.0)
    assert summary["fast-ppo"]["mean_reached_s"] == pytest.approx(3.0)
    assert tsb.time_ratio(sb3, summary["fast-ppo"]) == (pytest.approx(50 / 3), ">")
    table = io.StringIO()
    tsb.print_table(summary, 0.925, "1.0", out=table)
    sb3_row = next(line for line in table.getvalue().splitlines() if line.startswith("sb3"))
    assert ">50.0 (50.0, not in 60, 40.0)" in sb3_row
    fast_row = next(line for line in table.getvalue().splitlines() if line.startswith("fast"))
    assert fast_row.rstrip().endswith(">16.7")


@pytest.mark.parametrize("sb3_reached,fast_rate,met", [
    ([40.0, 40.0, 40.0], 60_000, [True, True, True]),    # 60x, 1/13.3 of the time
    ([40.0, 40.0, 40.0], 45_000, [False, False, True]),  # below 50,000 and 45x
    ([20.0, 20.0, 20.0], 60_000, [True, True, False]),   # 1/6.7 of the time
    ([None, None, None], 60_000, [True, True, True]),     # at least 1/20: met as a bound
])
def test_the_issues_targets_are_checked_against_the_run(sb3_reached, fast_rate, met):
    out = io.StringIO()
    result = tsb.check_targets(summary_of(sb3_reached, fast_rate), out=out)
    lines = out.getvalue().splitlines()[1:]
    assert [line.strip().startswith("met") for line in lines] == met, out.getvalue()
    assert result == all(met)


def test_quick_caps_the_slow_learners_and_shortens_the_fast_path():
    args = tsb.parse_args(["--quick"])
    assert args.agents == ["sb3-ppo-tuned", "rllib-ppo-tuned", "fast-ppo"]
    assert args.seeds == [0, 1, 2]
    assert args.cap_s == {"sb3-ppo-tuned": 75.0, "rllib-ppo-tuned": 30.0}
    assert args.budget["fast-ppo"] == 524_288
    full = tsb.parse_args([])
    assert full.agents == list(tsb.AGENTS) and full.cap_s == tsb.CAP_S
    assert tsb.parse_args(["--quick", "--cap-s", "5"]).cap_s == dict.fromkeys(tsb.CAP_S, 5.0)
    assert tsb.FAST_ARGS["fast-ppo"]["overlap_update"]


def test_usage_errors_exit_2(capsys):
    for args in (["--agents", "sb3-sac"], ["--seeds", "x"], ["--cap-s", "0"]):
        with pytest.raises(SystemExit) as exit_:
            tsb.parse_args(args)
        assert exit_.value.code == 2, args
        assert "error:" in capsys.readouterr().err
    out = subprocess.run([sys.executable, SCRIPT, "--cap-s", "-1"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "training_speed_benchmark.py: error: --cap-s must be positive" in out.stderr
