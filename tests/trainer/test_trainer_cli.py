"""python -m trainer: train, resume, Ctrl-C, eval, and one-line errors for bad input."""

import json
import os
import signal
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL = [
    "--set",
    "rollout.env_groups=2",
    "--set",
    "rollout.group_size=2",
    "--set",
    "rollout.max_new_tokens=16",
    "--set",
    "rollout.val_seeds=2",
    "--set",
    "optim.mini_batch_size=4",
    "--set",
    "optim.micro_batch_size=4",
]


@pytest.fixture
def cli(tiny_model_dir):
    env = {**os.environ, "MODEL_ROOT": os.path.dirname(tiny_model_dir), "ECHOLAB_THREADS": "1"}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "trainer", *args], cwd=ROOT, env=env, capture_output=True, text=True
        )

    run.env = env
    return run


def test_train_eval_presets(cli, tmp_path):
    out = tmp_path / "run"
    r = cli(
        "train", "--preset", "starpo-s-grpo", "--env", "bandit", "--steps", "1", "--out", str(out), *SMALL
    )
    assert r.returncode == 0, r.stderr
    assert "step 1/1" in r.stderr and "success" in r.stderr
    assert (out / "metrics.jsonl").exists() and (out / "config.yaml").exists()
    r = cli("eval", "--checkpoint", str(out), "--episodes", "4")
    assert r.returncode == 0, r.stderr
    assert 0.0 <= json.loads(r.stdout)["success"] <= 1.0
    r = cli("presets")
    assert r.returncode == 0 and "starpo-s" in yaml.safe_load(r.stdout)


def test_resume_keeps_the_runs_config_and_refuses_new_settings(cli, tmp_path):
    out = tmp_path / "run"
    assert (
        cli(
            "train", "--preset", "grpo", "--env", "bandit", "--steps", "1", "--out", str(out), *SMALL
        ).returncode
        == 0
    )

    r = cli("train", "--resume", "--out", str(out), "--steps", "2", "--set", "algorithm.kl_coef=0")
    assert r.returncode == 2 and "--resume" in r.stderr and "--set" in r.stderr

    r = cli("train", "--resume", "--out", str(out), "--steps", "2")  # no --preset: not the starpo-s default
    assert r.returncode == 0, r.stderr
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["algorithm"]["advantage"] == "grpo" and saved["schedule"]["steps"] == 2
    assert [json.loads(line)["step"] for line in open(out / "metrics.jsonl")] == [0, 1]


def test_a_used_out_dir_needs_resume_and_an_empty_one_cannot_resume(cli, tmp_path):
    out = tmp_path / "run"
    assert (
        cli(
            "train", "--preset", "grpo", "--env", "bandit", "--steps", "1", "--out", str(out), *SMALL
        ).returncode
        == 0
    )
    r = cli("train", "--preset", "grpo", "--env", "bandit", "--steps", "1", "--out", str(out), *SMALL)
    assert r.returncode == 2 and "--resume" in r.stderr and "step_000001" in r.stderr
    assert [json.loads(line)["step"] for line in open(out / "metrics.jsonl")] == [0]  # nothing lost

    r = cli("train", "--resume", "--out", str(tmp_path / "empty"))
    assert r.returncode == 2 and "nothing to resume" in r.stderr


def test_bad_input_is_one_line_naming_the_problem(cli, tmp_path):
    cases = [
        (
            (
                "train",
                "--env",
                "bandit",
                "--out",
                str(tmp_path / "a"),
                "--set",
                "rollout.group_size=1",
                "--set",
                "algorithm.filter=top_p",
            ),
            "rollout.group_size",
        ),
        (("train", "--config", str(tmp_path / "missing.yaml"), "--out", str(tmp_path / "b")), "cannot read"),
        (("eval", "--checkpoint", str(tmp_path / "nowhere")), "no checkpoint"),
        (("eval", "--checkpoint", str(tmp_path), "--episodes", "0"), "--episodes"),
    ]
    (tmp_path / "broken.yaml").write_text("rollout: [group_size\n")
    cases.append(
        (("train", "--config", str(tmp_path / "broken.yaml"), "--out", str(tmp_path / "c")), "not valid YAML")
    )
    for args, words in cases:
        r = cli(*args)
        assert r.returncode == 2, (args, r.stderr)
        assert words in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)


def test_ctrl_c_checkpoints_and_stops(cli, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trainer",
            "train",
            "--preset",
            "grpo",
            "--env",
            "bandit",
            "--steps",
            "1000",
            "--out",
            str(out),
            *SMALL,
        ],
        cwd=ROOT,
        env=cli.env,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if line.startswith("step 1/1000"):
            proc.send_signal(signal.SIGINT)
            break
    _, rest = proc.communicate(timeout=120)
    assert proc.returncode == 0, "".join(lines) + rest
    assert "stopped" in rest
    steps = [json.loads(line)["step"] for line in open(out / "metrics.jsonl")]
    assert steps and max(steps) < 999
    state = json.loads((out / "checkpoints" / f"step_{max(steps) + 1:06d}" / "state.json").read_text())
    assert state["step"] == max(steps) + 1


def test_sft_writes_a_model_folder_and_refuses_bad_input(cli, tmp_path):
    out = tmp_path / "sft"
    r = cli(
        "sft",
        "--env",
        "frozenlake",
        "--episodes",
        "8",
        "--noise",
        "0.5",
        "--out",
        str(out),
        "--set",
        "optim.micro_batch_size=4",
    )
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["episodes"] == 8 and summary["noise"] == 0.5 and (out / "config.json").exists()
    for args, message in [
        (("--episodes", "0", "--out", str(tmp_path / "a")), "--episodes"),
        (("--episodes", "2", "--out", str(out)), "not empty"),
        (
            ("--episodes", "2", "--out", str(tmp_path / "b"), "--set", "rollout.max_turns=0"),
            "rollout.max_turns",
        ),
    ]:
        r = cli("sft", "--env", "frozenlake", *args)
        assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
