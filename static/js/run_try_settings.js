// Run page, "Judge this run with other detector settings": the run's stored metrics replayed through the
// detector twice by the server (/api/runs/<id>/detector-inputs, with ?overrides= and without), and the
// events of each listed side by side, so that a user whose run cried wolf sees what a threshold moved or a
// rule turned off would have changed before changing the experiment. Nothing is stored or sent.
(function () {
  "use strict";

  const page = JSON.parse(document.getElementById("run-page-data").textContent);
  const form = document.getElementById("try-settings-form");
  const textarea = document.getElementById("try-overrides");
  const error = document.getElementById("try-overrides-error");
  const summary = document.getElementById("try-summary");
  const table = document.getElementById("try-events");
  const HEADERS = Array.from(table.tHead.rows[0].cells, function (cell) { return cell.textContent; });

  // The replay's events; an Error (EchoChartView.getJson's) when refused: the API's 400 names the overrides
  // field (errors.overrides), a 422 the run (too long to replay).
  async function replay(overrides) {
    const url = new URL(page.urls.detector_inputs, window.location.origin);
    if (overrides !== null) url.searchParams.set("overrides", overrides);
    return (await window.EchoChartView.getJson(url)).events;
  }

  const key = function (event) { return event.step + " " + event.level + " " + event.rule; };

  // "2 warnings (the first at step 34), a collapse at step 63": what a replay's events come to.
  function told(events) {
    const warnings = events.filter(function (event) { return event.level === "warning"; });
    const collapse = events.find(function (event) { return event.level === "collapse"; });
    const parts = [warnings.length ? warnings.length + " warning" + (warnings.length === 1 ? "" : "s") +
                   " (the first at step " + warnings[0].step + ")" : "no warning",
                   collapse ? "a collapse at step " + collapse.step : "no collapse"];
    return parts.join(", ");
  }

  function showError(text) {
    error.replaceChildren();
    error.hidden = !text;
    textarea.toggleAttribute("aria-invalid", Boolean(text));
    textarea.setAttribute("aria-describedby", text ? "try-overrides-error try-overrides-help" : "try-overrides-help");
    if (!text) return;
    const item = document.createElement("li");
    item.textContent = text;
    error.append(item);
    textarea.focus();
  }

  function showEvents(theirs, tried) {
    const rows = new Map();
    theirs.forEach(function (event) { rows.set(key(event), { event: event, theirs: true, tried: false }); });
    tried.forEach(function (event) {
      const row = rows.get(key(event)) || { event: event, theirs: false };
      row.tried = true;
      rows.set(key(event), row);
    });
    const sorted = Array.from(rows.values()).sort(function (a, b) { return a.event.step - b.event.step; });
    table.hidden = !sorted.length;
    table.tBodies[0].replaceChildren.apply(table.tBodies[0], sorted.map(function (row) {
      const tr = document.createElement("tr");
      if (row.theirs !== row.tried) tr.className = row.tried ? "tried-only" : "theirs-only";
      [String(row.event.step), row.event.level, row.event.rule, row.theirs ? "yes" : "no",
       row.tried ? "yes" : "no", row.event.message].forEach(function (text, i) {
        const cell = tr.insertCell();
        cell.textContent = text;
        cell.dataset.label = HEADERS[i];
      });
      return tr;
    }));
    const gone = sorted.filter(function (row) { return row.theirs && !row.tried; }).length;
    const added = sorted.filter(function (row) { return row.tried && !row.theirs; }).length;
    summary.textContent = "With these settings: " + told(tried) + ". With the experiment's: " + told(theirs) + ". " +
      (gone || added ? gone + " event" + (gone === 1 ? "" : "s") + " gone, " + added + " new."
                     : "The same events.");
  }

  let asked = 0;  // a later submit's answer wins over an earlier one that comes back after it

  form.addEventListener("submit", async function (submitted) {
    submitted.preventDefault();
    const number = ++asked;
    showError("");
    summary.textContent = "replaying the run through the detector twice...";
    table.hidden = true;
    let theirs, tried;
    try {
      [theirs, tried] = await Promise.all([replay(null), replay(textarea.value)]);
    } catch (failed) {  // refused, or the server not answering (restarting, the network gone)
      if (number !== asked) return;
      const field = failed.errors && failed.errors.overrides;
      summary.textContent = field ? "" : "Could not judge the run: " + failed.message;
      if (field) showError(field);
      return;
    }
    if (number !== asked) return;
    showEvents(theirs, tried);
  });
})();
