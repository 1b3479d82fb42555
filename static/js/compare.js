// Compare page: the run page's charts with one line per run (or per group of runs), one colour per
// run in every chart (up to 20 runs drawn; beyond, runs share the palette's 20 colours). All chart
// data comes from one request to /api/compare; the server downsamples each series like the run page
// and, when grouping, computes each group's mean and min..max per step.
// Legend clicks hide a run (or group) in every chart at once, not only in the chart clicked.
// The runs table's checkboxes choose which runs the charts draw (all by default); drawing another
// subset needs no request, except when grouping (groups are aggregated over the runs drawn).
// Each bucket's min..max band is drawn by default, as on the run page, so spikes stay visible.
// The charts stay SVG: Plotly gives each WebGL chart two of the 16 contexts Chromium allows a page,
// so ten WebGL charts lose the first ones' drawing (docs/BENCHMARKS.md, Compare). To stay fast with
// 100 runs, a chart's bands are at most 20 filled traces (one per palette colour); with more than 20
// runs drawn, runs share those 20 colours and the lines of one colour and key are one trace (two when
// some of those series are short enough to draw markers); the
// detector events of every run are one marker trace and one trace of dotted collapse lines per chart.
// The picker below the charts adds a chart per other logged key (a TRL run's train/loss, a key of
// the user's own), fetched with the standard charts' keys in the same request.
// "Align at onset" draws one line per run with x = step - the run's first collapse step (the server's
// page.runs[].onset), so the runs' signals line up at their collapse; runs that never collapsed are left
// out and named in a note. The summary table's Lead columns give each rule's lead per run.
(function () {
  "use strict";

  const page = JSON.parse(document.getElementById("compare-page-data").textContent);
  const DASHES = ["solid", "dot", "dash"];
  const POLL_MS = 2000;
  // A series this short draws a marker on every point: a single point has no line to draw.
  const MARKERS_BELOW = 30;
  // "Draw the top N rows": how many runs one chart shows legibly.
  const TOP_ROWS = 10;
  const colorOf = {};
  page.runs.forEach(function (run) { colorOf[run.id] = run.color; });

  const view = window.EchoChartView.read();  // ?x=time, ?smooth= and ?xrange= (one zoom for every chart)
  const shown = shownInAddress(view.xmode);  // ?group=, ?align=1, ?bands=0, ?hide=
  const state = { data: null, dataRange: null, smoothing: view.smoothing, xrange: view.xrange, syncing: false, groupBy: shown.groupBy, bands: shown.bands, hidden: new Set(shown.hidden), nextPoll: null, loads: 0, renders: 0,
                  selected: new Set(drawnInAddress()), redraw: null, aligned: shown.aligned, extra: page.extra.slice(),
                  xmode: shown.aligned ? "step" : view.xmode,  // "step" or "time" (minutes of training)
                  clocks: {},  // run id -> its training clock (EchoChartView.trainingClock), on the time axis
                  tables: {},  // chart id -> true while the chart shows as a table
                  // The grouping that comes back once lines need not be one per run (Align unticked, steps again).
                  groupWaiting: shown.groupWaiting };

  const escapeHtml = window.EchoChartView.plainText;

  // Each chart's y scale: its default (a log axis for the gradient norm), or the reader's last choice on
  // this page or on a run page (EchoChartView.panelPrefs).
  const prefs = window.EchoChartView.panelPrefs();
  function isLog(chart) { return window.EchoChartView.isLog(prefs, chart); }

  // Text written into a hovertemplate: Plotly would fill in a "%{...}" in a run's label or a key, so its
  // "%" goes in as an entity, which Plotly draws as "%" after filling in the template.
  function templateText(text) {
    return escapeHtml(text).replace(/%/g, "&#37;");
  }

  function rgba(hex, alpha) {
    const n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + alpha + ")";
  }

  // The chart data, in as many requests as the keys' addresses need (many keys with long names); the
  // first also asks for the runs' clocks on the time axis.
  function dataUrls() {
    // Grouped: only the runs drawn, since the server aggregates every run it is sent.
    const runs = state.groupBy ? selectedRuns() : page.runs;
    const urls = window.EchoChartView.keyUrls(function () {
      const url = new URL(page.urls.data, window.location.origin);
      url.searchParams.set("runs", runs.map(function (run) { return run.id; }).join(","));
      url.searchParams.set("max_points", String(page.max_points));
      if (state.bands) url.searchParams.set("bands", "1");
      if (state.groupBy) url.searchParams.set("group_by", state.groupBy);
      if (state.dataRange) {
        url.searchParams.set("after", String(state.dataRange[0] - 1));
        url.searchParams.set("through", String(state.dataRange[1]));
      }
      return url;
    }, chartKeys(), page.max_keys);
    if (state.xmode === "time" && urls.length) urls[0].searchParams.set("clock", "1");
    return urls;
  }

  const getJson = window.EchoChartView.getJson;

  // One answer from the answers of dataUrls(): the first, with the other answers' series (per run, per
  // group) added to it.
  function joined(bodies) {
    const body = bodies[0];
    bodies.slice(1).forEach(function (part) {
      Object.keys(part.series).forEach(function (id) { Object.assign(body.series[id], part.series[id]); });
      (part.groups || []).forEach(function (group, i) { Object.assign(body.groups[i].series, group.series); });
    });
    return body;
  }

  // While any run shown is queued or running, the page reloads its data every POLL_MS (the server
  // downsamples again, so a long run stays as cheap as a short one) and redraws with Plotly.react.
  async function load(options) {
    const status = document.getElementById("load-state");
    const polled = options && options.polled;
    if (!polled) status.textContent = "loading…";
    window.clearTimeout(state.nextPoll);
    const ticket = ++state.loads;  // a newer load (the user changed grouping) supersedes this one
    try {
      const body = joined(await Promise.all(dataUrls().map(getJson)));
      await scriptsLoaded;
      if (ticket !== state.loads) return;
      state.data = body;
      state.clocks = {};
      Object.keys(body.clocks || {}).forEach(function (id) {
        state.clocks[id] = window.EchoChartView.trainingClock(body.clocks[id]);
      });
      if (polled) showSummaries(body.runs);
      if (!polled && !(options && options.sameEntries)) forgetHiddenGroups();
      const live = body.runs.some(function (run) { return !run.finished; });
      status.textContent = live ? "live, updating every " + POLL_MS / 1000 + " s" : "";
      render();
      if (followZoom()) return;  // a zoom into runs held as buckets: its range fetched again
      if (live) state.nextPoll = window.setTimeout(function () { load({ polled: true }); }, POLL_MS);
    } catch (error) {
      if (ticket !== state.loads) return;
      status.textContent = "could not load the chart data (" + error.message + ")" + (polled ? "; retrying" : "");
      if (polled) state.nextPoll = window.setTimeout(function () { load({ polled: true }); }, POLL_MS);
    }
  }

  // The runs table follows live runs: status and the summary columns (first cell of each, in the
  // template's order), formatted as the server formats them (three significant digits), and the steps an
  // hour (the cell before the last, Device; a whole number, its thousands grouped, as the template's).
  const SUMMARY_CELLS = ["final_success", "best_success", "val_success", "first_warning", "first_collapse"];
  function showSummaries(runs) {
    runs.forEach(function (run) {
      const row = document.querySelector('#summary-table tr[data-run="' + run.id + '"]');
      if (!row) return;
      const badge = row.cells[3].querySelector(".badge");
      badge.className = "badge badge-" + run.status;
      badge.textContent = run.status.charAt(0).toUpperCase() + run.status.slice(1);
      row.cells[3].dataset.sort = run.status;
      SUMMARY_CELLS.forEach(function (key, i) {
        const cell = row.cells[4 + i], value = run.summary[key];
        cell.dataset.sort = value === null ? "" : String(value);
        if (key === "first_collapse") {
          cell.innerHTML = value === null ? "–" : '<span class="badge badge-collapse">step ' + value + "</span>";
        } else if (key === "first_warning") {
          cell.textContent = value === null ? "–" : String(value);
        } else {
          cell.textContent = value === null ? "–" : significant(value);
        }
      });
      const speed = row.cells[row.cells.length - 2], perHour = run.summary.steps_per_hour;
      speed.dataset.sort = perHour === null ? "" : String(perHour);
      speed.textContent = perHour === null ? "–" : Math.round(perHour).toLocaleString("en-US");
      showLeads(run, row);
    });
    // The table keeps its order as the values change (the address names it: a reload sorts the same).
    const table = document.getElementById("summary-table"), sorted = table.querySelector("thead th[aria-sort]");
    if (sorted) sortBy(table, sorted, sorted.getAttribute("aria-sort") === "descending");
  }

  // A live run's onset (its first collapse: "Align at onset" follows it) and its Lead cells, from its events
  // as webapp.compare.aggregates.onset_leads computes them; a rule warning for the first time in any run
  // gets its column first.
  const FIRST_LEAD_CELL = 4 + SUMMARY_CELLS.length;
  function showLeads(run, row) {
    const first = {};
    let onset = null;
    run.events.forEach(function (event) {
      if (event.level === "collapse" && (onset === null || event.step < onset)) onset = event.step;
      if (event.level === "warning" && !(event.rule in first && first[event.rule] <= event.step)) first[event.rule] = event.step;
    });
    page.runs.forEach(function (shown) { if (shown.id === run.id) shown.onset = onset; });
    Object.keys(first).forEach(addLeadColumn);
    page.lead_rules.forEach(function (rule, i) {
      const cell = row.cells[FIRST_LEAD_CELL + i];
      const lead = onset !== null && rule in first ? onset - first[rule] : null;
      cell.dataset.sort = lead === null ? "" : String(lead);
      cell.classList.toggle("late", lead !== null && lead < 0);
      cell.textContent = leadText(lead);
    });
  }

  // A Lead column for a rule the table has none for, where the server would put it (rules sorted by name),
  // its header as the template's; every run's cell "–" until its own events are shown (only a live run can
  // have a new rule's warning: the others' events were all counted at the page's load).
  function addLeadColumn(rule) {
    if (page.lead_rules.indexOf(rule) >= 0) return;
    page.lead_rules = page.lead_rules.concat([rule]).sort();
    const at = FIRST_LEAD_CELL + page.lead_rules.indexOf(rule), table = document.getElementById("summary-table");
    const th = document.createElement("th"), header = table.tHead.rows[0];
    th.dataset.type = "number";
    th.dataset.column = "lead:" + rule;
    th.className = "lead-column";
    th.title = "Steps from the rule's first warning to the run's first collapse; 'late' when it came after";
    th.append("Lead: ");
    rule.replace(/[/_]/g, "$&\n").split("\n").forEach(function (part, i) {  // may wrap after "/" or "_", as breakable_key
      if (i) th.append(document.createElement("wbr"));
      th.append(part);
    });
    header.insertBefore(th, header.cells[at]);
    sortableHeader(table, th);
    Array.from(table.tBodies[0].rows).forEach(function (row) {
      const cell = row.insertCell(at);
      cell.className = "lead";
      cell.dataset.sort = "";
      cell.textContent = leadText(null);
    });
  }

  // A lead as webapp.compare.aggregates.lead_text writes it: "3 steps", "2 steps late", "–" without one.
  function leadText(lead) {
    if (lead === null) return "–";
    const steps = Math.abs(lead) + " step" + (Math.abs(lead) === 1 ? "" : "s");
    return steps + (lead < 0 ? " late" : "");
  }

  // A number as the server writes a summary cell (webapp.core.templatetags.echolab.significant): three
  // significant digits in Python's "%g" form (0.313, 1.23e+06, 0.0001), a tie rounded away from zero.
  function significant(value) {
    if (value === 0) return "0";
    const parts = value.toExponential(2).split("e");
    const exponent = Number(parts[1]);
    if (exponent < -4 || exponent >= 3) {
      return parts[0].replace(/\.?0+$/, "") + "e" + (exponent < 0 ? "-" : "+") + String(Math.abs(exponent)).padStart(2, "0");
    }
    return String(Number(parts[0] + "e" + exponent));
  }

  // Lines hidden with the legend outlive a new grouping or a new choice of runs where they can: a run stays
  // hidden (also while unticked in the table, or grouped), so it is hidden again when its line is drawn; a
  // group's id is its place in one grouping, so those go.
  function forgetHiddenGroups() {
    const kept = Array.from(state.hidden).filter(function (id) { return id.startsWith("run-"); });
    if (kept.length === state.hidden.size) return;
    state.hidden = new Set(kept);
    saveShown();
  }

  function selectedRuns() {
    return page.runs.filter(function (run) { return state.selected.has(run.id); });
  }

  function smooth(values) {
    return state.smoothing > 0 ? window.EchoSmoothing.ema(values, state.smoothing) : values;
  }

  // The palette's first PALETTE_COLOURS colours (plotly's D3 colours and their light tones) are the ones
  // a reader tells apart. Beyond them a run's colour is drawn as the nearest of those: every band of a
  // chart is at most PALETTE_COLOURS filled traces (see bandTraces), and with more runs drawn than that,
  // the lines too (see lineTraces); a run's hover text names it.
  const PALETTE_COLOURS = 20;
  const paletteColourOf = {};
  function paletteColour(hex) {
    if (!(hex in paletteColourOf)) {
      const rgb = function (c) { const n = parseInt(c.slice(1), 16); return [n >> 16, (n >> 8) & 255, n & 255]; };
      const [r, g, b] = rgb(hex);
      let best = hex, distance = Infinity;
      page.colors.slice(0, PALETTE_COLOURS).forEach(function (colour) {
        const [r2, g2, b2] = rgb(colour);
        const d = (r - r2) ** 2 + (g - g2) ** 2 + (b - b2) ** 2;
        if (d < distance) { best = colour; distance = d; }
      });
      paletteColourOf[hex] = best;
    }
    return paletteColourOf[hex];
  }

  // The colour an entry is drawn in when `count` entries are drawn: its own, or beyond PALETTE_COLOURS
  // the nearest palette colour.
  function drawnColour(hex, count) {
    return count > PALETTE_COLOURS ? paletteColour(hex) : hex;
  }

  // One entry per thing drawn: a run, or a group of runs. `series[key]` has step and value (or mean).
  function entries() {
    if (state.groupBy && state.data.groups) {
      const count = state.data.groups.length;
      return state.data.groups.map(function (group, i) {
        return { id: "group-" + i, name: state.groupBy + " = " + (group.value === "" ? "(none)" : group.value) +
                 " (" + group.runs.length + " run" + (group.runs.length === 1 ? "" : "s") + ")",
                 color: drawnColour(page.colors[i % page.colors.length], count),
                 series: group.series, runs: group.runs, group: true, xs: sameSteps };
      });
    }
    const drawn = selectedRuns().filter(hasItsX);
    return drawn.map(function (run) {
      return { id: "run-" + run.id, name: "#" + run.id + " " + run.name, color: drawnColour(run.color, drawn.length),
               series: state.data.series[String(run.id)] || {}, runs: [run.id], group: false, xs: xsOf(run) };
    });
  }

  // The x axis drawn, as its title and a hover's words say it.
  const X_AXES = {
    step: { title: "step", at: "step %{x}" },
    onset: { title: "steps from the run's first collapse", at: "%{x} steps from its first collapse" },
    time: { title: "training time (minutes)", at: "%{x:.4~g} min of training" },  // the select says of what
  };

  function xAxis() {
    return state.aligned ? "onset" : state.xmode === "time" && !state.groupBy ? "time" : "step";
  }

  // Whether a run has an x on the chosen axis: a collapse event to align at, a clock to tell time by.
  function hasItsX(run) {
    if (state.aligned) return run.onset !== null;
    return state.xmode !== "time" || Boolean(state.clocks[run.id]);
  }

  // A run's steps -> its x: the step, the steps from its first collapse, or its minutes of training.
  function xsOf(run) {
    if (state.aligned) return function (steps) { return steps.map(function (step) { return step - run.onset; }); };
    const clock = state.xmode === "time" ? state.clocks[run.id] : null;
    if (clock) {
      return function (steps) {
        return steps.map(function (step) { return Number(window.EchoChartView.minutesAt(clock, step).toFixed(4)); });
      };
    }
    return sameSteps;
  }

  function sameSteps(steps) { return steps; }  // a group's x, and a run's by step

  // Which ticked runs the axis leaves out: those without a collapse event when aligned, without a clock
  // on the time axis.
  function showAlignNote() {
    const note = document.getElementById("align-note");
    const left = state.groupBy ? [] : selectedRuns().filter(function (run) { return !hasItsX(run); });
    note.hidden = !left.length;
    const why = state.aligned ? "Aligned at each run's first collapse; left out, with no collapse event: "
                              : "Against training time; left out, with no seconds per step logged: ";
    note.textContent = left.length ? why + left.map(function (run) { return "#" + run.id + " " + run.name; }).join(", ") + "." : "";
  }

  // Adds a min..max band to `band` as closed shapes: forward along the maxima, back along the minima,
  // shapes separated by nulls. A bucket with no finite value (null) ends one shape; the next finite
  // bucket starts another. Each vertex's hover text names the run and key ("max" or "min").
  function addBand(band, steps, low, high, name) {
    let start = 0;
    for (let i = 0; i <= steps.length; i++) {
      if (i < steps.length && low[i] !== null && high[i] !== null) continue;
      if (i > start) {
        if (band.x.length) { band.x.push(null); band.y.push(null); band.text.push(null); }
        for (let j = start; j < i; j++) { band.x.push(steps[j]); band.y.push(high[j]); band.text.push(name + " max"); }
        for (let j = i - 1; j >= start; j--) { band.x.push(steps[j]); band.y.push(low[j]); band.text.push(name + " min"); }
      }
      start = i + 1;
    }
  }

  // Every band of one colour in a chart is one filled trace: a filled trace per run and key cost
  // Plotly more than the run's line (100 runs, one chart: 335 ms with a band trace per run, 143 ms
  // with one for all, docs/BENCHMARKS.md); lines are merged the same way (lineTraces). A band takes
  // its entry's colour, which entries() keeps to PALETTE_COLOURS colours when more are drawn. Bands
  // come first, under every line.
  // Every trace has a uid (Plotly makes it a CSS class: letters, digits, dashes), so that Plotly.react
  // redraws each trace's SVG in place of its own: matched by index, a band took the SVG of a line that
  // had that index before and kept drawing its line (seen in the runs-table browser test).
  function bandTraces(chart, all) {
    const bands = new Map();
    all.forEach(function (entry) {
      if (state.hidden.has(entry.id) || !state.bands) return;
      const colour = entry.color;
      chart.keys.forEach(function (key) {
        const s = entry.series[key];
        if (!s || !s.step.length || !s.min || !s.max) return;
        if (!bands.has(colour)) bands.set(colour, { x: [], y: [], text: [], alpha: entry.group ? 0.18 : 0.12 });
        // A group's band is its runs' spread around their mean: smoothed with the mean, or the smoothed
        // mean left its own band (W&B smooths a group's range the same way). A run's band stays raw: the
        // bucket's spikes are what it is there to show.
        const edges = entry.group ? [smooth(s.min), smooth(s.max)] : [s.min, s.max];
        const [low, high] = isLog(chart) ? edges.map(window.EchoChartView.positiveOnly) : edges;
        addBand(bands.get(colour), entry.xs(s.step), low, high, escapeHtml(entry.name) + "<br>" + escapeHtml(key));
      });
    });
    const at = X_AXES[xAxis()].at;
    return Array.from(bands, function ([colour, band]) {
      return { x: band.x, y: band.y, text: band.text, mode: "none", fill: "toself", fillcolor: rgba(colour, band.alpha),
               hoveron: "points", hovertemplate: "%{text} %{y:.4~g} in the bucket at " + at + "<extra></extra>",
               showlegend: false, connectgaps: false, meta: "band", uid: "band-" + colour.slice(1) };
    });
  }

  // A line trace per colour and key: with up to PALETTE_COLOURS entries drawn, each has its own colour and
  // so its own trace per key; beyond, runs share the palette's colours (see entries) and the lines
  // of one colour are one trace, runs separated by nulls, each point's hover text naming its run. A trace
  // per run and key cost most of the drawing at 100 runs (1,400 traces; docs/BENCHMARKS.md, Compare).
  // Series shorter than MARKERS_BELOW draw markers and keep traces of their own kind.
  function lineTraces(chart, all) {
    const traces = new Map();
    all.forEach(function (entry) {
      if (state.hidden.has(entry.id)) return;
      chart.keys.forEach(function (key, k) {
        const s = entry.series[key];
        if (!s || !s.step.length) return;
        const markers = s.step.length < MARKERS_BELOW;
        const id = entry.color.slice(1) + "-" + k + (markers ? "-m" : "");
        if (!traces.has(id)) traces.set(id, { id: id, key: key, k: k, markers: markers, color: entry.color, entries: [], x: [], y: [], text: [], n: [] });
        const trace = traces.get(id);
        if (trace.x.length) { trace.x.push(null); trace.y.push(null); trace.text.push(null); trace.n.push(null); }
        const x = entry.xs(s.step), y = smooth(entry.group ? s.mean : s.value), name = escapeHtml(entry.name);
        for (let i = 0; i < x.length; i++) {
          trace.x.push(x[i]); trace.y.push(y[i]); trace.text.push(name); trace.n.push(entry.group ? s.n[i] : null);
        }
        trace.entries.push(entry);
      });
    });
    const at = X_AXES[xAxis()].at;
    return Array.from(traces.values(), function (trace) {
      // A run's own trace names it in the template: a text per point costs Plotly time per chart.
      const single = trace.entries.length === 1 ? trace.entries[0] : null;
      const who = single ? templateText(single.name) : "%{text}";
      // A group's mean is over the runs that logged the step: say how many, as a run that ends earlier
      // than the others makes the mean jump where it stops.
      const grouped = trace.entries.some(function (entry) { return entry.group; });
      return { x: trace.x, y: trace.y, text: single ? undefined : trace.text, mode: trace.markers ? "lines+markers" : "lines",
               customdata: grouped ? trace.n : undefined,
               marker: { color: trace.color, size: 5 }, name: single ? escapeHtml(single.name) : trace.entries.length + " runs",
               showlegend: false, connectgaps: false, meta: single ? single.id : "runs-" + trace.id,
               uid: single ? single.id + "-" + trace.k : "lines-" + trace.id,
               line: { color: trace.color, width: single && single.group ? 2.2 : 1.6, dash: DASHES[trace.k % DASHES.length] },
               hovertemplate: who + "<br>" + templateText(trace.key) + " %{y:.4~g}" +
                 (grouped ? " (mean of %{customdata} runs)" : "") + " at " + at + "<extra></extra>" };
    });
  }

  // A chart of several keys says which line style is which key: one legend-only trace per key drawn
  // (the runs' own legend above the charts names colours, not dashes).
  function keyLegendTraces(chart, lines) {
    if (chart.keys.length < 2) return [];
    const drawn = new Set(lines.map(function (trace) { return trace.line.dash; }));
    return chart.keys.flatMap(function (key, k) {
      const dash = DASHES[k % DASHES.length];
      if (!drawn.has(dash)) return [];
      return [{ x: [null], y: [null], mode: "lines", name: escapeHtml(key), showlegend: true, hoverinfo: "skip",
                line: { color: "#4b5563", width: 1.6, dash: dash }, meta: "key", uid: "key-" + k }];
    });
  }

  // Every chart's x range while the page is not zoomed: the span of the shown runs' series over all charts
  // (padded so end markers show whole; events sit on logged steps), so that a step sits at one place on every chart (a
  // chart whose keys some runs did not log, or logged every 10 steps, fitted only its own data).
  function dataSpan(all) {
    let low = Infinity, high = -Infinity;
    all.forEach(function (entry) {
      if (state.hidden.has(entry.id)) return;
      Object.values(entry.series).forEach(function (s) {
        if (!s || !s.step.length) return;
        const ends = entry.xs([s.step[0], s.step[s.step.length - 1]]);
        low = Math.min(low, ends[0]);
        high = Math.max(high, ends[1]);
      });
    });
    return window.EchoChartView.paddedSpan(low, high);
  }

  // Every detector event of the runs the entries not hidden draw: {entry, run, event}, run by run.
  function shownEvents(all) {
    const out = [];
    all.forEach(function (entry) {
      if (state.hidden.has(entry.id)) return;
      state.data.runs.forEach(function (run) {
        if (entry.runs.indexOf(run.id) < 0) return;
        run.events.forEach(function (event) { out.push({ entry: entry, run: run, event: event }); });
      });
    });
    return out;
  }

  // Detector events of the runs (or groups) shown, as markers along the top in their colour, and each
  // collapse as a dotted vertical line. One trace each for all runs: a trace per run costs per chart.
  function eventTraces(all) {
    const marks = shownEvents(all).map(function (m) {
      return { run: m.run.id, color: m.entry.color, event: m.event, x: m.entry.xs([m.event.step])[0] };
    });
    if (!marks.length) return [];
    const collapses = marks.filter(function (m) { return m.event.level === "collapse"; });
    const out = [{ x: marks.map(function (m) { return m.x; }), y: marks.map(function () { return 0.96; }),
                   yaxis: "y2", mode: "markers", showlegend: false, meta: "events", uid: "events", cliponaxis: false,
                   marker: { color: marks.map(function (m) { return m.color; }), size: 9,
                             line: { width: 2, color: marks.map(function (m) { return m.color; }) },
                             symbol: marks.map(function (m) { return window.EchoChartView.eventSymbol(m.event.level); }) },
                   hovertext: marks.map(function (m) {
                     return "<b>#" + m.run + " " + escapeHtml(window.EchoChartView.eventTitle(m.event)) + "</b> at step " +
                       m.event.step + "<br>" + escapeHtml(m.event.message);
                   }), hoverinfo: "text" }];
    if (collapses.length) {
      out.unshift({ x: collapses.flatMap(function (m) { return [m.x, m.x, null]; }),
                    y: collapses.flatMap(function () { return [0, 1, null]; }), yaxis: "y2", mode: "lines",
                    line: { color: "#888", width: 1, dash: "dot" }, hoverinfo: "skip", showlegend: false,
                    meta: "collapse-lines", uid: "collapse-lines" });
    }
    return out;
  }

  // The markers' events as a table, for a keyboard and a screen reader (a marker's message shows only
  // on hover): the runs drawn, each run's events by step. Redrawn only when they change, keeping focus.
  function showEventList(all) {
    const names = {};
    page.runs.forEach(function (run) { names[run.id] = "#" + run.id + " " + run.name; });
    const rows = shownEvents(all).map(function (m) {
      return [names[m.run.id], String(m.event.step), m.event.level, m.event.rule, m.event.message];
    });
    const box = document.getElementById("compare-events");
    box.hidden = !rows.length;
    document.getElementById("compare-events-count").textContent = String(rows.length);
    const body = document.querySelector("#compare-event-list tbody");
    const drawnRows = JSON.stringify(rows);
    if (body.dataset.drawn === drawnRows) return;
    body.dataset.drawn = drawnRows;
    const labels = Array.from(body.parentNode.tHead.rows[0].cells, function (th) { return th.textContent; });
    body.replaceChildren.apply(body, rows.map(function (cells) {
      const row = document.createElement("tr");
      cells.forEach(function (text, i) {
        const cell = document.createElement("td");
        cell.dataset.label = labels[i];  // the column's name, on a phone where each row is a card
        cell.textContent = text;
        row.append(cell);
      });
      return row;
    }));
  }

  // Coalesces redraws: a slider drag or quick clicks redraw once per frame, with the latest state.
  function scheduleRender() {
    if (state.redraw === null) {
      state.redraw = window.requestAnimationFrame(function () { state.redraw = null; render(); });
    }
  }

  function render() {
    if (!state.data) return Promise.resolve(showSelection());  // ticked before the data came
    if (xAxis() === "time" && !state.data.clocks) return Promise.resolve();  // the clocks are on their way
    const all = entries();
    rangeForm.show(state.xrange, RANGE_UNITS[xAxis()]);
    drawLegend(all);
    colourSwatches(all);
    showGroups(all);
    showSelection();
    showAlignNote();
    const markers = all.flatMap(function (entry) { return entry.runs; }).length ? eventTraces(all) : [];
    document.getElementById("event-key").hidden = !markers.length;
    showEventList(all);
    window.EchoChartView.share({ xmode: state.xmode, xrange: state.xrange, span: dataSpan(all), cursor: null });
    const logged = showLogged();
    charts().forEach(function (chart) { if (logged.has(chart.id)) showTable(chart, all); });
    const ticket = ++state.renders;  // a newer render (another tick, the slider moved) stops this one
    // One chart at a time, those in view first, the browser painting between them: with 100 runs each
    // chart takes a while, and the first screen shows before the charts below it are drawn.
    const drawn = chartsInViewFirst().filter(function (chart) { return logged.has(chart.id) && !state.tables[chart.id]; });
    return drawn.reduce(function (previous, chart) {
      return previous.then(function () {
        if (ticket === state.renders) return drawChart(chart, all, markers).then(nextFrame);
      });
    }, Promise.resolve()).then(function () {
      // Read by tests and bench/compare.py: every chart has been drawn with the current data.
      if (ticket === state.renders) document.body.dataset.chartsDrawn = String(Number(document.body.dataset.chartsDrawn || 0) + 1);
    });
  }

  // A chart of keys no compared run has logged (most standard charts, for runs trained elsewhere) is left
  // out and named in one line, as on the run page: nine charts of "no data" pushed the one with data
  // aside. It comes back when a live run logs its keys. Returns the ids of the charts left in.
  function showLogged() {
    const series = Object.values(state.data.series);
    const logged = new Set();
    const absent = [];
    charts().forEach(function (chart) {
      addChartSwitches(chart);
      const any = series.some(function (run) {
        return chart.keys.some(function (key) { return run[key] && run[key].step.length; });
      });
      document.getElementById("chart-" + chart.id).closest("figure").hidden = !any;
      if (any) logged.add(chart.id); else absent.push(chart.title);
    });
    const note = document.getElementById("not-logged");
    note.hidden = !absent.length;
    note.textContent = "Not logged by these runs, so not drawn: " + absent.join(", ") + ".";
    return logged;
  }

  // A linear/log switch above each chart, as on the run page, and a "table" switch: its values as a table
  // instead (showTable).
  function addChartSwitches(chart) {
    const plot = document.getElementById("chart-" + chart.id);
    if (plot.previousElementSibling && plot.previousElementSibling.classList.contains("chart-tools")) return;
    window.EchoChartView.chartTools(plot, [{
      text: "log scale", name: "Log scale for " + chart.title, className: "log-scale", checked: isLog(chart),
      changed: function (ticked) { window.EchoChartView.chooseScale(prefs, chart, ticked); scheduleRender(); },
    }, {
      text: "table", name: "Show " + chart.title + " as a table", className: "show-table",
      checked: Boolean(state.tables[chart.id]),  // an extra key's chart made again keeps its choice
      changed: function (ticked) { state.tables[chart.id] = ticked; scheduleRender(); },
    }]);
  }

  // A chart as a table, for a reader who cannot see or point at it: a row per x of the chart (step, steps
  // from onset or minutes) and a column per run (or group) and key drawn, with the values drawn (smoothed
  // as the slider says), the runs hidden in the legend left out, within the zoomed range.
  function showTable(chart, all) {
    const plot = document.getElementById("chart-" + chart.id);
    const box = window.EchoChartView.tableInsteadOf(plot, Boolean(state.tables[chart.id]), chart.title + " as a table");
    if (!box) return;
    const inRange = function (x) { return !state.xrange || (x >= state.xrange[0] && x <= state.xrange[1]); };
    const columns = [];
    let downsampled = false, grouped = false;
    all.forEach(function (entry) {
      if (state.hidden.has(entry.id)) return;
      chart.keys.forEach(function (key) {
        const s = entry.series[key];
        if (!s || !s.step.length) return;
        downsampled = downsampled || Boolean(s.downsampled);
        grouped = grouped || entry.group;
        const x = entry.xs(s.step), y = smooth(entry.group ? s.mean : s.value), cells = new Map();
        x.forEach(function (at, i) { if (inRange(at)) cells.set(at, y[i]); });
        columns.push({ name: entry.name + (chart.keys.length > 1 ? ": " + key : ""), cells: cells });
      });
    });
    const xs = Array.from(new Set(columns.flatMap(function (column) { return Array.from(column.cells.keys()); })))
      .sort(function (a, b) { return a - b; });
    const format = window.EchoChartView.cellText;
    const headers = [X_AXES[xAxis()].title].concat(columns.map(function (column) { return column.name; }));
    const caption = chart.title + (columns.length
      ? window.EchoChartView.rowsCaption(xs.length, headers.length) + (state.smoothing > 0 ? ", smoothed as drawn" : "") +
        (grouped ? ". A group's value is the mean of its runs at the step" : "") +
        (downsampled ? ". Downsampled: a row ends a bucket of steps, with the value at its last step; a run's page and export have every point." : ".")
      : ": every line is hidden");
    window.EchoChartView.fillTable(box, caption, headers, xs.map(function (x) {
      const at = xAxis() === "time" ? String(Number(x.toPrecision(6))) : String(x);
      return [at].concat(columns.map(function (column) { return format(column.cells.get(x)); }));
    }));
  }

  function nextFrame() {
    return new Promise(function (resolve) { window.requestAnimationFrame(function () { resolve(); }); });
  }

  function chartsInViewFirst() {
    const distance = {};
    const all = charts();
    all.forEach(function (chart) {
      const box = document.getElementById("chart-" + chart.id).getBoundingClientRect();
      distance[chart.id] = box.bottom < 0 ? -box.bottom : Math.max(0, box.top - window.innerHeight);
    });
    return all.sort(function (a, b) { return distance[a.id] - distance[b.id]; });
  }

  // The standard charts, then one per other key ticked in the picker (page.other_keys), in its order.
  function charts() {
    return page.charts.concat(state.extra.map(function (key) {
      return { id: "extra-" + page.other_keys.indexOf(key), title: key, keys: [key] };
    }));
  }

  function chartKeys() {
    return Array.from(new Set(charts().flatMap(function (chart) { return chart.keys; })));
  }

  // The other keys' charts, in the picker's order; a chart already drawn keeps its plot.
  function placeExtraCharts() {
    const grid = document.getElementById("extra-charts");
    if (!grid) return;
    grid.replaceChildren.apply(grid, charts().slice(page.charts.length).map(function (chart) {
      const plot = document.getElementById("chart-" + chart.id);
      if (plot) return plot.parentElement;
      const figure = document.createElement("figure");
      figure.className = "chart";
      const div = document.createElement("div");
      div.id = "chart-" + chart.id;
      div.className = "chart-plot";
      figure.append(div);
      return figure;
    }));
  }

  // The address with the keys charted: extra=a&extra=b (a lone extra= charts none); when that would be
  // longer than servers take (many long keys), their places in the picker's list, extra_at=0-5,9.
  function extraInAddress() {
    const url = new URL(window.location.href);
    url.searchParams.delete("extra");
    url.searchParams.delete("extra_at");
    (state.extra.length ? state.extra : [""]).forEach(function (key) { url.searchParams.append("extra", key); });
    if (url.href.length <= window.EchoChartView.URL_BUDGET) return url;
    url.searchParams.delete("extra");
    const places = state.extra.map(function (key) { return page.other_keys.indexOf(key); }).sort(function (a, b) { return a - b; });
    const runs = [];
    places.forEach(function (place) {
      const last = runs[runs.length - 1];
      if (last && place === last[1] + 1) last[1] = place; else runs.push([place, place]);
    });
    url.searchParams.set("extra_at", runs.map(function (run) { return run[0] === run[1] ? run[0] : run[0] + "-" + run[1]; }).join(","));
    return url;
  }

  // Ticking a key charts it: the address keeps the choice, and the data is fetched again with the new keys.
  function extraKeysChanged() {
    const boxes = Array.from(document.querySelectorAll("#other-keys input.extra-key"));
    state.extra = boxes.filter(function (box) { return box.checked; }).map(function (box) { return box.value; });
    const full = state.extra.length >= page.max_extra;
    boxes.forEach(function (box) { box.disabled = full && !box.checked; });
    const limit = document.getElementById("extra-limit");
    limit.hidden = !full;
    limit.textContent = full ? page.max_extra + " keys charted: untick one to chart another." : "";
    window.history.replaceState(null, "", extraInAddress());
    placeExtraCharts();
    load({ sameEntries: true });  // the same runs or groups: the hidden ones stay hidden
  }

  function nonNegative(lines) {
    return lines.every(function (trace) { return trace.y.every(function (v) { return v === null || v >= 0; }); });
  }

  function drawChart(chart, all, markers) {
    const built = lineTraces(chart, all);
    const log = isLog(chart);
    // a log axis leaves values at or below 0 out, and the chart says how many
    const hidden = log ? built.reduce(function (n, trace) { return n + window.EchoChartView.notPositive(trace.y); }, 0) : 0;
    const lines = log ? built.map(window.EchoChartView.positiveTrace) : built;
    // "no data" when no entry has any: hidden entries draw nothing but still have data
    const hasData = function (entry) {
      return chart.keys.some(function (key) { return entry.series[key] && entry.series[key].step.length; });
    };
    const withData = all.filter(hasData);
    const empty = !withData.length;
    const allHidden = !empty && withData.every(function (entry) { return state.hidden.has(entry.id); });
    const note = empty ? "no data" : allHidden ? "every line is hidden: click one in the legend above" : "";
    const range = state.xrange || window.EchoChartView.shared.span;
    const keys = keyLegendTraces(chart, lines);
    const data = bandTraces(chart, all).concat(lines, keys);
    const layout = {
      title: { text: escapeHtml(window.EchoChartView.shortName(chart.title)), font: { size: 14 } },
      uirevision: "compare-" + xAxis(),  // steps, steps from onset and minutes share no axis
      margin: { l: 50, r: 10, t: keys.length ? 58 : 36, b: 36 },
      height: 320,
      // with a note and no span (every line hidden, or none has data) no made-up -1..6 either
      xaxis: Object.assign(window.EchoChartView.xaxis(X_AXES[xAxis()].title, range, xAxis() !== "time"),
                           { visible: !(note && !range) }),
      // no made-up -1..4 scale beside the note
      // Values that are never negative (a fraction of groups) get no negative axis: zeros were drawn on -1..1.
      yaxis: window.EchoChartView.yaxis(log, Object.assign(
        { visible: !note, rangemode: nonNegative(lines) ? "nonnegative" : "normal" },
        window.EchoChartView.yRange(data, log, chart.bounds))),
      yaxis2: { overlaying: "y", range: [0, 1], visible: false, fixedrange: true },
      // One HTML legend above the charts serves them all (see drawLegend): 20 runs' Plotly legend
      // drawn in ten half-width charts cost more than the lines and squeezed the plots. Plotly's legend
      // names only the keys of a chart of several (it has nothing to hide: clicks do nothing).
      showlegend: keys.length > 0,
      legend: { orientation: "h", x: 0, xanchor: "left", y: 1, yanchor: "bottom", font: { size: 11 },
                itemclick: false, itemdoubleclick: false },
      annotations: note ? [{ text: note, xref: "paper", yref: "paper", x: 0.5, y: 0.5, showarrow: false }]
                        : hidden ? [window.EchoChartView.logNote(hidden)] : [],
    };
    const div = document.getElementById("chart-" + chart.id);
    state.syncing = true;
    const drawing = Plotly.react(div, empty ? data : data.concat(markers), layout, window.EchoChartView.stepConfig);
    state.syncing = false;
    if (!div.dataset.zoomSynced) {
      div.dataset.zoomSynced = "true";
      div.on("plotly_relayout", zoomed);
    }
    window.EchoChartView.wholeOnDoubleClick(div, function () { zoomed({ "xaxis.autorange": true }); });
    return drawing;
  }

  // A button per run (or group) in its colour: click hides or shows it in every chart, double-click
  // shows it alone (a click waits briefly so that a double-click's first click does not toggle).
  // Built when the entries change, updated in place otherwise, so keyboard focus stays put.
  function drawLegend(all) {
    const legend = document.getElementById("run-legend");
    const ids = JSON.stringify(all.map(function (entry) { return [entry.id, entry.name, entry.color]; }));
    if (legend.dataset.entries !== ids) {
      legend.dataset.entries = ids;
      legend.replaceChildren.apply(legend, all.map(function (entry) {
        const button = document.createElement("button");
        button.type = "button";
        button.className = "legend-entry";
        button.dataset.entry = entry.id;
        const swatch = document.createElement("span");
        swatch.className = "swatch";
        swatch.style.background = entry.color;
        button.append(swatch, entry.name);
        let pending = null;
        button.addEventListener("click", function () {
          clearTimeout(pending);
          pending = setTimeout(function () { toggle(entry.id); }, 250);
        });
        button.addEventListener("dblclick", function () { clearTimeout(pending); solo(entry.id); });
        return button;
      }));
    }
    legend.querySelectorAll(".legend-entry").forEach(function (button) {
      const shown = !state.hidden.has(button.dataset.entry);
      button.classList.toggle("off", !shown);
      button.setAttribute("aria-pressed", String(shown));
    });
  }

  // Grouped: a row per group with its runs' success as mean ± sample std (the server's group summary).
  function showGroups(all) {
    const section = document.getElementById("group-summary");
    const groups = all.filter(function (entry) { return entry.group; });
    section.hidden = !groups.length;
    if (!groups.length) return;
    document.getElementById("group-summary-title").textContent = "Groups by " + state.groupBy;
    const body = document.querySelector("#group-table tbody");
    body.replaceChildren.apply(body, groups.map(function (entry, i) {
      const group = state.data.groups[i], summary = group.summary, size = group.runs.length;
      const row = document.createElement("tr");
      const name = document.createElement("td");
      const swatch = document.createElement("span");
      swatch.className = "swatch";
      swatch.style.background = entry.color;
      name.append(swatch, group.value === "" ? "(none)" : group.value);
      const cells = [String(size)].concat(["final_success", "best_success", "val_success"].map(function (key) {
        return spread(summary[key], size);
      }));
      const collapsed = summary.collapsed;
      cells.push(collapsed.runs ? collapsed.runs + " of " + collapsed.of + " (step" + (collapsed.runs > 1 ? "s " : " ") +
                 collapsed.steps.join(", ") + ")" : "none of " + collapsed.of);
      row.append(name);
      cells.forEach(function (text) { const cell = document.createElement("td"); cell.textContent = text; row.append(cell); });
      return row;
    }));
  }

  // "0.512 ± 0.041", with "(2 of 3 runs)" when some runs have no value; one value has no spread.
  function spread(measure, size) {
    if (!measure.n) return "–";
    const text = significant(measure.mean) + (measure.std === null ? "" : " ± " + significant(measure.std));
    return measure.n < size ? text + " (" + measure.n + " of " + size + " runs)" : text;
  }

  // The tables' swatches take the colour of the line that draws their run: its own, or its group's.
  function colourSwatches(all) {
    const colour = {};
    all.forEach(function (entry) { entry.runs.forEach(function (id) { colour[id] = entry.color; }); });
    document.querySelectorAll(".swatch[data-run]").forEach(function (swatch) {
      swatch.style.background = colour[swatch.dataset.run] || colorOf[swatch.dataset.run];
    });
  }

  // A zoom, pan or double-click on one chart: every chart and the address follow.
  function zoomed(change) {
    if (state.syncing) return;
    const range = window.EchoChartView.zoomedRange(change);
    if (range !== undefined) zoomTo(range);
  }

  function zoomTo(range) {
    state.xrange = range;
    saveView();
    if (!followZoom()) scheduleRender();
  }
  const rangeForm = window.EchoChartView.rangeForm(zoomTo);
  const RANGE_UNITS = { step: "steps", onset: "steps relative to onset", time: "minutes" };

  function saveView() {
    window.EchoChartView.save({ xmode: state.xmode, xrange: state.xrange, smoothing: state.smoothing });
  }

  // The steps the chart data covers follow a zoom by step into runs held as buckets (50 to 1,000 points a
  // run over all its steps): the zoomed range comes at its own resolution, so its points and spikes show;
  // unzoomed (or aligned at onset, or against time, whose x is not a step), every step again. Returns
  // whether it reloads.
  function followZoom() {
    const held = Object.values(state.data.series).some(function (run) {
      return Object.values(run).some(function (s) { return s.downsampled; });
    });
    const range = xAxis() === "step" && state.xrange && (held || state.dataRange)
      ? window.EchoChartView.zoomedSteps(state.xrange) : null;
    if (String(range) === String(state.dataRange)) return false;
    state.dataRange = range;
    load({ sameEntries: true });
    return true;
  }

  function toggle(id) {
    if (state.hidden.has(id)) state.hidden.delete(id); else state.hidden.add(id);
    saveShown();
    scheduleRender();
  }

  function solo(id) {
    const ids = entries().map(function (entry) { return entry.id; });
    const alone = ids.every(function (other) { return other === id || state.hidden.has(other); }) && !state.hidden.has(id);
    // runs hidden before a grouping keep their place for when the lines are one per run again
    const elsewhere = Array.from(state.hidden).filter(function (other) { return !ids.includes(other); });
    state.hidden = new Set(elsewhere.concat(alone ? [] : ids.filter(function (other) { return other !== id; })));
    saveShown();
    scheduleRender();
  }

  // Grouping, "Align at onset", the bands and the lines hidden with the legend as the address says (a copied
  // link draws the same), else the page's defaults: the ablation's grouping, no alignment, bands on, every
  // line shown. A field the runs do not have is ignored, and so is a hidden entry the page does not draw.
  // Aligned lines, and lines against training time, are one per run: the grouping waits (kept in the
  // address) until Align is unticked or the x axis is the step again.
  function shownInAddress(xmode) {
    const query = new URLSearchParams(window.location.search);
    const group = query.get("group");
    const aligned = query.get("align") === "1";
    const perRun = aligned || xmode === "time";
    const chosen = group !== null && (group === "" || page.group_fields.includes(group)) ? group : page.group_by;
    return { groupBy: perRun ? "" : chosen, groupWaiting: perRun ? chosen : "", aligned: aligned,
             bands: query.get("bands") !== "0", hidden: (query.get("hide") || "").split(",").filter(isEntryOnPage) };
  }

  // "run-<id>" of a run on this page, or "group-<n>" (a group's place: checked against the groups drawn).
  function isEntryOnPage(id) {
    const match = /^(run|group)-(\d+)$/.exec(id);
    return Boolean(match) && (match[1] === "group" || match[2] in colorOf);
  }

  function saveShown() {
    const url = new URL(window.location.href);
    const group = state.groupWaiting || state.groupBy;
    if (group === page.group_by) url.searchParams.delete("group"); else url.searchParams.set("group", group);
    if (state.aligned) url.searchParams.set("align", "1"); else url.searchParams.delete("align");
    if (state.bands) url.searchParams.delete("bands"); else url.searchParams.set("bands", "0");
    if (state.hidden.size) url.searchParams.set("hide", Array.from(state.hidden).join(",")); else url.searchParams.delete("hide");
    window.history.replaceState(null, "", url);
  }

  function setupControls() {
    document.getElementById("group-by").value = state.groupBy;
    document.getElementById("align-onset").checked = state.aligned;
    document.getElementById("bands").checked = state.bands;
    const slider = document.getElementById("smoothing");
    slider.value = String(state.smoothing);
    document.getElementById("smoothing-value").textContent = slider.value;
    slider.addEventListener("input", function () {
      state.smoothing = Number(slider.value);
      document.getElementById("smoothing-value").textContent = slider.value;
      saveView();
      scheduleRender();
    });
    // Aligned lines, and lines against training time, are one per run (a group's runs collapse at different
    // steps, and each keeps its own clock): choosing one turns the others off, and the page says so.
    const exclusive = document.getElementById("exclusive-note");
    function sayExclusive(text) {
      exclusive.textContent = text;
      exclusive.hidden = !text;
    }
    const xSelect = document.getElementById("x-axis"), groupSelect = document.getElementById("group-by");
    const alignBox = document.getElementById("align-onset");
    xSelect.value = state.xmode;
    groupSelect.addEventListener("change", function () { setLines({ groupBy: groupSelect.value }); });
    alignBox.addEventListener("change", function () { setLines({ aligned: alignBox.checked }); });
    xSelect.addEventListener("change", function () { setLines({ xmode: xSelect.value }); });

    // The one rule between the three: lines aligned at onset, or against training time, are one per run
    // (a group's runs collapse at different steps, and each keeps its own clock), so a grouping waits while
    // either is on and comes back after; grouped or aligned lines are drawn by step. The control just
    // changed (`asked`) wins, the others give way, and the page says which. A zoom in the old axis' units
    // is let go; the data is fetched again when the lines or their clocks change.
    function setLines(asked) {
      const axis = xAxis(), grouped = state.groupBy, zoomedSteps = state.dataRange !== null;
      let said = "";
      if ("groupBy" in asked) {
        state.groupBy = asked.groupBy;
        state.groupWaiting = "";
        if (state.groupBy && state.aligned) said = "Align at onset is off while runs are grouped: a group's runs collapse at different steps.";
        else if (state.groupBy && state.xmode === "time") said = "The x axis is the step while runs are grouped: each run keeps its own clock.";
        if (state.groupBy) { state.aligned = false; state.xmode = "step"; }
      } else {
        if (asked.aligned && state.xmode === "time") said = "Aligned at onset, the x axis counts steps from each run's first collapse, not training time.";
        if (asked.xmode === "time" && state.aligned) said = "Align at onset is off against training time.";
        if ("aligned" in asked) { state.aligned = asked.aligned; if (state.aligned) state.xmode = "step"; }
        if ("xmode" in asked) { state.xmode = asked.xmode; if (state.xmode === "time") state.aligned = false; }
        const perRun = state.aligned || state.xmode === "time";
        if (perRun && state.groupBy) {
          state.groupWaiting = state.groupBy;
          state.groupBy = "";
          said = state.aligned ? "Grouping is off while lines are aligned at onset (each run collapses at its own step); unticking brings it back."
                               : "Grouping is off against training time (each run keeps its own clock); the step axis brings it back.";
        } else if (!perRun && state.groupWaiting) {
          state.groupBy = state.groupWaiting;
          state.groupWaiting = "";
        }
      }
      if (xAxis() !== axis) state.xrange = state.dataRange = null;  // steps, steps from onset, minutes
      groupSelect.value = state.groupBy;
      alignBox.checked = state.aligned;
      xSelect.value = state.xmode;
      sayExclusive(said);
      saveView();
      saveShown();
      const clocksMissing = xAxis() === "time" && !(state.data && state.data.clocks);
      if (state.groupBy !== grouped || clocksMissing) load();
      else if (zoomedSteps && state.dataRange === null) load({ sameEntries: true });  // every step again
      else scheduleRender();
    }
    document.getElementById("bands").addEventListener("change", function (event) {
      state.bands = event.target.checked;
      saveShown();
      load({ sameEntries: true });  // the same lines, with or without their bands: the hidden ones stay hidden
    });
    const picker = document.getElementById("other-keys");
    if (picker) picker.addEventListener("change", extraKeysChanged);
    document.getElementById("diff-only").addEventListener("change", function (event) {
      document.getElementById("config-diff").classList.toggle("only-diff", event.target.checked);
    });
    const table = document.getElementById("summary-table");
    // Each sortable header's label becomes a button: reached with Tab, pressed with Enter or Space, and
    // the column's aria-sort says the order to a screen reader (as on the runs page's links). A click
    // anywhere in the header cell sorts, not only on its label: a wide column's label is a small target.
    // Click: ascending, click again: descending; the address keeps the order.
    table.querySelectorAll("thead th[data-type]").forEach(function (th) { sortableHeader(table, th); });
    sortAsInAddress(table);
    table.addEventListener("change", function (event) {
      const box = event.target;
      if (box.id === "draw-all") {
        select(box.checked ? page.runs.map(function (run) { return run.id; }) : []);
      } else if (box.classList.contains("draw-run")) {
        if (box.checked) state.selected.add(Number(box.value)); else state.selected.delete(Number(box.value));
        selectionChanged();
      }
    });
    document.getElementById("draw-top").addEventListener("click", function () {
      select(Array.from(table.tBodies[0].rows).slice(0, TOP_ROWS).map(function (row) { return Number(row.dataset.run); }));
    });
  }

  function select(ids) {
    state.selected = new Set(ids);
    selectionChanged();
  }

  function selectionChanged() {
    saveDrawn();
    if (state.groupBy) load(); else scheduleRender();
  }

  // The runs drawn, when not every compared run, kept in the address (?draw=3,7): a copied link draws
  // the same subset. Ids not compared are ignored; no ?draw= draws them all.
  function drawnInAddress() {
    const ids = page.runs.map(function (run) { return run.id; });
    const text = new URLSearchParams(window.location.search).get("draw");
    if (text === null) return ids;
    if (text === "") return [];  // every run unticked
    // Database ids as the server reads them (webapp.core.converters.parse_id): Number("0x3") is 3 too.
    const asked = new Set(text.split(",").filter(function (part) { return /^[0-9]{1,19}$/.test(part); }).map(Number));
    const drawn = ids.filter(function (id) { return asked.has(id); });
    return drawn.length ? drawn : ids;  // none of them here: every run (the page's notice says so)
  }

  function saveDrawn() {
    const url = new URL(window.location.href);
    const drawn = page.runs.filter(function (run) { return state.selected.has(run.id); });
    if (drawn.length === page.runs.length) url.searchParams.delete("draw");
    else url.searchParams.set("draw", drawn.map(function (run) { return run.id; }).join(","));
    window.history.replaceState(null, "", url);
  }

  // The table's checkboxes and counter follow the selection.
  function showSelection() {
    let ticked = 0;
    document.querySelectorAll("#summary-table input.draw-run").forEach(function (box) {
      box.checked = state.selected.has(Number(box.value));
      ticked += box.checked;
    });
    const all = document.getElementById("draw-all");
    all.checked = ticked === page.runs.length;
    all.indeterminate = ticked > 0 && ticked < page.runs.length;
    // The count is what the charts show: ticked runs (or groups of them) hidden with the legend (a click, or
    // a double-click's "show alone") are not drawn, nor, aligned at onset, runs without a collapse, nor,
    // against training time, runs without a clock.
    let drawn = ticked, hidden = 0;
    if (state.data) {
      const shown = new Set(), entered = new Set();
      entries().forEach(function (entry) {
        entry.runs.forEach(function (id) { entered.add(id); if (!state.hidden.has(entry.id)) shown.add(id); });
      });
      drawn = shown.size;
      hidden = entered.size - shown.size;
    }
    const why = [];
    if (hidden) why.push(hidden + " hidden with the legend");
    const without = xAxis() === "onset" ? " with no collapse to align at" : " with no seconds per step logged";
    if (ticked - drawn - hidden > 0) why.push(ticked - drawn - hidden + without);
    document.getElementById("draw-count").textContent = "Drawing " + drawn + " of " + page.runs.length + " run" +
      (page.runs.length === 1 ? "" : "s") + (why.length ? " (ticked but " + why.join(", ") + ")." : ".");
  }

  // A header whose label is a button that sorts by its column (a click anywhere in the cell too).
  function sortableHeader(table, th) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "sort-button";
    while (th.firstChild) button.appendChild(th.firstChild);
    th.appendChild(button);
    th.addEventListener("click", function () {  // the button's too
      sortBy(table, th, th.getAttribute("aria-sort") === "ascending");
      saveSort(th);
    });
  }

  // The runs table sorted by a header's column. Empty cells (unknown values) always go last.
  function sortBy(table, th, descending) {
    table.querySelectorAll("thead th").forEach(function (other) { other.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", descending ? "descending" : "ascending");
    const numeric = th.dataset.type === "number", column = th.cellIndex;
    const body = table.tBodies[0];
    const rows = Array.from(body.rows);
    rows.sort(function (a, b) {
      const x = a.cells[column].dataset.sort, y = b.cells[column].dataset.sort;
      if (x === "" || y === "") return (x === "") - (y === "");
      const order = numeric ? Number(x) - Number(y) : x.localeCompare(y, undefined, { numeric: true });
      return descending ? -order : order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }

  // The runs table's order in the address, by the column's name (its data-column, the name of its CSV
  // column): ?sort=final_success, or ?sort=-final_success for descending. A name the table does not have
  // leaves the page's order (the page's notice says so).
  function sortAsInAddress(table) {
    const sort = new URLSearchParams(window.location.search).get("sort") || "";
    const descending = sort.startsWith("-"), name = descending ? sort.slice(1) : sort;
    const th = Array.from(table.querySelectorAll("thead th[data-column]")).find(function (header) {
      return header.dataset.column === name;
    });
    if (th) sortBy(table, th, descending);
  }

  function saveSort(th) {
    const url = new URL(window.location.href);
    url.searchParams.set("sort", (th.getAttribute("aria-sort") === "descending" ? "-" : "") + th.dataset.column);
    window.history.replaceState(null, "", url);
  }

  // The page loads this script before plotly.js, so that the data request runs while the browser
  // parses plotly.js (0.3-0.5 s); drawing waits for the scripts after this one (Plotly, smoothing).
  const scriptsLoaded = new Promise(function (resolve) {
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", resolve); else resolve();
  });
  placeExtraCharts();
  load({ sameEntries: true });  // the lines the address hides stay hidden
  scriptsLoaded.then(setupControls);
})();
