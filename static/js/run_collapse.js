// Run page, "Template collapse" panel: the MI estimate and retrieval accuracy against its chance line over
// steps, and the regime scatter (conditional entropy vs MI, one point per measured step, coloured by
// step): a run moving from "diverse and input-grounded" (high MI) to "templated" (MI near 0) shows as
// points sliding left. Data from the metrics API; "No data" when the run has no collapse/* keys.
(function () {
  "use strict";

  const page = JSON.parse(document.getElementById("run-page-data").textContent);
  const KEYS = ["collapse/mi_estimate", "collapse/retrieval_acc", "collapse/retrieval_chance",
                "collapse/conditional_entropy", "collapse/valid_thinking_rate"];
  const POLL_MS = 10000;
  // At this chance or above (3 distinct prompts or fewer) the measurement has little to tell apart.
  const FEW_PROMPTS_CHANCE = 1 / 3;

  async function load() {
    const url = new URL(page.urls.metrics, window.location.origin);
    KEYS.forEach(function (key) { url.searchParams.append("key", key); });
    url.searchParams.set("max_points", "1000");
    const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!response.ok) return null;
    return (await response.json()).series || {};
  }

  function pairs(series, xKey, yKey) {
    const x = series[xKey], y = series[yKey];
    if (!x || !y) return { step: [], x: [], y: [] };
    const byStep = new Map(y.step.map(function (step, i) { return [step, y.value[i]]; }));
    const out = { step: [], x: [], y: [] };
    x.step.forEach(function (step, i) {
      if (x.value[i] === null || !byStep.has(step) || byStep.get(step) === null) return;
      out.step.push(step); out.x.push(x.value[i]); out.y.push(byStep.get(step));
    });
    return out;
  }

  function line(series, key, name, style) {
    const s = series[key];
    return { x: s ? s.step : [], y: s ? s.value : [], name: name, mode: "lines+markers", line: style,
             connectgaps: false, yaxis: key === "collapse/mi_estimate" ? "y" : "y2" };
  }

  // What an empty panel says: the measurement is off, not due yet, or found nothing to measure.
  function whyNoData(valid) {
    const every = page.collapse_every;
    if (every === null) {
      return "No data: this run logs no collapse/* metrics (a run trained elsewhere, or a trainer without reasoning).";
    }
    if (every === 0) return "Off for this run: its diagnostics.collapse_every is 0.";
    if (valid && valid.step.length) {
      const last = valid.step.length - 1;
      return "No estimate: on every step measured so far (" + valid.step.length + ", the last step " + valid.step[last] +
        "), fewer than 2 distinct prompts came with reasoning inside <think> (valid thinking rate there: " +
        (valid.value[last] === null ? "–" : Number(valid.value[last].toPrecision(3))) + ").";
    }
    return "No step measured yet: the first measurement is at step 0, then every " + every + " steps.";
  }

  // Bandit's episodes open with 2 prompts: MI is at most log 2 nats and retrieval has half its range left
  // above chance, so a flat panel there says little about templates (a tester read it as a finding).
  function fewPrompts(chance) {
    const values = chance ? chance.value.filter(function (value) { return value !== null && value > 0; }) : [];
    const last = values.length ? values[values.length - 1] : null;
    if (last === null || last < FEW_PROMPTS_CHANCE) return "";
    const prompts = Math.round(1 / last);
    return "Few prompts to tell apart: the last measurement had " + prompts + " distinct prompt" +
      (prompts === 1 ? "" : "s") + " (retrieval's chance " + Math.round(100 * last) + "%), so the MI estimate " +
      "is at most log " + prompts + " = " + Math.log(prompts).toFixed(2) + " nats and a flat line says little " +
      "about templates. Bandit's episodes open with 2 prompts; Sokoban and FrozenLake give many.";
  }

  let drawnSeries = null;  // the last answer drawn, redrawn when the page's view changes

  // The panel's text version, for a reader who cannot see or point at its charts: a row per measured step
  // in the page's zoom, a column per key logged. Built while its <details> is open.
  const COLUMNS = [["collapse/mi_estimate", "MI estimate (nats)"], ["collapse/retrieval_acc", "retrieval accuracy"],
                   ["collapse/retrieval_chance", "chance"], ["collapse/conditional_entropy", "conditional entropy (nats/token)"],
                   ["collapse/valid_thinking_rate", "valid thinking rate"]];
  const tableDetails = document.getElementById("collapse-table-details");

  function showTable(series) {
    const columns = COLUMNS.filter(function (column) { return series[column[0]] && series[column[0]].step.length; });
    tableDetails.hidden = !columns.length;
    if (!columns.length || !tableDetails.open) return;
    const byStep = new Map();
    columns.forEach(function (column, c) {
      const s = series[column[0]];
      s.step.forEach(function (step, i) {
        if (!window.EchoChartView.inStepRange(step)) return;
        if (!byStep.has(step)) byStep.set(step, []);
        byStep.get(step)[c] = s.value[i];
      });
    });
    const steps = Array.from(byStep.keys()).sort(function (a, b) { return a - b; });
    const headers = ["step"].concat(columns.map(function (column) { return column[1]; }));
    window.EchoChartView.fillTable(document.getElementById("collapse-table"),
      "Template collapse: the measured steps" + window.EchoChartView.rowsCaption(steps.length, headers.length), headers,
      steps.map(function (step) {
        return [String(step)].concat(columns.map(function (_, c) { return window.EchoChartView.cellText(byStep.get(step)[c]); }));
      }));
  }
  tableDetails.addEventListener("toggle", function () { if (drawnSeries) showTable(drawnSeries); });

  function draw(series) {
    drawnSeries = series;
    const mi = series["collapse/mi_estimate"];
    const empty = !mi || mi.step.length === 0;
    const note = document.getElementById("collapse-no-data");
    note.hidden = !empty;
    if (empty) note.textContent = whyNoData(series["collapse/valid_thinking_rate"]);
    document.getElementById("collapse-charts").hidden = empty;
    const few = document.getElementById("collapse-few-prompts");
    few.textContent = empty ? "" : fewPrompts(series["collapse/retrieval_chance"]);
    few.hidden = !few.textContent;
    showTable(empty ? {} : series);
    if (empty) return;
    // r: room for the right axis's title ("retrieval, thinking rate" was cut off at 50 px)
    const layout = { margin: { t: 30, r: 70, b: 40, l: 50 }, height: 320, legend: { orientation: "h", y: -0.3 } };
    const miPlot = document.getElementById("collapse-mi");
    // x: the page's step range and cursor (chart_view.js stepAxis)
    // Only the series the run logs (an imported run may have the MI estimate alone), each named in the legend.
    const traces = [
      line(series, "collapse/mi_estimate", "MI estimate (nats)", { color: "#1f77b4" }),
      line(series, "collapse/retrieval_acc", "retrieval accuracy", { color: "#ff7f0e" }),
      line(series, "collapse/retrieval_chance", "chance", { color: "#7f7f7f", dash: "dash" }),
      // Logged on every measured step, estimate or not: where the MI line stops, this says why (0: no
      // reply reasons any more, so there is nothing to score).
      line(series, "collapse/valid_thinking_rate", "valid thinking rate", { color: "#2ca02c", dash: "dot" }),
    ].filter(function (trace) { return trace.x.length > 0; });
    const rightAxis = traces.some(function (trace) { return trace.yaxis === "y2"; }) ? {
      yaxis2: { title: { text: "retrieval, thinking rate" }, overlaying: "y", side: "right", range: [0, 1], dtick: 0.25,
                tickformat: ".0%", showgrid: false, automargin: true },
    } : {};
    Plotly.react(miPlot, traces, Object.assign({}, layout, {
      title: { text: "Input dependence", font: { size: 14 } },
      showlegend: true,
      // Ticks as 1e-4, not "100μ" nats; automargin: a wide tick label pushes the axis title out, not over it
      yaxis: { title: { text: "MI (nats)" }, rangemode: "tozero", exponentformat: "e", automargin: true },
    }, rightAxis, window.EchoChartView.stepAxis("collapse")), window.EchoChartView.stepConfig);
    window.EchoChartView.joinStepAxis(miPlot, function () { draw(drawnSeries); });
    const regime = pairs(series, "collapse/mi_estimate", "collapse/conditional_entropy");
    const regimePlot = document.getElementById("collapse-regime");
    regimePlot.hidden = regime.step.length === 0;
    document.getElementById("collapse-regime-no-data").hidden = !regimePlot.hidden;
    if (regimePlot.hidden) return;
    // The colour scale spans the steps measured (at least one step wide: one point read -0.4..0.4).
    const first = Math.min.apply(null, regime.step), last = Math.max.apply(null, regime.step);
    Plotly.react(regimePlot, [{
      x: regime.x, y: regime.y, mode: "markers", name: "measured steps",
      text: regime.step.map(function (s) { return "step " + s; }), hoverinfo: "text+x+y",
      marker: { size: 9, color: regime.step, colorscale: "Viridis", showscale: true,
                cmin: first, cmax: Math.max(last, first + 1),
                colorbar: Object.assign({ title: { text: "step" } },
                                        window.EchoChartView.wholeTicks(first, Math.max(last, first + 1))) },
    }], Object.assign({}, layout, {
      title: { text: "Regime: grounded (right) vs templated (left)", font: { size: 14 } },
      xaxis: { title: { text: "MI estimate (nats)" }, rangemode: "tozero", exponentformat: "e", automargin: true },
      yaxis: { title: { text: "conditional entropy (nats/token)" }, exponentformat: "e", automargin: true },
      uirevision: "collapse",
    }), window.EchoChartConfig);
  }

  async function refresh() {
    const series = await load();
    if (series !== null) draw(series);
    if (!page.finished) window.setTimeout(refresh, POLL_MS);
  }

  refresh();
})();
