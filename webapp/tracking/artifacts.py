"""Files an MLflow client logs with a run (mlflow.log_artifact, log_dict, log_text, log_figure, a model's
files): kept on disk under settings.ARTIFACT_ROOT/<MLflow run id>/, served back to the client, listed on
the run page, and removed with the run.

The client reaches them through MLflow's artifact proxy paths (`/api/2.0/mlflow-artifacts/artifacts/...`,
its HttpArtifactRepository), naming a file as the run's `artifact_uri` does: `<experiment id>/<run
id>/artifacts/<path inside the run>`. Every path is checked the way MLflow's server checks it (no `..`,
no backslash, not absolute), and names a run of the token's owner.

An upload's body is read whole into a file of its own first; only then are the run's folders changed (a
folder made, the file moved in, a folder removed), one change at a time across the web server's processes
(`changes_locked`), so that a delete, another upload or the run's deletion meanwhile gets an answer, not
a half-made tree."""

import contextlib
import fcntl
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.http import FileResponse

from webapp.experiments.models import remove_folders
from webapp.tracking.models import ExternalRun
from webapp.tracking.protocol import MlflowError, invalid

RUN_FOLDER = "artifacts"  # the last part of a run's artifact_uri
MAX_PATH_BYTES = 4096  # a whole path as sent, before it is read part by part
MAX_INSIDE_BYTES = 2048  # a path inside a run: the filesystem's 4,096 hold it with ARTIFACT_ROOT's
MAX_NAME_BYTES = 255  # one part of a path: the longest file name most filesystems take
MAX_DEPTH = 64  # folders inside a run: os.walk and shutil.rmtree recurse, and break near 1,000
CHUNK_BYTES = 1024 * 1024
COUNTED_AT_MOST = 10_000  # files the run page counts (a checkpoint folder can hold hundreds of thousands)
# Shown by a browser as what they are; text is sent as plain text, anything else as a download: a page or
# script a run logged must not run on EchoLab's origin with its reader's session.
IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
TEXT_SUFFIXES = {
    ".txt", ".log", ".out", ".err", ".json", ".jsonl", ".yaml", ".yml", ".csv", ".tsv", ".md", ".rst",
    ".py", ".sh", ".toml", ".ini", ".cfg", ".xml", ".html", ".htm", ".js", ".css", ".svg",
}  # fmt: skip
COMPRESSED_SUFFIXES = {".gz", ".bz2", ".xz", ".zst", ".zip", ".tar", ".tgz", ".7z"}
DOWNLOAD = "application/octet-stream"
TEXT = "text/plain; charset=utf-8"


@contextlib.contextmanager
def changes_locked():
    """One change to the artifact folders at a time, across the web server's processes. Held only while
    folders are made, a file is moved in or a folder removed, never while a body is read."""
    settings.ARTIFACT_ROOT.mkdir(parents=True, exist_ok=True)
    with open(settings.ARTIFACT_ROOT / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield  # released when the file closes


def remove_run_folders(folders: list[Path]) -> None:
    """Remove deleted runs' artifact folders, as no upload changes them (after their rows are gone)."""
    with changes_locked():
        remove_folders(folders, "artifacts of deleted MLflow run")


@dataclass(frozen=True)
class Artifact:
    """A path inside one run's artifacts ('' is the run's folder), and where it is on disk."""

    run: ExternalRun
    inside: str

    @property
    def file(self) -> Path:
        return self.run.artifact_dir.joinpath(*self.inside.split("/"))

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
        experiment = run.run.experiment.mlflow
        if parts[0] != experiment.mlflow_id:
            raise MlflowError(
                "RESOURCE_DOES_NOT_EXIST", f"no run with id {parts[1]!r} in experiment {parts[0]!r}"
            )
        if for_writing and experiment.artifact_location:
            raise invalid(
                "path",
                f"the run's files go to its experiment's own artifact location, {run.artifact_uri}, which the "
                "client writes to itself; EchoLab keeps none of them",
            )
        return cls.in_run(run, parts[3:])

    @classmethod
    def in_run(cls, run: ExternalRun, parts: list[str]) -> "Artifact":
        if len(parts) > MAX_DEPTH:
            raise invalid(
                "path", f"has {len(parts)} names (folders and file) inside its run; at most {MAX_DEPTH}"
            )
        inside = "/".join(parts)
        if _bytes(inside) > MAX_INSIDE_BYTES:
            raise invalid(
                "path",
                f"names a file {_bytes(inside):,} bytes long inside its run; at most {MAX_INSIDE_BYTES:,}",
            )
        return cls(run, inside)

    def listing(self) -> list[dict]:
        """What is directly in this folder, sorted by name: MLflow's answer, with names relative to the
        folder and no size for an empty file (MLflow's FileInfo leaves a size of 0 out). A file or a path
        not there lists nothing, as MLflow's server answers; an entry removed while listed is left out."""
        try:
            entries = sorted(os.scandir(self.file), key=lambda entry: entry.name)
        except (FileNotFoundError, NotADirectoryError):
            return []
        listed = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    listed.append({"path": entry.name, "is_dir": True})
                elif entry.is_file(follow_symlinks=False):
                    size = entry.stat(follow_symlinks=False).st_size
                    listed.append(
                        {"path": entry.name, "is_dir": False, **({"file_size": size} if size else {})}
                    )
            except FileNotFoundError:
                continue
        return listed

    def files(self, limit: int) -> tuple[list[tuple[str, int]], int, bool]:
        """The first `limit` files under this folder with their sizes (a folder's files by name, then its
        folders by name), how many were counted, and whether that is all of them (COUNTED_AT_MOST)."""
        shown, counted = [], 0
        for folder, subfolders, names in os.walk(self.file):
            subfolders.sort()
            for name in sorted(names):
                counted += 1
                if counted > COUNTED_AT_MOST:
                    return shown, COUNTED_AT_MOST, False
                if len(shown) < limit:
                    path = Path(folder, name)
                    with contextlib.suppress(FileNotFoundError):  # removed meanwhile
                        shown.append((path.relative_to(self.file).as_posix(), path.stat().st_size))
        return shown, counted, True

    def save(self, body, length: int | None) -> None:
        """Store the body (`length` bytes, or up to its end where None: a chunked upload) as this file,
        whole or not at all: received into a file of its own and flushed to disk, then moved over the
        name. A refused upload makes no folder either."""
        if not self.inside:
            raise invalid("path", "names the run's artifact folder, not a file in it")
        if length is not None and length > settings.ARTIFACT_MAX_BYTES:
            raise self._too_large(f"{length:,} bytes is")
        received = self._receive(body, length)
        try:
            with changes_locked():
                if not ExternalRun.objects.filter(pk=self.run.pk).exists():  # deleted while the body came
                    raise MlflowError("RESOURCE_DOES_NOT_EXIST", f"no run with id {self.run.run_uuid!r}")
                self._make_folders()
                if self.file.is_dir():
                    raise invalid("path", f"{self.inside!r} is a folder of this run's artifacts, not a file")
                os.replace(received, self.file)
        finally:
            received.unlink(missing_ok=True)

    def _too_large(self, size: str) -> MlflowError:
        return invalid(
            "path",
            f"{self.inside}: {size} more than an artifact may hold here ({settings.ARTIFACT_MAX_BYTES:,} "
            "bytes, ARTIFACT_MAX_BYTES)",
        )

    def _receive(self, body, length: int | None) -> Path:
        incoming = settings.ARTIFACT_ROOT / ".incoming"
        incoming.mkdir(parents=True, exist_ok=True)
        received = incoming / secrets.token_hex(16)
        try:
            with open(received, "xb") as out:  # the umask's mode, as every other file the server writes
                size = 0
                while length is None or size < length:
                    chunk = _read(body, CHUNK_BYTES if length is None else min(CHUNK_BYTES, length - size))
                    if not chunk:
                        break
                    size += len(chunk)
                    if size > settings.ARTIFACT_MAX_BYTES:
                        raise self._too_large("the upload is")
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            if length is not None and size != length:
                raise MlflowError(
                    "BAD_REQUEST",
                    f"{self.inside}: the upload ended after {size:,} of its {length:,} bytes; nothing stored",
                )
        except BaseException:
            received.unlink(missing_ok=True)
            raise
        return received

    def _make_folders(self) -> None:
        root = self.run.artifact_dir
        for parent in reversed(PurePosixPath(self.inside).parents):
            folder = root / parent
            if folder.is_file():
                raise invalid(
                    "path", f"{parent.as_posix()!r} is a file of this run's artifacts, so it holds no others"
                )
            folder.mkdir(parents=True, exist_ok=True)

    def delete(self) -> None:
        """Remove the file, or the folder with everything in it; nothing there is no error (MLflow's)."""
        with changes_locked():
            if self.file.is_dir():
                shutil.rmtree(self.file)
            else:
                with contextlib.suppress(FileNotFoundError, NotADirectoryError):  # a/b where a is a file
                    self.file.unlink()

    def response(self) -> FileResponse:
        """The file, typed so that a browser shows images and text and downloads the rest (content_type)."""
        try:
            handle = open(self.file, "rb")
        except IsADirectoryError:
            raise invalid(
                "path", f"{self.inside or RUN_FOLDER!r} is a folder of the run's artifacts, not a file"
            ) from None
        except (FileNotFoundError, NotADirectoryError):
            raise MlflowError(
                "RESOURCE_DOES_NOT_EXIST", f"no artifact {self.inside!r} in run {self.run}"
            ) from None
        content_type = self.content_type()
        response = FileResponse(
            handle, content_type=content_type, as_attachment=content_type == DOWNLOAD, filename=self.file.name
        )
        response["Content-Security-Policy"] = "sandbox; default-src 'none'"
        return response

    def content_type(self) -> str:
        """By the name's last suffix, whatever the host's MIME tables say: images as themselves, text (pages
        and scripts too) as plain text, anything compressed or unknown as a download."""
        suffixes = [suffix.lower() for suffix in PurePosixPath(self.inside).suffixes]
        last = suffixes[-1] if suffixes else ""
        if last in COMPRESSED_SUFFIXES:
            return DOWNLOAD
        if last in IMAGE_TYPES:
            return IMAGE_TYPES[last]
        return TEXT if last in TEXT_SUFFIXES else DOWNLOAD


def _read(body, size: int) -> bytes:
    """A piece of an upload's body; a chunked body the client broke off or framed wrongly (the server's
    parser raises its own exceptions) is the client's error, not a server error."""
    try:
        return body.read(size)
    except Exception as error:  # gunicorn's InvalidChunkSize, ChunkMissingTerminator, NoMoreData; OSError
        raise MlflowError(
            "BAD_REQUEST", f"the upload's body could not be read: {error}; nothing stored"
        ) from None


def safe_parts(path: str) -> list[str]:
    """The parts of a relative artifact path, refused as MLflow's server refuses them (validate_path_is_safe:
    `..`, a backslash, `#`, an absolute path) and where a filesystem would ('.', control characters, a
    name too long); empty parts (`a//b`, a trailing slash) are dropped, as a path join drops them."""
    if _bytes(path) > MAX_PATH_BYTES:
        raise invalid("path", f"is {_bytes(path):,} bytes long; at most {MAX_PATH_BYTES:,}")
    if "\\" in path or "#" in path or any(ord(char) < 32 or ord(char) == 127 for char in path):
        raise invalid("path", f"{path[:200]!r} holds a backslash, '#' or a control character")
    if path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        raise invalid("path", f"{path[:200]!r} is absolute; artifact paths are relative")
    parts = [part for part in path.split("/") if part]
    for part in parts:
        if part in (".", ".."):
            raise invalid("path", f"{path[:200]!r} has a {part!r} part")
        if _bytes(part) > MAX_NAME_BYTES:
            raise invalid("path", f"has a name of {_bytes(part)} bytes; at most {MAX_NAME_BYTES}")
    return parts


def _bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))
