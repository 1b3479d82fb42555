// Run page: the heat strip of train/reward_std_hist, every group's in-group reward std per step (the
// StarPO-S filter's input). The server bins it (/api/runs/<id>/reward-std-hist: counts per step and std
// bin); this draws the counts as a Plotly heatmap, steps across, std bins up, and redraws while the run
// is live.
(function () {
  "use strict";

  const page = JSON.parse(document.getElementById("run-page-data").textContent);
  const plot = document.getElementById("reward-std-hist-plot");
  const empty = document.getElementById("reward-std-hist-empty");
  const POLL_MS = 5000;
  if (!plot || !page.urls.reward_std_hist) { return; }

  function binCentres(edges) {
    return edges.slice(1).map(function (edge, i) { return (edges[i] + edge) / 2; });
  }

  let drawnBody = null;  // the last answer drawn, redrawn when the page's view changes
  const NO_DATA = empty.textContent;  // a finished run that logged none
  // A run trained here logs the key every step; another trainer's script may never log it.
  const WAITING = page.key_count === null
    ? "No step logged yet: the strip fills in as the run trains."
    : "No per-group reward std logged so far (train/reward_std_hist): the strip fills in if this run's script logs it.";

  // The strip's text version: a row per step in the page's zoom, its groups in all and in each std bin
  // (the bins no step fills left out). Built while its <details> is open.
  const tableDetails = document.getElementById("reward-std-hist-table-details");

  function showTable(body) {
    tableDetails.hidden = !body.steps.length;
    if (!body.steps.length || !tableDetails.open) return;
    const filled = body.bin_edges.slice(1).map(function (_, b) {
      return body.counts.some(function (row) { return row[b] > 0; });
    });
    const bins = filled.flatMap(function (isFilled, b) { return isFilled ? [b] : []; });
    const rows = [];
    body.steps.forEach(function (step, i) {
      if (!window.EchoChartView.inStepRange(step)) return;
      const counts = body.counts[i];
      rows.push([String(step), String(counts.reduce(function (a, b) { return a + b; }, 0))]
        .concat(bins.map(function (b) { return String(counts[b]); })));
    });
    const edge = window.EchoChartView.cellText;
    const headers = ["step", "groups"].concat(bins.map(function (b) {
      return "std " + edge(body.bin_edges[b]) + "–" + edge(body.bin_edges[b + 1]);
    }));
    const caption = "Groups per in-group reward std bin" + window.EchoChartView.rowsCaption(rows.length, headers.length) +
      ": a column per bin any step fills";
    window.EchoChartView.fillTable(document.getElementById("reward-std-hist-table"), caption, headers, rows);
  }
  tableDetails.addEventListener("toggle", function () { if (drawnBody) showTable(drawnBody); });

  function draw(body) {
    drawnBody = body;
    const drawn = body.steps.length > 0;
    empty.hidden = drawn;
    plot.hidden = !drawn;
    showTable(body);
    if (!drawn) {
      empty.textContent = body.run.finished ? NO_DATA : WAITING;
      return;
    }
    const bins = binCentres(body.bin_edges);
    // z[bin][step]: Plotly's heatmap rows are y
    const z = bins.map(function (_, b) { return body.counts.map(function (row) { return row[b]; }); });
    const trace = {
      type: "heatmap", x: body.steps, y: bins, z: z, colorscale: "Viridis",
      colorbar: { title: { text: "groups" } },
      hovertemplate: "step %{x}<br>std ≈ %{y:.3~g}<br>%{z} groups<extra></extra>",
    };
    // x: the page's step range and cursor (chart_view.js stepAxis)
    const layout = Object.assign({
      title: { text: "In-group reward std per group" },
      yaxis: { title: { text: "in-group reward std" } },
      margin: { t: 40, r: 10, b: 40, l: 60 }, height: 260,
    }, window.EchoChartView.stepAxis("std-hist"));
    Plotly.react(plot, [trace], layout, window.EchoChartView.stepConfig);
    window.EchoChartView.joinStepAxis(plot, function () { draw(drawnBody); });
  }

  async function load() {
    let body;
    try {
      const response = await fetch(page.urls.reward_std_hist, {
        credentials: "same-origin", headers: { Accept: "application/json" },
      });
      if (!response.ok) { return; }  // not the user's run any more: nothing to draw
      body = await response.json();
    } catch (error) {  // the server restarting: try again, as the charts' polling does
      window.setTimeout(load, POLL_MS);
      return;
    }
    draw(body);
    if (!body.run.finished) { window.setTimeout(load, POLL_MS); }
  }

  load();
})();
