"""Files an MLflow client logs with a run (mlflow.log_artifact, log_dict, log_text, log_figure, a model's
files): kept on disk under settings.ARTIFACT_ROOT/<EchoLab run id>/, served back to the client, listed on
the run page, and removed with the run.

The client reaches them through MLflow's artifact proxy paths (`/api/2.0/mlflow-artifacts/artifacts/...`,
its HttpArtifactRepository), naming a file as the run's `artifact_uri` does: `<experiment id>/<run
id>/artifacts/<path inside the run>`. Every path is checked the way MLflow's server checks it (no `..`,
no backslash, not absolute), and names a run of the token's owner."""

import mimetypes
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from django.conf import settings

from webapp.tracking.models import ExternalRun
from webapp.tracking.protocol import MlflowError, invalid

RUN_FOLDER = "artifacts"  # the last part of a run's artifact_uri
MAX_PATH_LENGTH = 1000
MAX_NAME_BYTES = 255  # one part of a path: the longest file name most filesystems take
CHUNK_BYTES = 1024 * 1024
# Served with their own type (a browser shows them); anything else is sent as plain text or as a
# download: a page or script a run logged must not run on EchoLab's origin with its user's session.
SHOWN_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"}
TEXT_TYPES = {"application/json", "application/x-yaml", "application/yaml", "application/xml"}


@dataclass(frozen=True)
class Artifact:
    """A path inside one run's artifacts ('' is the run's root), and where it is on disk."""

    run: ExternalRun
    inside: str

    @property
    def file(self) -> Path:
        return self.run.run.artifact_dir.joinpath(*self.inside.split("/"))

    @classmethod
    def at(cls, user, path: str, for_writing: bool = False) -> "Artifact":
        """The artifact that `path` (MLflow's, relative to the artifact root) names, in a run of `user`'s;
        RESOURCE_DOES_NOT_EXIST for another user's run or one that is not there, as for every MLflow id.
        For writing, the run must not be deleted (ExternalRun.get_active_for)."""
        parts = safe_parts(path)
        if len(parts) < 3 or parts[2] != RUN_FOLDER:
            raise invalid(
                "path",
                f"{path[:200]!r} is not inside a run's artifacts: EchoLab keeps artifacts per run, under "
                f"<experiment id>/<run id>/{RUN_FOLDER}/ (the run's artifact_uri)",
            )
        run = (ExternalRun.get_active_for if for_writing else ExternalRun.get_for)(user, parts[1])
        if parts[0] != run.run.experiment.mlflow.mlflow_id:
            raise MlflowError(
                "RESOURCE_DOES_NOT_EXIST", f"no run with id {parts[1]!r} in experiment {parts[0]!r}"
            )
        return cls(run, "/".join(parts[3:]))

    def listing(self) -> list[dict]:
        """What is directly in this folder, sorted by name: MLflow's answer, with names relative to the
        folder. A file or a path not there lists nothing, as MLflow's server answers."""
        if not self.file.is_dir():
            return []
        listed = []
        for entry in sorted(os.scandir(self.file), key=lambda entry: entry.name):
            if entry.is_dir(follow_symlinks=False):
                listed.append({"path": entry.name, "is_dir": True})
            elif entry.is_file(follow_symlinks=False):
                listed.append({"path": entry.name, "is_dir": False, "file_size": entry.stat().st_size})
        return listed

    def files(self, limit: int) -> tuple[list[tuple[str, int]], int]:
        """Up to `limit` files under this folder, each with its size, in path order, and how many there are."""
        found = []
        for folder, subfolders, names in os.walk(self.file):
            subfolders.sort()
            inside = Path(folder).relative_to(self.file)
            found += [((inside / name).as_posix(), os.path.getsize(Path(folder, name))) for name in names]
        found.sort()
        return found[:limit], len(found)

    def save(self, body, length: int) -> None:
        """Store `length` bytes read from `body` as this file, whole or not at all: written to a file of its
        own, flushed to disk, then moved over the name (a reader sees the old file or the new one)."""
        if not self.inside:
            raise invalid("path", "names the run's artifact folder, not a file in it")
        if length > settings.ARTIFACT_MAX_BYTES:
            raise MlflowError(
                "INVALID_PARAMETER_VALUE",
                f"{self.inside}: {length:,} bytes is more than an artifact may hold here "
                f"({settings.ARTIFACT_MAX_BYTES:,} bytes, ARTIFACT_MAX_BYTES)",
            )
        self._make_folder()
        if self.file.is_dir():
            raise invalid("path", f"{self.inside!r} is a folder of this run's artifacts, not a file")
        incoming = settings.ARTIFACT_ROOT / ".incoming"
        incoming.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(dir=incoming)
        try:
            with os.fdopen(handle, "wb") as out:
                received = _copy(body, out, length)
                out.flush()
                os.fsync(out.fileno())
            if received != length:
                raise MlflowError(
                    "BAD_REQUEST",
                    f"{self.inside}: the upload ended after {received:,} of its {length:,} bytes; nothing stored",
                )
            os.replace(partial, self.file)
        finally:
            if os.path.exists(partial):
                os.remove(partial)

    def _make_folder(self) -> None:
        root = self.run.run.artifact_dir
        for parent in reversed(PurePosixPath(self.inside).parents):
            if (root / parent).is_file():
                raise invalid(
                    "path", f"{parent.as_posix()!r} is a file of this run's artifacts, so it holds no others"
                )
        self.file.parent.mkdir(parents=True, exist_ok=True)

    def delete(self) -> None:
        """Remove the file, or the folder with everything in it; nothing there is no error (MLflow's)."""
        if self.file.is_dir():
            shutil.rmtree(self.file)
        elif self.file.is_file():
            self.file.unlink()

    def content_type(self) -> str:
        """The type the file is served as: its own for images and PDFs, plain text for text, JSON and
        YAML, a download otherwise (see SHOWN_TYPES)."""
        guessed, _ = mimetypes.guess_type(self.inside)
        if guessed in SHOWN_TYPES:
            return guessed
        if guessed and (guessed.startswith("text/") or guessed in TEXT_TYPES):
            return "text/plain; charset=utf-8"
        return "application/octet-stream"


def _copy(body, out, length: int) -> int:
    received = 0
    while received < length:
        chunk = body.read(min(CHUNK_BYTES, length - received))
        if not chunk:
            break
        out.write(chunk)
        received += len(chunk)
    return received


def safe_parts(path: str) -> list[str]:
    """The parts of a relative artifact path, refused as MLflow's server refuses them (validate_path_is_safe:
    `..`, a backslash, `#`, an absolute path) and where a filesystem would ('.', control characters, a
    name too long); empty parts (`a//b`, a trailing slash) are dropped, as a path join drops them."""
    if len(path) > MAX_PATH_LENGTH:
        raise invalid("path", f"is {len(path):,} characters long; at most {MAX_PATH_LENGTH:,}")
    if "\\" in path or "#" in path or any(ord(char) < 32 or ord(char) == 127 for char in path):
        raise invalid("path", f"{path[:200]!r} holds a backslash, '#' or a control character")
    if path.startswith("/") or PurePosixPath(path).is_absolute() or (len(path) > 1 and path[1] == ":"):
        raise invalid("path", f"{path[:200]!r} is absolute; artifact paths are relative")
    parts = [part for part in path.split("/") if part]
    for part in parts:
        if part in (".", ".."):
            raise invalid("path", f"{path[:200]!r} has a {part!r} part")
        if len(part.encode()) > MAX_NAME_BYTES:
            raise invalid("path", f"has a name of {len(part.encode())} bytes; at most {MAX_NAME_BYTES}")
    return parts
