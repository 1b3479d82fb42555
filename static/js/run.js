// Run page: charts from the metrics API, live while the run is queued or running.
//
// The first request gets every series downsampled to <= MAX_POINTS buckets (line = last point of a
// bucket, band = its min..max, so spikes stay visible). While the run is live, every POLL_MS the page
// asks only for points after the last step it has (`after=`), appends them, and redraws with
// Plotly.react under a fixed `uirevision`, which keeps the user's zoom and pan. Plotly.react skips a
// trace whose arrays are the same objects it drew last time, so every redraw hands it copies and a
// new `datarevision`. Polling stops when the API says the run has finished.
//
// The x axis is the step or the training time (the running sum of the trainer's time/step_s, or of veRL's
// or TRL's seconds per step for a run trained with them: points carry no timestamps). A zoom on one chart
// zooms every chart; the x axis, the zoom range and the smoothing live in the URL
// (?x=time&xrange=10,50&smooth=0.6), so a copied address opens the same view.
// Each chart can show its points as a table instead.
//
// "Detector's view" overlays, on each chart of a metric a detector rule judges, the series that rule used
// (its own smoothing, with the run's parameters), so the value an event quotes can be read off the chart
// at the event's step. The server computes it by replaying the run through the detector
// (/api/runs/<id>/detector-inputs): the page has no second copy of the rules' arithmetic.
(function () {
  "use strict";

  const page = JSON.parse(document.getElementById("run-page-data").textContent);
  const POLL_MS = 2000;
  const MAX_POINTS = 1000;
  const LINE_COLORS = ["#1f77b4", "#ff7f0e"];
  const BAND_COLORS = ["rgba(31,119,180,0.2)", "rgba(255,127,14,0.2)"];
  // A detector event's colour by level, from echolab.css (--event-warning, ...), where the markers' key takes them.
  const EVENT_COLORS = {};
  ["info", "warning", "collapse", "resolved"].forEach(function (level) {
    EVENT_COLORS[level] = getComputedStyle(document.documentElement).getPropertyValue("--event-" + level).trim();
  });
  // Seconds per step, the clock of the time axis: time/step_s, or another trainer's (Run.clock_key).
  const TIME_KEY = page.clock_key;
  const MAX_KEYS = 100;  // webapp.metrics.api.MAX_KEYS: the most keys one metrics request may ask for
  const TRAINED_ELSEWHERE = page.key_count !== null;  // the view counts only such a run's keys
  const KEYS = page.charts.flatMap(function (chart) { return chart.keys; });
  if (KEYS.indexOf(TIME_KEY) < 0) KEYS.push(TIME_KEY);
  // A series this short draws a marker on every point: a single point has no line to draw.
  const MARKERS_BELOW = 30;
  // The detector's series: one colour per rule (in the API's rule order), dotted, over the metric's own.
  const RULE_COLORS = ["#6a3d9a", "#b15928", "#1b7837", "#c51b7d", "#35978f", "#525252", "#8c510a", "#2166ac", "#762a83"];
  const DETECTOR_POLL_MS = 10000;  // while live, a replay of the whole run at most this often

  // The user's panel choices, kept in this browser: folded sections, each chart's y scale.
  const prefs = window.EchoChartView.panelPrefs();
  function isLog(chart) { return window.EchoChartView.isLog(prefs, chart); }

  const view = window.EchoChartView.read();
  const state = {
    xmode: view.xmode,    // the x axis: "step" or "time" (minutes of training)
    xrange: view.xrange,  // every chart's x range, in the axis' units; null: the whole run
    tables: {},      // chart id -> true while the chart shows as a table
    syncing: false,  // true while the page itself redraws, so its own relayouts are not taken as a zoom
    series: {},      // key -> {step, value, min, max, downsampled}
    lastStep: null,  // highest step received over all keys: the next poll's `after`, unless...
    // ...the run's own step is lower: an MLflow script's key logged without steps is numbered in arrival
    // order past the run's steps (a loss per batch), and `after` its numbers skipped the steps still to come.
    runStep: null,
    // The run's attempt and rewrites as first polled. A later attempt resumes from a checkpoint and logs
    // again steps this page holds, with new values; a rewrite is a step sent again or late (a script's
    // retry, an evaluation logged afterwards). From then on each poll fetches the whole (downsampled)
    // series again, as the compare page always does, instead of the steps after the last one held.
    attempt: null,
    rewrites: null,
    heardSecondsAgo: null,  // seconds since the run was last heard from, by the server's clock
    // A zoom into a run held as buckets: its steps fetched again over the zoomed range alone ({from, to,
    // series}), drawn in place of the held buckets there, so the zoom shows the run's own points.
    detail: null,
    detailLoads: 0,
    refetch: false,
    events: [],
    smoothing: view.smoothing,
    finished: page.finished,
    status: page.status,  // as the page was drawn: its header (started, worker, delete) says that state
    revision: 0,     // bumped whenever held data changes: the charts' datarevision
    cursor: page.cursor,  // a step marked on every chart (?step=, or a click in the events list)
    // The detector's view: on, the rules' series ({rule, metric, smoothing, step, value}), the data
    // revision and time they were fetched at.
    detector: { on: view.detector, rules: [], revision: -1, fetchedAt: 0 },
  };

  function escapeHtml(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  // Seconds as the server's `duration` filter writes them: "1h 05m", "3m 20s", "45s".
  function duration(seconds) {
    const total = Math.max(0, Math.round(seconds));
    const hours = Math.floor(total / 3600), minutes = Math.floor((total % 3600) / 60), secs = total % 60;
    const two = function (n) { return String(n).padStart(2, "0"); };
    if (hours) return hours + "h " + two(minutes) + "m";
    if (minutes) return minutes + "m " + two(secs) + "s";
    return secs + "s";
  }

  const getJson = window.EchoChartView.getJson;

  // A run may log hundreds of keys (veRL logs over 100): as many requests as the addresses need.
  function metricsUrls() {
    return window.EchoChartView.keyUrls(function () {
      const url = new URL(page.urls.metrics, window.location.origin);
      url.searchParams.set("max_points", String(MAX_POINTS));
      if (state.lastStep !== null && !state.refetch) {
        const after = state.runStep === null ? state.lastStep : Math.min(state.lastStep, state.runStep);
        url.searchParams.set("after", String(after));
      }
      return url;
    }, KEYS, MAX_KEYS);
  }

  // Append the points newer than what we hold; a raw point is its own min and max.
  function merge(key, incoming) {
    const held = state.series[key] || (state.series[key] = { step: [], value: [], min: [], max: [], sums: [], downsampled: false });
    const last = held.step.length ? held.step[held.step.length - 1] : -Infinity;
    held.downsampled = held.downsampled || incoming.downsampled;
    incoming.step.forEach(function (step, i) {
      if (step <= last) return;
      state.revision += 1;
      const value = incoming.value[i];
      held.step.push(step);
      held.value.push(value);
      held.min.push(incoming.downsampled ? incoming.min[i] : value);
      held.max.push(incoming.downsampled ? incoming.max[i] : value);
      held.sums.push(incoming.sums ? incoming.sums[i] : null);
      if (state.lastStep === null || step > state.lastStep) state.lastStep = step;
    });
  }

  // The zoomed range's steps, when the held series of a key are buckets there: [first, last], else null.
  // By step only (a range in minutes would need the clock of every step).
  function detailRange() {
    if (state.xmode !== "step" || !state.xrange) return null;
    if (!Object.values(state.series).some(function (s) { return s.downsampled; })) return null;
    return window.EchoChartView.zoomedSteps(state.xrange);
  }

  // Fetch the zoomed range's steps (again while the run is live: its last steps may be in it), then draw.
  async function loadDetail(live) {
    const range = detailRange();
    const held = state.detail;
    if (!range) {
      if (held) { state.detail = null; state.revision += 1; render(); }
      return;
    }
    if (held && held.from === range[0] && held.to === range[1] && !live) return;
    const ticket = ++state.detailLoads;  // a newer zoom supersedes this one
    const bodies = await Promise.all(window.EchoChartView.keyUrls(function () {
      const url = new URL(page.urls.metrics, window.location.origin);
      url.searchParams.set("max_points", String(MAX_POINTS));
      url.searchParams.set("after", String(range[0] - 1));
      url.searchParams.set("through", String(range[1]));
      return url;
    }, KEYS, MAX_KEYS).map(getJson));
    if (ticket !== state.detailLoads) return;
    const series = {};
    bodies.forEach(function (body) { Object.assign(series, body.series); });
    state.detail = { from: range[0], to: range[1], series: series };
    state.revision += 1;
    render();
  }

  // The series a chart draws and tables: the held one, with the zoomed range's own points in place of the
  // held buckets in that range (their min and max are the point itself, unless the range too is long).
  function seriesOf(key) {
    const s = state.series[key];
    const detail = state.detail, d = detail && detail.series[key];
    if (!s || !d || !d.step.length) return s;
    const out = { step: [], value: [], min: [], max: [], sums: [], downsampled: d.downsampled };
    function add(from, i, bucketed) {
      out.step.push(from.step[i]);
      out.value.push(from.value[i]);
      out.min.push(bucketed ? from.min[i] : from.value[i]);
      out.max.push(bucketed ? from.max[i] : from.value[i]);
      out.sums.push(null);
    }
    s.step.forEach(function (step, i) { if (step < detail.from) add(s, i, s.downsampled); });
    d.step.forEach(function (step, i) { add(d, i, d.downsampled); });
    s.step.forEach(function (step, i) { if (step > detail.to) add(s, i, s.downsampled); });
    return out;
  }

  // Step -> minutes of training: EchoChartView.trainingClock over the run's clock key.
  function clock() {
    return window.EchoChartView.trainingClock(state.series[TIME_KEY]);
  }

  // The x of a step on the chosen axis.
  function xOf(step) {
    if (state.xmode !== "time") return step;
    return state.time ? Number(window.EchoChartView.minutesAt(state.time, step).toFixed(4)) : null;
  }

  // Every chart's x range while the page is not zoomed: the span of all its series (padded so the end
  // markers show whole), so that a chart with fewer or later points (validation every 20 steps, a key
  // logged late, an empty chart) lines up with the others under the cursor and the event lines.
  function dataSpan() {
    let low = Infinity, high = -Infinity;
    Object.values(state.series).forEach(function (s) {
      if (!s.step.length) return;
      const first = xOf(s.step[0]), last = xOf(s.step[s.step.length - 1]);
      if (first !== null) low = Math.min(low, first);
      if (last !== null) high = Math.max(high, last);
    });
    return window.EchoChartView.paddedSpan(low, high);
  }

  function seriesTraces(key, index) {
    const s = seriesOf(key);
    if (!s || !s.step.length) return [];
    const color = LINE_COLORS[index % LINE_COLORS.length];
    const steps = s.step.map(xOf);
    const mode = steps.length < MARKERS_BELOW ? "lines+markers" : "lines";
    const traces = [];
    if (s.downsampled) {
      traces.push({ x: steps, y: s.max.slice(), mode: "lines", line: { width: 0, color: color }, hoverinfo: "skip",
                    showlegend: false, legendgroup: key, connectgaps: false });
      traces.push({ x: steps, y: s.min.slice(), mode: "lines", line: { width: 0, color: color }, fill: "tonexty",
                    fillcolor: BAND_COLORS[index % BAND_COLORS.length], hoverinfo: "skip", showlegend: false,
                    legendgroup: key, connectgaps: false });
    }
    const smoothed = state.smoothing > 0;
    const name = window.EchoChartView.plainText(window.EchoChartView.shortName(key));
    traces.push({ x: steps, y: s.value.slice(), mode: mode, name: name, legendgroup: key,
                  line: { color: color, width: 1.5 }, marker: { color: color, size: 5 },
                  opacity: smoothed ? 0.3 : 1, showlegend: !smoothed, connectgaps: false });
    if (smoothed) {
      traces.push({ x: steps, y: window.EchoSmoothing.ema(s.value, state.smoothing), mode: mode,
                    name: name + " (smoothed)", legendgroup: key, line: { color: color, width: 2 },
                    marker: { color: color, size: 5 }, connectgaps: false });
    }
    return traces;
  }

  // The rules that judge `key`, each with its colour, while the detector's view is on.
  function judging(key) {
    if (!state.detector.on) return [];
    return state.detector.rules.map(function (entry, index) {
      return { entry: entry, color: RULE_COLORS[index % RULE_COLORS.length] };
    }).filter(function (judged) { return judged.entry.metric === key && judged.entry.step.length; });
  }

  function ruleLabel(entry) { return "detector: " + entry.rule + " (smoothing " + entry.smoothing + ")"; }

  function detectorTraces(key) {
    return judging(key).map(function (judged) {
      const entry = judged.entry;
      return { x: entry.step.map(xOf), y: entry.value.slice(), name: ruleLabel(entry),
               mode: entry.step.length < MARKERS_BELOW ? "lines+markers" : "lines",
               line: { color: judged.color, width: 2, dash: "dot" }, marker: { color: judged.color, size: 5 },
               customdata: entry.step.slice(), hovertemplate: entry.rule + " judged %{y:.4~g} at step %{customdata}<extra></extra>",
               connectgaps: false, legendgroup: "detector-" + entry.rule };
    });
  }

  // Fetch the rules' series when the view is on and the run's data changed since (at most every
  // DETECTOR_POLL_MS while live, as each fetch replays the whole run); `force` on the first turn-on.
  async function loadDetectorView(force) {
    const detector = state.detector;
    const note = document.getElementById("detector-view-state");
    if (!detector.on || (!force && detector.revision === state.revision)) return;
    if (!force && Date.now() - detector.fetchedAt < DETECTOR_POLL_MS) return;
    const revision = state.revision;
    detector.fetchedAt = Date.now();
    note.hidden = false;
    note.textContent = "replaying the run through the detector...";
    try {
      const body = await getJson(page.urls.detector_inputs);
      detector.rules = body.rules;
      detector.revision = revision;
      const drawn = body.rules.filter(function (entry) {
        return entry.step.length && KEYS.indexOf(entry.metric) >= 0;
      });
      note.textContent = drawn.length ? "dotted: each rule's series as it judged it, over " + body.steps + " steps"
                                      : state.finished ? "no rule judged this run's metrics" : "no rule has judged this run's metrics yet";
    } catch (error) {
      detector.rules = [];
      note.textContent = "detector's view unavailable: " + error.message;
    }
  }

  // The values a detector rule saw, as "name=value, ...", numbers to 4 significant digits.
  function signalText(event) {
    return Object.entries(event.signals || {}).map(function (pair) {
      const value = pair[1];
      const text = typeof value === "number" ? String(Number(value.toPrecision(4))) : JSON.stringify(value);
      return pair[0] + "=" + text;
    }).join(", ");
  }

  function eventHover(event) {
    const signals = signalText(event);
    return "<b>" + escapeHtml(window.EchoChartView.eventTitle(event)) + "</b> at step " + event.step + "<br>" +
      escapeHtml(event.message) + (signals ? "<br>" + escapeHtml(signals) : "");
  }

  function eventLayer() {
    const shapes = state.events.map(function (event) {
      return { type: "line", xref: "x", yref: "paper", x0: xOf(event.step), x1: xOf(event.step), y0: 0, y1: 1,
               line: { color: EVENT_COLORS[event.level] || "#888", width: 1, dash: event.level === "collapse" ? "solid" : "dot" } };
    });
    if (state.cursor !== null) {
      shapes.push({ type: "line", xref: "x", yref: "paper", x0: xOf(state.cursor), x1: xOf(state.cursor), y0: 0, y1: 1,
                    line: { color: "#374151", width: 1.5, dash: "dash" } });
    }
    const colours = state.events.map(function (e) { return EVENT_COLORS[e.level] || "#888"; });
    const markers = state.events.length ? [{
      x: state.events.map(function (e) { return xOf(e.step); }),
      y: state.events.map(function () { return 0.97; }),
      yaxis: "y2", mode: "markers", name: "detector events", showlegend: false, cliponaxis: false,  // whole at the top edge
      marker: { symbol: state.events.map(function (e) { return window.EchoChartView.eventSymbol(e.level); }), size: 10,
                line: { width: 2, color: colours }, color: colours },
      hovertext: state.events.map(eventHover), hoverinfo: "text",
    }] : [];
    return { shapes: shapes, markers: markers };
  }

  function emptyNote() {
    return { text: state.finished ? "not logged by this run" : "no data yet", xref: "paper", yref: "paper",
             x: 0.5, y: 0.5, showarrow: false };
  }

  function noClockNote() {
    return { text: "no " + TIME_KEY + " logged: nothing to draw against training time", xref: "paper", yref: "paper",
             x: 0.5, y: 0.5, showarrow: false };
  }

  function nonNegative(chart) {
    return chart.keys.every(function (key) {
      const s = state.series[key];
      return !s || s.value.every(function (v) { return v === null || v >= 0; });
    });
  }

  // How many of the chart's values a log axis leaves out.
  function hiddenByLog(chart) {
    if (!isLog(chart)) return 0;
    return chart.keys.reduce(function (count, key) {
      const s = state.series[key];
      return count + (s ? window.EchoChartView.notPositive(s.value) : 0);
    }, 0);
  }

  function cursorLabel() {
    return { text: "step " + state.cursor, x: xOf(state.cursor), xref: "x", y: 1, yref: "paper", yanchor: "bottom",
             showarrow: false, font: { size: 11, color: "#374151" } };
  }

  const X_TITLES = { step: "step", time: "training time (minutes, sum of " + TIME_KEY + ")" };

  // A run may log a thousand keys (a norm per layer): on a page of more than LAZY_FROM charts each chart is
  // drawn when it comes within a screen or two of the window (or its folded section opens), not all at
  // once (1,500 charts drawn together froze the tab for 46 s).
  const LAZY_FROM = 40;
  const lazy = page.charts.length > LAZY_FROM;
  const near = new Set();   // ids of the charts near the window
  const stale = new Set();  // ids of the charts the last render left undrawn, being away from it
  let drawn = null;         // what the last render drew every chart with: its events layer and x span

  const rangeForm = window.EchoChartView.rangeForm(zoomTo);

  function render() {
    state.time = clock();
    drawn = { events: eventLayer(), span: dataSpan() };
    state.syncing = true;
    const notLogged = page.charts.filter(function (chart) { return !renderChart(chart); });
    state.syncing = false;
    showNotLogged(notLogged.map(function (chart) { return chart.title; }));
    window.EchoChartView.share({ xmode: state.xmode, xrange: state.xrange, span: drawn.span, cursor: state.cursor });
    rangeForm.show(state.xrange, state.xmode === "time" ? "minutes" : "steps");
    const note = document.getElementById("x-axis-note");
    note.hidden = state.xmode !== "time" || state.time !== null;
    note.textContent = state.finished ? "this run logged no " + TIME_KEY + ": no training time to draw against"
                                      : "this run has logged no " + TIME_KEY + " yet: no training time to draw against";
    // A finished run without a clock (most imports) has no training time to offer: the option says so,
    // unless the address asked for it (then the note above says why the charts are empty).
    const timeOption = document.querySelector("#x-axis option[value=time]");
    const clockless = state.finished && state.time === null;
    timeOption.disabled = clockless && state.xmode !== "time";
    timeOption.textContent = clockless ? "training time (not logged)" : "training time";
  }

  // One chart as the last render sees the run; false when it is left out (its keys not logged).
  function renderChart(chart) {
    const events = drawn.events;
    const plot = document.getElementById("chart-" + chart.id);
    showTable(chart, plot);
    if (state.tables[chart.id]) return true;  // drawn when it shows again
    // Against training time a run without a clock has no x at all: no trace (Plotly would draw the
    // values against their index), the chart says why.
    const noClock = state.xmode === "time" && state.time === null;
    const built = noClock ? [] : chart.keys.flatMap(seriesTraces).concat(chart.keys.flatMap(detectorTraces));
    const traces = isLog(chart) ? built.map(window.EchoChartView.positiveTrace) : built;
    const empty = !traces.length;
    const hidden = noClock ? 0 : hiddenByLog(chart);
    // A chart of keys the run has not logged is left out (an imported or external run drew a
    // screenful of empty axes), and named in one line above the charts: once the run has finished, or
    // from the start for a run trained elsewhere, whose script may never log our keys. A run trained
    // here logs every standard key: its empty charts say "no data yet" until the first step.
    const absent = empty && !hidden && !noClock && (state.finished || TRAINED_ELSEWHERE);
    plot.closest("figure").hidden = absent;
    if (absent) return false;
    if (lazy && !near.has(chart.id)) {
      stale.add(chart.id);
      return true;
    }
    stale.delete(chart.id);
    const layout = {
      title: { text: window.EchoChartView.plainText(window.EchoChartView.shortName(chart.title)), font: { size: 14 } },
      uirevision: "run-" + page.run + "-" + state.xmode,  // keeps the y zoom and legend across redraws
      datarevision: state.revision + "-" + state.xmode,  // new x values: Plotly diffs data only on a new revision
      margin: { l: 50, r: 10, t: 36, b: 36 },
      height: 280,
      // A chart with nothing to draw shows its note, not a made-up scale (Plotly's -1..6 and -1..4): the x
      // axis only when other charts give it a span, so a step still sits where it does on theirs.
      xaxis: Object.assign(window.EchoChartView.xaxis(X_TITLES[state.xmode], state.xrange || drawn.span, state.xmode === "step"),
                           { visible: !(empty && !(state.xrange || drawn.span)) }),
      // Values that are never negative (a fraction, a length) get no negative axis: Plotly drew a chart
      // of zeros from -1 to 1.
      yaxis: window.EchoChartView.yaxis(isLog(chart), Object.assign(
        { rangemode: nonNegative(chart) ? "nonnegative" : "normal", visible: !empty },
        window.EchoChartView.yRange(traces, isLog(chart), chart.bounds))),
      yaxis2: { overlaying: "y", range: [0, 1], visible: false, fixedrange: true },
      shapes: noClock ? [] : events.shapes,  // no x for an event either: its line would cross the chart
      // Its top below the axis title (Plotly makes room for it under the plot): hung from -0.25 of
      // the plot's height it reached up into the title when it wrapped on a narrow window.
      legend: { orientation: "h", y: -0.38, yanchor: "top" },
      annotations: (noClock ? [noClockNote()] : empty ? [emptyNote()] : state.cursor === null ? [] : [cursorLabel()])
        .concat(hidden ? [window.EchoChartView.logNote(hidden)] : []),
    };
    Plotly.react(plot, traces.concat(empty ? [] : events.markers), layout, window.EchoChartView.stepConfig);
    if (!plot.dataset.zoomSynced) {
      plot.dataset.zoomSynced = "true";
      plot.on("plotly_relayout", zoomed);
      window.EchoChartView.wholeOnDoubleClick(plot, function () { zoomTo(null); });
    }
    return true;
  }

  // The charts that come near the window (scrolled to, a section opened, shown again) are drawn then.
  function watchNearness() {
    const charts = new Map(page.charts.map(function (chart) { return ["chart-" + chart.id, chart]; }));
    const observer = new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        const id = charts.get(entry.target.id).id;
        if (entry.isIntersecting) near.add(id); else near.delete(id);
      });
      if (!drawn) return;  // the first render draws them
      state.syncing = true;
      page.charts.forEach(function (chart) { if (stale.has(chart.id) && near.has(chart.id)) renderChart(chart); });
      state.syncing = false;
    }, { rootMargin: "1200px 0px" });
    charts.forEach(function (chart, id) { observer.observe(document.getElementById(id)); });
  }

  function showNotLogged(titles) {
    const note = document.getElementById("not-logged");
    note.hidden = !titles.length;
    // A run that ended before its first step logged nothing: not a list of every chart as if it logged others
    note.textContent = titles.length === page.charts.length && state.finished
      ? "This run logged no metrics before it ended, so there are no charts."
      : "Not logged by this run" + (state.finished ? "" : " so far") + ", so not drawn: " + titles.join(", ") + ".";
    document.querySelectorAll(".chart-section").forEach(function (section) {
      section.hidden = !section.querySelector("figure.chart:not([hidden])");
    });
  }

  // A zoom, pan or double-click (back to the whole run) on one chart: every chart and the URL follow.
  function zoomed(change) {
    if (state.syncing) return;
    const range = window.EchoChartView.zoomedRange(change);
    if (range === undefined) return;  // a y-only zoom stays on its chart
    zoomTo(range);
  }

  function zoomTo(range) {
    state.xrange = range;
    saveView();
    render();
    followZoom();
  }

  // After a zoom (outside a poll, which says its own failures): the zoomed range's points, or why not.
  function followZoom() {
    loadDetail(false).catch(function (error) {
      document.getElementById("poll-state").textContent = "could not load the zoomed steps (" + error.message + ")";
    });
  }

  // The panels drawn by their own scripts over steps (heat strip, collapse panel) zoom the page too.
  document.addEventListener("echolab:zoom", function (event) { zoomTo(event.detail.xrange); });

  // The view in the address bar (the cursor's ?step= is setCursor's).
  function saveView() {
    window.EchoChartView.save({ xmode: state.xmode, xrange: state.xrange, smoothing: state.smoothing, detector: state.detector.on });
  }

  // "Show as table": the chart's points (and smoothed values) as rows, within the zoom range.
  function showTable(chart, plot) {
    const box = window.EchoChartView.tableInsteadOf(plot, Boolean(state.tables[chart.id]), chart.title + " as a table");
    if (!box) return;
    const keys = chart.keys.filter(function (key) { return state.series[key] && state.series[key].step.length; });
    const shown = {};
    keys.forEach(function (key) { shown[key] = seriesOf(key); });
    const judged = chart.keys.flatMap(judging);
    const rows = {};
    keys.forEach(function (key, k) {
      const s = shown[key];
      const smooth = state.smoothing > 0 ? window.EchoSmoothing.ema(s.value, state.smoothing) : null;
      s.step.forEach(function (step, i) {
        const row = rows[step] || (rows[step] = {});
        row[k] = s.value[i];
        if (smooth) row["s" + k] = smooth[i];
        if (s.downsampled) { row["lo" + k] = s.min[i]; row["hi" + k] = s.max[i]; }
      });
    });
    // A downsampled key's row is a bucket of steps: its last step's value, and its lowest and highest (a
    // one-step spike inside it shows there, as in the chart's band).
    const bucketed = keys.filter(function (key) { return shown[key].downsampled; });
    judged.forEach(function (rule, r) {
      rule.entry.step.forEach(function (step, i) {
        (rows[step] || (rows[step] = {}))["d" + r] = rule.entry.value[i];
      });
    });
    const headers = ["step"].concat(state.time ? ["minutes"] : []);
    keys.forEach(function (key) {
      headers.push(key);
      if (state.smoothing > 0) headers.push(key + " (smoothed)");
      if (shown[key].downsampled) headers.push(key + " (bucket min)", key + " (bucket max)");
    });
    judged.forEach(function (rule) { headers.push(ruleLabel(rule.entry)); });
    const format = window.EchoChartView.cellText;
    const steps = Object.keys(rows).map(Number).sort(function (a, b) { return a - b; }).filter(function (step) {
      const x = xOf(step);
      return !state.xrange || (x !== null && x >= state.xrange[0] && x <= state.xrange[1]);
    });
    const caption = chart.title + (keys.length ? window.EchoChartView.rowsCaption(steps.length, headers.length) : ": no data") +
      (bucketed.length ? ". Downsampled: each row ends a bucket of steps, with the value at its last step and " +
        "the bucket's lowest and highest; the run's export has every point." : "");
    window.EchoChartView.fillTable(box, caption, headers, steps.map(function (step) {
      const values = [String(step)].concat(state.time ? [format(window.EchoChartView.minutesAt(state.time, step))] : []);
      keys.forEach(function (key, k) {
        values.push(format(rows[step][k]));
        if (state.smoothing > 0) values.push(format(rows[step]["s" + k]));
        if (shown[key].downsampled) values.push(format(rows[step]["lo" + k]), format(rows[step]["hi" + k]));
      });
      judged.forEach(function (rule, r) { values.push(format(rows[step]["d" + r])); });
      return values;
    }));
  }

  // The events list: one row per detector event; a click on its step moves the cursor there.
  // The first collapse beside the run's status, as the server drew it (templates/runs/detail.html).
  function showCollapse() {
    const badge = document.getElementById("run-collapse");
    const first = state.events.filter(function (event) { return event.level === "collapse"; })
      .sort(function (a, b) { return a.step - b.step; })[0];
    badge.hidden = !first;
    if (!first) return;
    badge.textContent = "collapsed at step " + first.step;
    badge.href = "?step=" + first.step;
  }

  function showEvents() {
    showCollapse();
    const table = document.getElementById("event-list");
    const drawnKey = JSON.stringify([state.events, state.cursor]);
    if (table.dataset.drawn === drawnKey) return;  // unchanged: keep the rows (and keyboard focus)
    table.dataset.drawn = drawnKey;
    // The rows are drawn anew: a focused step button is focused again in its new row (Enter on one left
    // the focus on the page's body, and the next Tab went back to the first event).
    const focused = table.contains(document.activeElement) ? document.activeElement.dataset.event : null;
    table.hidden = !state.events.length;
    document.getElementById("events-empty").hidden = state.events.length > 0;
    document.getElementById("event-key").hidden = !state.events.length;
    const labels = Array.from(table.tHead.rows[0].cells, function (th) { return th.textContent; });
    table.tBodies[0].replaceChildren.apply(table.tBodies[0], state.events.map(function (event) {
      const row = document.createElement("tr");
      row.classList.toggle("at-cursor", event.step === state.cursor);
      if (event.step === state.cursor) row.setAttribute("aria-current", "true");  // not by its colour alone
      // as the server writes a time on every page (webapp/formats): 2026-12-05 08:46, UTC
      const cells = [event.created_at.slice(0, 16).replace("T", " "), null, event.level, event.rule, event.message,
                     signalText(event)];
      cells.forEach(function (text, i) {
        const cell = document.createElement("td");
        cell.dataset.label = labels[i];  // the column's name, on a phone where each row is a card
        if (i === 1) {
          const button = document.createElement("button");
          button.type = "button";
          button.className = "link-button";
          button.textContent = String(event.step);
          button.setAttribute("aria-label", "Show step " + event.step + " on every chart");
          button.dataset.event = String(event.id);
          button.dataset.step = String(event.step);
          button.addEventListener("click", function () { setCursor(event.step); });
          cell.append(button);
        } else if (i === 2) {
          const badge = document.createElement("span");
          badge.className = "badge badge-" + (event.level === "collapse" ? "collapse" : event.level);
          badge.textContent = text;
          cell.append(badge);
        } else {
          cell.textContent = text;
          if (i === 5) cell.className = "values";
        }
        row.append(cell);
      });
      return row;
    }));
    const again = focused && table.querySelector('button[data-event="' + focused + '"]');
    if (again) again.focus();
  }

  // Move the cursor to a step (null clears it): every chart, the URL (?step=), the trajectories link.
  function setCursor(step) {
    state.cursor = step;
    const url = new URL(window.location.href);
    if (step === null) url.searchParams.delete("step"); else url.searchParams.set("step", String(step));
    window.history.replaceState(null, "", url);
    const link = new URL(page.urls.trajectories, window.location.origin);
    if (step !== null) link.searchParams.set("step", String(step));
    const trajectories = document.getElementById("trajectories-link");
    if (trajectories) trajectories.href = link.pathname + link.search;
    document.getElementById("cursor-state").hidden = step === null;
    document.getElementById("cursor-step").textContent = step === null ? "" : String(step);
    render();
    showEvents();
  }

  function showRun(run) {
    const badge = document.getElementById("run-status");
    badge.textContent = run.status.charAt(0).toUpperCase() + run.status.slice(1);
    badge.className = "badge badge-" + run.status;
    const progress = document.getElementById("run-progress");
    progress.max = Math.max(run.total_steps, 1);
    progress.value = run.step;
    progress.hidden = !run.total_steps;  // no planned steps (MLflow): a bar would read full
    // The percentage is the server's (Run.progress_percent), the same number the page opened with.
    // Steps done of those planned (steps 0-9 done read "10 / 10 steps done", where ?step= names step 9);
    // a run trained elsewhere (MLflow) has no planned number of steps: the last step it logged.
    document.getElementById("run-progress-text").textContent = run.total_steps
      ? run.step + " / " + run.total_steps + " steps done (" + run.progress_percent + "%)" : "step " + run.step;
    document.getElementById("run-eta").textContent =
      // A run queued again keeps its last attempt's ETA, which knows nothing of the wait: none shown.
      run.eta_seconds !== null && run.status === "running" && !run.stop_requested ? "ETA " + duration(run.eta_seconds) : "";
    const queue = document.getElementById("queue-place");  // the place in the queue, as of page load
    if (queue && run.status !== "queued") queue.hidden = true;
    if (document.getElementById("run-host")) {  // an imported run has no worker facts
      // As templates/runs/detail.html says it: a queued (resumed) run has no worker yet.
      document.getElementById("run-host").textContent = run.status === "queued"
        ? "none yet" + (run.host ? " (the last attempt ran on " + run.host + ")" : "")
        : run.host || "not started";
      document.getElementById("run-device").textContent = run.device || "–";
      document.getElementById("run-attempt").textContent = run.attempt;
    }
    // A run trained here, while it runs: its worker writes a heartbeat every few seconds. A worker killed
    // outright (out of memory, a lost machine) left the page saying "running" with a frozen ETA.
    const beat = document.getElementById("run-heartbeat");
    if (beat && state.heardSecondsAgo !== null) {
      beat.textContent = duration(state.heardSecondsAgo) + " ago" + (state.heardSecondsAgo >= 60
        ? "; nothing since: if its worker is gone, the run is queued again after " +
          duration(Number(beat.dataset.timeout)) + " without a word" : "");
    }
    const heard = document.getElementById("run-heard");  // a run trained elsewhere, while it runs
    if (heard && state.heardSecondsAgo !== null) {
      const lostAfter = Number(heard.dataset.lostAfter);
      // Quiet for a minute: say when the sweeper will call the run lost (MLFLOW_LOST_AFTER).
      heard.textContent = duration(state.heardSecondsAgo) + " ago" + (state.heardSecondsAgo >= 60
        ? "; its trainer has sent nothing since (it is marked failed after " + duration(lostAfter) + " of silence)" : "");
    }
    if (run.finished || run.stop_requested) {
      const stopForm = document.getElementById("stop-form");
      if (stopForm) stopForm.hidden = true;
    }
    if (run.finished) document.getElementById("events-empty").textContent = "None.";
  }

  async function refresh() {
    const bodies = await Promise.all(metricsUrls().map(getJson));
    if (state.refetch) {  // the whole series came again: they replace what is held
      state.series = {};
      state.lastStep = null;
      state.revision += 1;
    }
    const run = bodies[0].run;
    if (state.attempt !== null && (run.attempt !== state.attempt || run.rewrites !== state.rewrites)) {
      state.refetch = true;
    }
    state.attempt = run.attempt;
    state.runStep = run.step;
    state.rewrites = run.rewrites;
    state.heardSecondsAgo = bodies[0].heard_seconds_ago;
    bodies.forEach(function (part) {
      Object.entries(part.series).forEach(function (pair) { merge(pair[0], pair[1]); });
    });
    const body = bodies[0];
    const events = (await getJson(page.urls.events)).events;
    if (JSON.stringify(events) !== JSON.stringify(state.events)) state.revision += 1;
    state.events = events;
    await loadDetectorView(false);
    showRun(body.run);
    render();
    showEvents();
    await loadDetail(!body.run.finished);
    return body.run;
  }

  // A run logged through the MLflow endpoint (page.mlflow) takes points after it ended, as in MLflow, and
  // a lost one runs again when its client logs again (webapp.tracking): its page keeps asking, less often.
  const ENDED_POLL_MS = 10000;

  // A reload when the run changes state keeps the reader's place: the charts shown as tables, the scroll,
  // the focused control (a screen reader's user was sent to the top of a page whose tables had gone).
  const PLACE = "echolab.run-place." + window.location.pathname;
  const place = JSON.parse(window.sessionStorage.getItem(PLACE) || "null");
  window.sessionStorage.removeItem(PLACE);
  if (place) Object.assign(state.tables, place.tables);
  let placeRestored = false;

  function reloadKeepingPlace() {
    const focused = document.activeElement;
    const label = focused && focused.getAttribute("aria-label");
    const focus = !focused || focused === document.body ? null
      : focused.id ? "#" + CSS.escape(focused.id) : label ? '[aria-label="' + CSS.escape(label) + '"]' : null;
    window.sessionStorage.setItem(PLACE, JSON.stringify({ tables: state.tables, scroll: window.scrollY, focus: focus }));
    window.location.reload();
  }

  function restorePlace() {
    if (!place) return;
    window.scrollTo(0, place.scroll);
    const again = place.focus && document.querySelector(place.focus);
    if (again) again.focus({ preventScroll: true });
  }

  async function poll() {
    const status = document.getElementById("poll-state");
    try {
      const run = await refresh();
      if (!placeRestored) {
        placeRestored = true;
        restorePlace();  // once the first data is drawn: the page has its height
      }
      if (page.key_count !== null && run.key_count > page.key_count) {
        // A run trained elsewhere logged a key first after the page was drawn: the server charts it.
        reloadKeepingPlace();
        return;
      }
      if (run.finished !== state.finished || (!run.finished && run.status !== state.status)) {
        // The page was live and the run just ended, or an ended MLflow run runs again, or a queued run
        // started (or went back to the queue): reload once to show its state (the error, the final values;
        // when it started, on which worker, why Delete is off; or the live page).
        reloadKeepingPlace();
        return;
      }
      status.textContent = state.finished ? "" : "live, updating every " + POLL_MS / 1000 + " s";
    } catch (error) {
      status.textContent = "update failed (" + error.message + "); retrying";
    }
    if (!state.finished) window.setTimeout(poll, POLL_MS);
    else if (page.mlflow) window.setTimeout(poll, ENDED_POLL_MS);
  }

  // A linear/log switch above each chart, and sections that fold; both remembered (prefs).
  function setupPanels() {
    page.charts.forEach(function (chart) {
      window.EchoChartView.chartTools(document.getElementById("chart-" + chart.id), [{
        text: "log scale", name: "Log scale for " + chart.title, className: "log-scale", checked: isLog(chart),
        changed: function (ticked) { window.EchoChartView.chooseScale(prefs, chart, ticked); render(); },
      }, {
        text: "table", name: "Show " + chart.title + " as a table", className: "show-table",
        checked: Boolean(state.tables[chart.id]),  // kept over a reload (reloadKeepingPlace)
        changed: function (ticked) { state.tables[chart.id] = ticked; render(); },
      }]);
    });
    document.querySelectorAll("details.chart-section").forEach(function (section) {
      // The reader's last choice, else the server's default (many extra keys of a native run: folded)
      const choice = prefs.folded[section.dataset.section];
      section.open = choice === undefined ? section.dataset.folded !== "true" : !choice;
      section.addEventListener("toggle", function () {
        prefs.folded[section.dataset.section] = !section.open;
        window.EchoChartView.savePanelPrefs(prefs);
        // A chart drawn while folded has no width: fit it now that it shows.
        if (!section.open) return;
        section.querySelectorAll(".chart-plot.js-plotly-plot").forEach(function (plot) { Plotly.Plots.resize(plot); });
      });
    });
  }

  function setupControls() {
    const slider = document.getElementById("smoothing");
    const output = document.getElementById("smoothing-value");
    slider.value = String(state.smoothing);
    output.textContent = slider.value;
    slider.addEventListener("input", function () {
      state.smoothing = Number(slider.value);
      output.textContent = slider.value;
      saveView();
      render();
    });
    const axis = document.getElementById("x-axis");
    axis.value = state.xmode;
    axis.addEventListener("change", function () {
      state.xmode = axis.value;
      state.xrange = null;  // a range in steps means nothing in minutes
      saveView();
      render();
      followZoom();
    });
    document.getElementById("cursor-clear").addEventListener("click", function () {
      const step = state.cursor;
      setCursor(null);
      // The button hides with the cursor: the focus goes to the event at its step, else to the x axis'
      // control beside it.
      const from = document.querySelector('#event-list button[data-step="' + step + '"]');
      (from || document.getElementById("x-axis")).focus();
    });
    const detectorBox = document.getElementById("detector-view");
    detectorBox.checked = state.detector.on;  // from the address, not a reload's remembered checkbox
    detectorBox.addEventListener("change", async function () {
      state.detector.on = detectorBox.checked;
      saveView();
      document.getElementById("detector-view-state").hidden = !detectorBox.checked;
      if (detectorBox.checked) await loadDetectorView(true);
      render();
    });
  }

  setupPanels();
  setupControls();
  if (lazy) watchNearness();
  // The address' view, for the panels that draw before the first poll answers.
  window.EchoChartView.share({ xmode: state.xmode, xrange: state.xrange, cursor: state.cursor });
  poll();
})();
