// The runs table: which columns show (remembered in localStorage) and the "Export selected as CSV"
// link, built from the run selection that compare_select.js keeps (the same ticks as "Compare").
(function () {
  "use strict";

  const COLUMNS = "echolab.runs.columns";
  const SELECTION = "echolab.compare.runs";  // kept by compare_select.js
  const table = document.getElementById("runs-table");
  if (!table) return;
  const toggles = Array.from(document.querySelectorAll("input.column-toggle"));

  function read(key, fallback) {
    try {
      const value = JSON.parse(window.localStorage.getItem(key));
      return value === null ? fallback : value;
    } catch (error) {
      return fallback;
    }
  }

  // Stored: {column key: true (shown) | false (hidden)} for the columns the user changed.
  function showColumns() {
    const chosen = read(COLUMNS, {});
    toggles.forEach(function (toggle) {
      const shown = toggle.value in chosen ? Boolean(chosen[toggle.value]) : toggle.dataset.default === "shown";
      toggle.checked = shown;
      table.querySelectorAll('[data-col="' + toggle.value + '"]').forEach(function (cell) { cell.hidden = !shown; });
    });
  }

  toggles.forEach(function (toggle) {
    toggle.addEventListener("change", function () {
      const chosen = read(COLUMNS, {});
      chosen[toggle.value] = toggle.checked;
      window.localStorage.setItem(COLUMNS, JSON.stringify(chosen));
      showColumns();
    });
  });

  const exportLink = document.getElementById("runs-export");

  // One export holds at most data-max runs (the server refuses more): beyond, the link says so instead.
  function showExport() {
    const ids = read(SELECTION, []).filter(Number.isInteger);
    const most = Number(exportLink.dataset.max);
    const usable = ids.length > 0 && ids.length <= most;
    exportLink.setAttribute("aria-disabled", usable ? "false" : "true");
    exportLink.href = exportLink.dataset.url + (usable ? "?runs=" + ids.join(",") : "");
    exportLink.textContent = !ids.length ? "Export selected as CSV"
      : usable ? "Export " + ids.length + " selected as CSV"
      : ids.length + " selected: export at most " + most + " at once";
    showBulk(ids);
  }

  // "Archive N selected" (in the Archived view, "Restore N selected" and "Delete N selected"): the same
  // ticks, posted.
  const bulkForms = ["runs-bulk", "runs-delete"].map(function (id) { return document.getElementById(id); })
    .filter(Boolean);
  function showBulk(ids) {
    bulkForms.forEach(function (form) {
      const button = form.querySelector("button");
      const most = Number(button.dataset.max);
      form.elements.runs.value = ids.join(",");
      button.disabled = !ids.length || ids.length > most;
      button.textContent = button.dataset.verb + " " + (!ids.length ? "selected"
        : ids.length <= most ? ids.length + " selected" : ids.length + " selected: at most " + most + " at once");
      if ("confirm" in form.dataset) {  // confirm.js asks it
        form.dataset.confirm = "Delete " + ids.length + " selected run" + (ids.length === 1 ? "" : "s") +
          " for good? Their metrics, samples, detector events, alert history and checkpoints on disk are " +
          "deleted; this cannot be undone.";
      }
    });
  }

  exportLink.addEventListener("click", function (event) {
    if (exportLink.getAttribute("aria-disabled") === "true") event.preventDefault();
  });
  // compare_select.js saves the ticks in its own change listener; read them once it has.
  document.addEventListener("change", function () { window.setTimeout(showExport, 0); });
  document.getElementById("compare-clear").addEventListener("click", function () { window.setTimeout(showExport, 0); });
  // The column chooser is a <details> popover: Escape or a click outside closes it, as a menu does,
  // so it never stays over the rows' checkboxes.
  const chooser = document.querySelector("details.column-chooser");
  if (chooser) {
    document.addEventListener("keydown", function (event) {
      if (event.key !== "Escape" || !chooser.open) return;
      chooser.open = false;
      chooser.querySelector("summary").focus();
    });
    document.addEventListener("click", function (event) {
      if (chooser.open && !chooser.contains(event.target)) chooser.open = false;
    });
    // Tabbing past its last control closes it too: open, it covered the focused header link below it.
    chooser.addEventListener("focusout", function (event) {
      if (chooser.open && event.relatedTarget && !chooser.contains(event.relatedTarget)) chooser.open = false;
    });
  }

  window.addEventListener("storage", function () { showColumns(); showExport(); });
  showColumns();
  showExport();
})();
