"""python -m diagnostics FILE prints, as JSON lines, the events the live detector gives."""

import json
import subprocess
import sys
from pathlib import Path

from diagnostics import Detector

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "tests/data/detector/frozenlake-ppo-s0.csv"


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "diagnostics", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def live_events(path, overrides=None):
    """The same numbers fed by hand to the live detector, one step at a time."""
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    detector, events = Detector(overrides), []
    for line in lines[1:]:
        cells = dict(zip(header, line.split(",")))
        step = int(cells.pop("step"))
        events += detector.update(step, {k: float(v) for k, v in cells.items() if v})
    return events


def test_cli_on_a_csv_gives_the_live_detectors_events():
    result = cli(RUN)
    assert result.returncode == 0, result.stderr
    printed = [json.loads(line) for line in result.stdout.splitlines()]
    assert printed == live_events(RUN)
    assert {"warning", "collapse"} <= {e["level"] for e in printed}


def test_cli_overrides():
    overrides = {"collapse": {"enabled": False}, "grad_spike": {"tolerance": 1000.0}}
    result = cli(RUN, "--overrides", json.dumps(overrides))
    printed = [json.loads(line) for line in result.stdout.splitlines()]
    assert printed == live_events(RUN, overrides)
    assert not {"collapse", "grad_spike"} & {e["rule"] for e in printed}


def test_cli_errors_name_the_problem(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("step,actor/grad_norm\n0,abc\n")
    result = cli(bad)
    assert result.returncode == 2
    assert "line 2, column 'actor/grad_norm': 'abc' is not a number" in result.stderr
    result = cli(RUN, "--overrides", '{"grad_spike": {"tol": 1}}')
    assert result.returncode == 2 and "grad_spike.tol: unknown parameter" in result.stderr
    result = cli(tmp_path / "missing.csv")
    assert result.returncode == 2 and "No such file" in result.stderr


def test_cli_piped_into_a_reader_that_stops_early_ends_quietly():
    # `python -m diagnostics run.csv | head -1`: the reader closes the pipe; no BrokenPipeError traceback.
    reader = subprocess.Popen(["head", "-c", "1"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    writer = subprocess.run(
        [sys.executable, "-m", "diagnostics", str(RUN)],
        cwd=ROOT,
        stdout=reader.stdin,
        stderr=subprocess.PIPE,
        timeout=60,
    )
    reader.stdin.close()
    reader.wait(timeout=10)
    assert writer.returncode == 0 and b"Traceback" not in writer.stderr, writer.stderr
