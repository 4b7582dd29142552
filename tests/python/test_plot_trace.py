"""scripts/plot_trace.py draws a trace or profile, and refuses bad input with a message."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "plot_trace.py")
CSV_DIR = os.path.join(ROOT, "tests", "traces", "testdata", "csv")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def test_plots_a_trace_to_png(tmp_path):
    out = tmp_path / "t.png"
    r = run(os.path.join(CSV_DIR, "valid_format_example.csv"), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plots_a_profile_directory_with_one_panel_per_run(tmp_path):
    profile = tmp_path / "profile"
    profile.mkdir()
    for name in ("valid_format_example.csv", "valid_extras_crlf.csv"):
        (profile / name).write_bytes(open(os.path.join(CSV_DIR, name), "rb").read())
    out = tmp_path / "p.png"
    r = run(str(profile), "--out", str(out), "--until", "0.5")
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 1000


def test_refuses_a_malformed_trace_naming_file_and_line(tmp_path):
    r = run(os.path.join(CSV_DIR, "bad_non_numeric_time.csv"), "--out", str(tmp_path / "x.png"))
    assert r.returncode == 1
    assert "bad_non_numeric_time.csv:5" in r.stderr
    assert not (tmp_path / "x.png").exists()


def test_refuses_a_trace_without_device():
    r = run(os.path.join(CSV_DIR, "bad_missing_device.csv"))
    assert r.returncode == 1
    assert "missing-device" in r.stderr
