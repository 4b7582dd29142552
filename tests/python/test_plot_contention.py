"""scripts/plot_contention.py draws a family with its fits, and refuses bad input."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "plot_contention.py")
DATA = os.path.join(ROOT, "estimator", "contention", "data")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(*args, stdin=None):
    return subprocess.run([sys.executable, SCRIPT, *args], input=stdin, capture_output=True,
                          text=True)


def family():
    line = [[x, 1 - 0.01 * x] for x in range(0, 41, 5)]
    return {"app": "toy", "curves": [
        {"read_pct": pct, "points": [[x, 1 - 0.012 * x] for x in range(4, 41, 4)],
         "fits": {"linear/all": line, "interpolation/sampled": line}}
        for pct in (50, 75, 100)]}


def test_plots_a_family_from_a_file(tmp_path):
    data = tmp_path / "family.json"
    data.write_text(json.dumps(family()))
    out = tmp_path / "f.png"
    r = run(str(data), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == PNG_MAGIC


def test_plots_a_family_from_stdin_with_a_single_curve(tmp_path):
    one = family()
    one["curves"] = one["curves"][:1]
    out = tmp_path / "one.png"
    r = run("-", "--out", str(out), stdin=json.dumps(one))
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 1000


@pytest.mark.parametrize("text,message", [
    ("{not json", "not JSON"),
    ('{"app": "x"}', "'curves' list"),
    ('{"app": "x", "curves": []}', "no curves"),
    ('{"curves": [{"read_pct": 50, "points": []}]}', "curves[0] has no 'fits'"),
    ('{"curves": [{"read_pct": 50, "points": [[1]], "fits": {}}]}', "[x, y] pairs"),
])
def test_refuses_bad_input_without_writing(tmp_path, text, message):
    out = tmp_path / "x.png"
    r = run("-", "--out", str(out), stdin=text)
    assert r.returncode == 1
    assert message in r.stderr
    assert not out.exists()


def test_the_tiergym_binary_drives_the_script(tmp_path):
    binary = os.path.join(os.environ.get("TIERGYM_BIN_DIR", os.path.join(ROOT, "build", "bin")),
                          "tiergym")
    if not os.path.exists(binary):
        pytest.skip(f"{binary} is not built")
    out = tmp_path / "bundled.png"
    r = subprocess.run([binary, "contention", "validate",
                        "--curves", os.path.join(DATA, "curves.csv"),
                        "--apps", os.path.join(DATA, "apps.csv"),
                        "--pairs", os.path.join(DATA, "pairs.csv"),
                        "--plot", str(out), "--plot-app", "nekbone"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "plot of nekbone written to" in r.stderr
    assert out.read_bytes()[:8] == PNG_MAGIC
