import tempfile
from contextlib import contextmanager
from pathlib import PurePath

from django import forms
from django.conf import settings

from diagnostics.rules import READS
from webapp.core import jsonsafe
from webapp.core.fields import CharField, ChoiceField
from webapp.imports import importer
from webapp.metrics.export import RUNS_CSV_COLUMNS


@contextmanager
def _path_of(upload):
    """A file system path holding the upload (Django keeps large uploads on disk already)."""
    if hasattr(upload, "temporary_file_path"):
        yield upload.temporary_file_path()
        return
    with tempfile.NamedTemporaryFile(suffix=PurePath(upload.name).suffix) as copy:
        for chunk in upload.chunks():
            copy.write(chunk)
        copy.flush()
        yield copy.name


def _several_runs(path: str) -> str:
    """What to say of a file whose header is that of an export of several runs, which is no one run's
    metrics (its run column read as a metric: "'ended-killed' is not a number"); else ""."""
    with open(path, "rb") as file:
        head = file.read(200)
    if not head.startswith((",".join(RUNS_CSV_COLUMNS) + ",").encode()):
        return ""
    return (
        "an export of the runs table (its first columns are "
        f"{', '.join(RUNS_CSV_COLUMNS)}): import one run's metrics at a time, from its run page's Export CSV"
    )


def megabytes(size: int) -> str:
    return f"{size / 2**20:.1f} MB"


class ImportForm(forms.Form):
    file = forms.FileField(
        help_text="CSV with a 'step' column and one column per metric, a metrics.jsonl "
        "(one JSON object per line), or a TRL / Hugging Face trainer_state.json (its log history); "
        "gzip-compressed too. Metric names from veRL/RAGEN and TRL are renamed to ours."
    )
    name = CharField(
        max_length=200, required=False, help_text="The experiment's name; default: the file name."
    )
    format = ChoiceField(
        choices=[
            ("", "from the file name"),
            ("csv", "CSV"),
            ("jsonl", "JSON: lines, a list, or a trainer_state.json"),
        ],
        required=False,
    )

    @property
    def max_bytes(self) -> int:
        """The largest file taken (the page's script checks a file against it before sending it)."""
        return settings.IMPORT_MAX_BYTES

    def too_large(self, upload) -> str:
        return (
            f"{upload.name}: {upload.size:,} bytes ({megabytes(upload.size)}), over the limit of "
            f"{self.max_bytes:,} bytes ({megabytes(self.max_bytes)})"
        )

    def clean_name(self):
        """A multipart form's fields are read as UTF-8 with each byte that is not replaced by U+FFFD (Django's
        parser): a name holding one was not text as sent, and would be stored as that character."""
        name = self.cleaned_data["name"]
        if "\ufffd" in name:
            raise forms.ValidationError("not UTF-8 text (it holds U+FFFD, a byte that could not be read)")
        return name

    def clean_file(self):
        """One file per import: of two `file` parts Django takes the last, without a word."""
        given = len(self.files.getlist("file"))
        if given > 1:
            raise forms.ValidationError(f"one file per import, got {given}")
        return self.cleaned_data["file"]

    def clean(self):
        cleaned = super().clean()
        upload = cleaned.get("file")
        if upload is None or self.errors:
            return cleaned
        if jsonsafe.unstorable_text(upload.name) is not None:
            self.add_error("file", f"the file name {jsonsafe.UNSTORABLE_TEXT}")
            return cleaned
        if upload.size > self.max_bytes:
            self.add_error("file", self.too_large(upload))
            return cleaned
        with _path_of(upload) as path:
            try:
                fmt = cleaned.get("format") or importer.format_of(upload.name)
                cleaned["series"] = importer.load(path, fmt)
                cleaned["sha256"] = importer.sha256_of(path)
            except ValueError as error:
                self.add_error("file", f"{upload.name}: {_several_runs(path) or error}")
        # A name left blank is the file's (without .csv.gz), and a file named blank (" .csv") gives the raw
        # body's default.
        cleaned["name"] = (
            cleaned.get("name", "").strip()
            or importer.uncompressed(upload.name).stem.strip()[:200]
            or "metrics"
        )
        return cleaned

    def save(self, owner):
        """The new run; `self.duplicates` then holds the owner's earlier imports of the same bytes."""
        data = self.cleaned_data
        self.duplicates = importer.earlier_imports(owner, data["sha256"])
        return importer.create_run(owner, data["name"], data["file"].name, data["series"], data["sha256"])

    def summary(self, run) -> dict:
        series = self.cleaned_data["series"]
        return {
            "steps": len(series),
            "points": sum(len(values) for _, values in series),
            "events": run.events.count(),
            "detector_keys": sorted(importer.keys_of(series) & READS),
            "duplicate_of": [
                {"id": earlier.pk, "url": earlier.get_absolute_url()} for earlier in self.duplicates
            ],
        }
