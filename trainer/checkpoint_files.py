"""Where checkpoints lie and which are complete: OUT/checkpoints/step_NNNNNN/, complete once its state.json
is there (trainer.checkpoint writes it last, then renames the folder into place). No torch: the web app
reads these too (a run's Resume says whether it continues from a checkpoint)."""

import os


def checkpoint_root(out_dir: str) -> str:
    return os.path.join(out_dir, "checkpoints")


def list_checkpoints(out_dir: str) -> list[str]:
    """The complete checkpoints' folders, oldest step first."""
    root = checkpoint_root(out_dir)
    if not os.path.isdir(root):
        return []
    paths = [
        os.path.join(root, n)
        for n in os.listdir(root)
        if n.startswith("step_")
        and n.removeprefix("step_").isdigit()
        and os.path.exists(os.path.join(root, n, "state.json"))
    ]
    # by step, not by name: step 1,000,000 has seven digits, one more than the names' padding
    return sorted(paths, key=step_of)


def step_of(path: str) -> int:
    """The step a checkpoint resumes at."""
    return int(os.path.basename(path).removeprefix("step_"))
