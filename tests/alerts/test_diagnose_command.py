"""manage.py diagnose prints what python -m diagnostics prints, and fails the same way."""

import subprocess
import sys

import pytest

from tests.helpers import REPO_ROOT

DATA = REPO_ROOT / "tests" / "data" / "detector"


def run(*args):
    return subprocess.run([sys.executable, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "file, options",
    [
        ("frozenlake-ppo-s0.csv", []),
        ("bandit-ppo-s0.jsonl", ["--overrides", '{"grad_spike": {"tolerance": 1.0}}', "--format", "jsonl"]),
    ],
)
def test_diagnose_prints_the_same_events_as_the_diagnostics_cli(file, options):
    path = str(DATA / file)
    cli = run("-m", "diagnostics", path, *options)
    command = run("manage.py", "diagnose", path, *options)
    assert cli.returncode == command.returncode == 0, command.stderr
    assert command.stdout == cli.stdout
    assert '"level": "collapse"' in command.stdout  # both runs collapse: the output is not empty


def test_bad_input_exits_2_naming_the_line_and_column(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("step,train/success\n0,0.5\n1,abc\n")
    cli = run("-m", "diagnostics", str(bad))
    command = run("manage.py", "diagnose", str(bad))
    assert cli.returncode == command.returncode == 2
    assert command.stdout == cli.stdout == ""
    assert "line 3, column 'train/success': 'abc' is not a number" in command.stderr
    assert "line 3, column 'train/success': 'abc' is not a number" in cli.stderr


def test_bad_overrides_name_the_rule_parameter():
    command = run(
        "manage.py",
        "diagnose",
        str(DATA / "frozenlake-ppo-s0.csv"),
        "--overrides",
        '{"collapse": {"pending": 0}}',
    )
    assert command.returncode == 2
    assert "--overrides: collapse.pending" in command.stderr
