// Upload progress for /import: the form is sent with XMLHttpRequest so that the page can show how much of a
// large file has gone up, then that the server is importing it. The answer is what a plain submit would
// give: the new run's page (the server answers this request with its address), or the form with its errors.
(function () {
  "use strict";
  const form = document.getElementById("import-form");
  const box = document.getElementById("import-progress");
  if (!form || !box || !window.XMLHttpRequest) return;
  const bar = document.getElementById("import-progress-bar");
  const text = document.getElementById("import-progress-text");

  function megabytes(bytes) { return (bytes / 1048576).toFixed(1) + " MB"; }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    // A file over the server's limit is said at once, not after minutes of uploading it (the server's
    // check, forms.ImportForm, stays for the form sent without this script).
    const input = form.querySelector("input[type=file]");
    const file = input && input.files[0];
    const limit = Number(form.dataset.maxBytes);
    if (file && limit && file.size > limit) {
      bar.hidden = true;
      text.textContent = file.name + ": " + megabytes(file.size) + ", over the limit of " + megabytes(limit) +
        ": not sent (the server's IMPORT_MAX_BYTES).";
      text.setAttribute("role", "alert");
      box.hidden = false;
      input.focus();
      return;
    }
    bar.hidden = false;
    text.removeAttribute("role");
    const request = new XMLHttpRequest();
    request.open("POST", form.action);
    request.setRequestHeader("X-Requested-With", "XMLHttpRequest");
    request.upload.addEventListener("progress", function (progress) {
      if (!progress.lengthComputable) return;
      bar.value = Math.round(100 * progress.loaded / progress.total);
      text.textContent = "Uploading: " + megabytes(progress.loaded) + " of " + megabytes(progress.total);
    });
    request.upload.addEventListener("load", function () {
      bar.removeAttribute("value");  // indeterminate while the server parses and writes
      text.textContent = "Uploaded; importing (parsing, writing the points, running the detector)...";
    });
    request.addEventListener("load", function () {
      if (request.status === 201) {  // {"url": the new run's page}, which shows the import's summary
        window.location.assign(JSON.parse(request.responseText).url);
        return;
      }
      document.open();
      document.write(request.responseText);
      document.close();
    });
    request.addEventListener("error", function () {
      text.textContent = "The upload failed: the connection was lost. Try again.";
    });
    box.hidden = false;
    form.querySelector("button[type=submit]").disabled = true;
    request.send(new FormData(form));
  });
})();
