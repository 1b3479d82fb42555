"""Upload a metrics file as an imported run: a page with a form, and POST /api/imports for scripts."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.files.uploadedfile import TemporaryUploadedFile
from django.shortcuts import redirect, render
from django.utils.datastructures import MultiValueDict
from django.utils.html import format_html, format_html_join
from django.views.decorators.http import require_http_methods

from diagnostics import gzip_stream
from diagnostics.quoting import quoted
from webapp.accounts.api_auth import ApiError, api_view, gzipped
from webapp.core import jsonsafe
from webapp.core.json_response import JsonResponse
from webapp.core.wording import counted, shortlist
from webapp.imports import importer
from webapp.imports.forms import ImportForm

CHUNK = 1024 * 1024
# The longest file name an upload keeps (Django's UploadedFile cuts a longer one to its first characters and
# its suffix, without a word): a raw body's ?filename= beyond it is refused instead.
MAX_FILENAME = 255


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def import_run(request):
    if request.method == "POST":
        form = ImportForm(request.POST, request.FILES)
        if form.is_valid():
            run = form.save(request.user)
            summary = form.summary(run)
            imported = f"Imported {counted(summary['points'], 'metric point')} over {counted(summary['steps'], 'step')}"
            if summary["detector_keys"]:
                messages.success(
                    request, f"{imported}; the detector found {counted(summary['events'], 'event')}."
                )
            else:
                names = shortlist(sorted(importer.keys_of(form.cleaned_data["series"])))
                messages.warning(
                    request,
                    f"{imported}, but none of its metrics ({names}) is one that the detector reads (train/success, "
                    "train/reward_mean, actor/entropy, ... under EchoLab's names or TRL's and veRL's; "
                    "docs/METRICS.md): it cannot judge this run.",
                )
            if form.duplicates:
                messages.warning(request, duplicate_warning(form.duplicates))
            if request.headers.get("X-Requested-With") == "XMLHttpRequest":  # static/js/import.js
                return JsonResponse({"url": run.get_absolute_url()}, status=201)
            return redirect(run)
        return render(request, "imports/new.html", {"form": form}, status=400)
    return render(request, "imports/new.html", {"form": ImportForm()})


def duplicate_warning(earlier_runs):
    """The warning after an import whose file was imported before: which runs already hold it."""
    links = format_html_join(
        ", ",
        '<a href="{}">{}</a> (experiment “{}”, imported {})',
        (
            (
                run.get_absolute_url(),
                run.display_name,
                run.experiment.name,
                f"{run.created_at:%Y-%m-%d %H:%M}",
            )
            for run in earlier_runs
        ),
    )
    return format_html(
        "This file has the same content as an earlier import, so this run repeats {}: {}. "
        "Archive one of them on the runs table if it was not meant.",
        "it" if len(earlier_runs) == 1 else f"{len(earlier_runs)} runs",
        links,
    )


@api_view(methods=("POST",))
def imports(request):
    """multipart/form-data (file, name, format), or the file as the raw body with ?format=&name=."""
    if request.content_type == "multipart/form-data":
        # The form's fields only, and none in the address, which a raw body's import reads them from: a
        # name sent there was dropped without a word.
        for field in request.GET:
            raise ApiError.field(
                field[:100], "a multipart import takes its fields in the form, not the address"
            )
        for field in [*request.POST, *request.FILES]:
            if field not in ImportForm.base_fields:
                raise ApiError.field(
                    field[:100], f"not a field of an import (it takes {', '.join(ImportForm.base_fields)})"
                )
            given = len(request.POST.getlist(field))
            if given > 1:  # the last one was taken, without a word (the form counts files itself)
                raise ApiError.field(field, f"given {given} times; give it once")
        _format_param(request.POST.get("format"))
        form = ImportForm(request.POST, request.FILES)
        upload = request.FILES.get("file")
        if upload is not None and upload.size > form.max_bytes:  # a 413, as for a raw body over the limit
            raise ApiError.field("file", form.too_large(upload), 413)
    else:
        # Blank is absent, as the form's own fields have it: the name then defaults to the file's.
        name = request.GET.get("name", "").strip()
        fmt = _format_param(request.GET.get("format"))
        # The name is checked before it becomes the file name, so that its error names it.
        if jsonsafe.unstorable_text(name) is not None:
            raise ApiError.field("name", jsonsafe.UNSTORABLE_TEXT)
        filename = request.GET.get("filename", "").strip()
        # the one sent: a default made from a name too long is the name's error, which the form reports
        if len(filename) > MAX_FILENAME:
            raise ApiError.field("filename", f"at most {MAX_FILENAME} characters, got {len(filename)}")
        filename = filename or _default_filename(name, fmt)
        if jsonsafe.unstorable_text(filename) is not None:
            raise ApiError.field("filename", jsonsafe.UNSTORABLE_TEXT)
        form = ImportForm(
            {"name": name, "format": fmt}, MultiValueDict({"file": [_raw_body(request, filename)]})
        )
    if not form.is_valid():
        errors = {field: " ".join(problems) for field, problems in form.errors.items()}
        raise ApiError.fields(errors)
    run = form.save(request.user)
    return JsonResponse(
        {"id": run.pk, "url": run.get_absolute_url(), "experiment": run.experiment_id, **form.summary(run)},
        status=201,
    )


def _format_param(given: str | None) -> str:
    """The format the API was told, or "" when it was not (read from the file name, else the content): a
    format named is csv or jsonl, never a blank taken for "not told"."""
    if given is not None and given not in ("csv", "jsonl"):
        raise ApiError.field(
            "format", f"must be csv or jsonl, or left out to read the file's; got {quoted(given)}"
        )
    return given or ""


def _default_filename(name: str, fmt: str) -> str:
    """The raw body's file name when none is given: the name (else "metrics") with the format's suffix."""
    suffix = f".{fmt}" if fmt in ("csv", "jsonl") else ""
    stem = name or "metrics"
    return stem if stem.lower().endswith(suffix) else stem + suffix


def _raw_body(request, filename) -> TemporaryUploadedFile:
    """The request body (gunzipped under `Content-Encoding: gzip`), streamed to a temporary file; 413
    beyond IMPORT_MAX_BYTES."""
    limit = settings.IMPORT_MAX_BYTES
    chunks = iter(lambda: request.read(CHUNK), b"")
    if gzipped(request):
        chunks = gzip_stream.inflate(chunks, limit)
    upload = TemporaryUploadedFile(filename, request.content_type or "text/plain", 0, None)
    try:
        for chunk in chunks:
            upload.size += len(chunk)
            if upload.size > limit:
                raise gzip_stream.Oversized(f"the body is over the limit of {limit} bytes")
            upload.write(chunk)
    except gzip_stream.Oversized as error:
        upload.close()
        raise ApiError.field("file", str(error), 413) from None
    except ValueError as error:  # a broken gzip stream
        upload.close()
        raise ApiError.field("file", f"{error}, though Content-Encoding says gzip") from None
    upload.flush()
    upload.seek(0)
    return upload
