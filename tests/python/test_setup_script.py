"""scripts/setup.sh as a new user meets it (what ./scripts/run.sh opens with): one line per
step with its time on the terminal, the package managers' output in the log, and, when a
step fails, the log's last lines and the path of the whole log. Run on a copy of the
script beside stand-ins for the steps (a Debian step that prints like apt does, an
interpreter that cannot make a virtual environment), so nothing is installed."""

import os
import pathlib
import shutil
import subprocess

from tiergym_testing import REPO


def setup_copy(tmp_path, install_deps):
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    for name in ("setup.sh", "compiler_env.sh"):
        shutil.copy(REPO / "scripts" / name, scripts / name)
    stub = scripts / "install_deps.sh"
    stub.write_text("#!/usr/bin/env bash\n" + install_deps)
    stub.chmod(0o755)
    return scripts / "setup.sh"


def run(script, **env):
    environment = {k: v for k, v in os.environ.items() if k != "TIERGYM_SETUP_LOG"}
    environment.update(env)
    return subprocess.run(["bash", str(script), "examples"], capture_output=True, text=True,
                          timeout=60, env=environment)


def test_each_step_is_one_line_and_the_package_managers_output_goes_to_the_log(tmp_path):
    # apt's ~500 lines, then the one-line result on descriptor 3 (as install_deps.sh does);
    # the next step cannot make the virtual environment.
    script = setup_copy(tmp_path, 'for i in $(seq 500); do echo "apt line $i"; done\n'
                                  'echo "all 3 packages present" >&3\n')
    out = run(script, PYTHON="false")
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert len(lines) == 2, out.stdout
    assert lines[0].startswith("setup: Debian packages (scripts/install_deps.sh) ... "
                               "all 3 packages present (") and lines[0].endswith(" s)")
    assert lines[1].startswith("setup: virtual environment .venv ... FAILED after ")
    assert "apt line" not in out.stdout + out.stderr  # in the log only
    assert out.stderr.startswith("setup: it wrote nothing to the log")  # `false -m venv`
    log = tmp_path / "build" / "setup.log"
    text = log.read_text()
    assert "apt line 1\n" in text and "apt line 500\n" in text
    assert out.stderr.rstrip().endswith(f"setup: the whole log: {log}")


def test_a_failing_step_shows_the_logs_last_lines(tmp_path):
    script = setup_copy(tmp_path, 'for i in $(seq 100); do echo "line $i"; done\n'
                                  'echo "E: Unable to locate package libfoo-dev"; exit 100\n')
    custom = tmp_path / "logs" / "mine.log"
    out = run(script, TIERGYM_SETUP_LOG=str(custom))
    assert out.returncode == 1
    assert out.stdout == ("setup: Debian packages (scripts/install_deps.sh) ... FAILED after "
                          f"{out.stdout.split('FAILED after ')[1]}")
    shown = out.stderr.splitlines()
    assert shown[0] == "setup: the last 30 lines it wrote to the log:"
    assert shown[-2] == "  | E: Unable to locate package libfoo-dev"
    assert "  | line 72" in shown and "  | line 71" not in shown  # 29 lines and the error
    assert shown[-1] == f"setup: the whole log: {custom}"
    assert custom.read_text().count("\nline ") == 100  # every line kept
    assert pathlib.Path(custom).read_text().startswith("=== setup: Debian packages")
