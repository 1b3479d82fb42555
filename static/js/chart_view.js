// The view of a page's charts kept in its address, so that a copied link opens the same view: the x
// axis (?x=time, the run page's), the x range every chart shows (?xrange=10,50), the smoothing
// (?smooth=0.6) and the run page's detector's view (?detector=1). Shared by the run and compare pages;
// each keeps the rest of its address as it is. Also the addresses of their chart data requests (keyUrls).
window.EchoChartView = {
  // Text that Plotly draws as written: in titles, trace names and hover text it reads <b>, <br>, <a>
  // and entities, so a key or run logged as "<b>x</b>" would be drawn bold.
  plainText: function (text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  },

  // The whole steps a zoom by step covers ([from, through], from 0): the range a zoom into runs held as
  // buckets fetches at its own resolution (?after=from-1&through=through).
  zoomedSteps: function (xrange) {
    return [Math.max(0, Math.floor(xrange[0])), Math.max(1, Math.ceil(xrange[1]))];
  },

  // A key as a chart's title or legend names it: one of 250 characters was clipped at both ends of a
  // centred title, so keys alike but in their last characters (custom/....0, custom/....3) read the same.
  // Longer than `max`, its middle gives way to an ellipsis; its start and its end stay.
  shortName: function (text, max) {
    const chars = Array.from(String(text)), limit = max || 60;
    if (chars.length <= limit) return String(text);
    const head = Math.floor((limit - 1) * 0.45);
    return chars.slice(0, head).join("") + "\u2026" + chars.slice(chars.length - (limit - 1 - head)).join("");
  },

  // A detector event's name as its marker's hover heads it: "warning: grad_spike", but "collapse" for the
  // collapse rule's own level (not "collapse: collapse").
  eventTitle: function (event) {
    return event.level === event.rule ? event.level : event.level + ": " + event.rule;
  },

  // Each detector level's marker shape, the same on the run and compare pages, so that a level reads from
  // its shape as well as its colour (the compare page colours markers by run). Keys: the pages' event keys.
  eventSymbol: function (level) {
    return { info: "diamond-open", warning: "circle-open", collapse: "x", resolved: "triangle-up-open" }[level] || "circle";
  },

  // The switches above a chart ("log scale", "table"), put before its plot: each a tick box named for its
  // chart, calling changed(ticked) when ticked or unticked.
  chartTools: function (plot, switches) {
    const tools = document.createElement("div");
    tools.className = "chart-tools";
    switches.forEach(function (wanted) {
      const label = document.createElement("label");
      const box = document.createElement("input");
      box.type = "checkbox";
      box.className = wanted.className;
      box.checked = wanted.checked;
      box.setAttribute("aria-label", wanted.name);
      box.addEventListener("change", function () { wanted.changed(box.checked); });
      label.append(box, " " + wanted.text);
      tools.append(label);
    });
    plot.parentNode.insertBefore(tools, plot);
  },

  // A chart shown as a table (its "table" switch on) or not: the plot hidden and the scrolling region for
  // its table returned, after the plot (made on first use, then reused: the focus stays in it); or the
  // region gone, the plot shown, and null.
  tableInsteadOf: function (plot, asTable, label) {
    const id = "table-" + plot.id.replace(/^chart-/, "");
    let region = document.getElementById(id);
    plot.hidden = asTable;
    if (!asTable) {
      if (region) region.remove();
      return null;
    }
    if (!region) {
      region = document.createElement("div");
      region.id = id;
      region.className = "chart-table table-scroll";
      region.tabIndex = 0;
      region.setAttribute("role", "region");
      region.setAttribute("aria-label", label);
      plot.parentNode.insertBefore(region, plot.nextSibling);
    }
    return region;
  },

  // A chart's values as a table (a chart's "table" switch, a panel's text version): `rows` are arrays of
  // cell texts, the first of each its row's header (the step), read out as a screen reader moves along it.
  valuesTable: function (caption, headers, rows) {
    const table = document.createElement("table");
    table.className = "data chart-values";
    table.createCaption().textContent = caption;
    const head = table.createTHead().insertRow();
    headers.forEach(function (text) {
      const cell = document.createElement("th");
      cell.scope = "col";
      cell.textContent = text;
      head.append(cell);
    });
    const body = table.createTBody();
    rows.forEach(function (cells) {
      const row = body.insertRow();
      const header = document.createElement("th");
      header.scope = "row";
      header.textContent = cells[0];
      row.append(header);
      cells.slice(1).forEach(function (text) { row.insertCell().textContent = text; });
    });
    return table;
  },

  // Cells beyond this are left out of a table, by rows (its caption says so): a table of 2,000 rows of 100
  // runs' columns (runs aligned at their onsets share few x values) took seconds to build in chromium.
  TABLE_CELLS: 50000,

  // How many rows of a table of `columns` columns are shown.
  rowsShown: function (columns) {
    return Math.max(1, Math.floor(this.TABLE_CELLS / Math.max(1, columns)));
  },

  // " (N rows)", as a table's caption counts them, saying when only the first are shown.
  rowsCaption: function (count, columns) {
    const shown = this.rowsShown(columns);
    return " (" + count + " rows" + (count > shown ? ", the first " + shown + " shown: zoom in for the rest" : "") + ")";
  },

  // Put the table in `region`, unless it holds this very table already: a poll or a redraw that changed
  // nothing leaves a screen reader's place in it (and the browser's time) alone.
  fillTable: function (region, caption, headers, rows) {
    const shown = rows.slice(0, this.rowsShown(headers.length));
    const key = JSON.stringify([caption, headers, shown]);
    if (this.filledTables.get(region) === key) return;
    this.filledTables.set(region, key);
    region.replaceChildren(this.valuesTable(caption, headers, shown));
  },
  filledTables: new WeakMap(),  // region -> what fillTable last put in it

  // Whether a panel over steps shows `step`: inside the run page's zoom, when it zooms by step.
  inStepRange: function (step) {
    const view = this.shared;
    return view.xmode !== "step" || !view.xrange || (step >= view.xrange[0] && step <= view.xrange[1]);
  },

  // A value as a table shows it: four significant digits, as the hovers and the detector's messages write
  // them; "–" for none.
  cellText: function (value) {
    return value === null || value === undefined || !Number.isFinite(value) ? "–" : String(Number(value.toPrecision(4)));
  },

  // The JSON a chart data request answers; an Error with the API's message when it refuses, and its
  // problems by field (`errors`: {field: problem}) where the API names fields.
  getJson: async function (url) {
    const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
    const body = await response.json().catch(function () { return {}; });
    if (!response.ok) throw Object.assign(new Error(body.error || "HTTP " + response.status), { errors: body.errors || {} });
    return body;
  },

  // Servers and proxies refuse a longer request line (gunicorn's default limit is 4,094 bytes, nginx's 8k).
  URL_BUDGET: 3500,

  // The GET requests for `keys`, key=<key> each (a key may hold a comma), as few as keep every address
  // within URL_BUDGET characters and maxKeys keys: a run may log hundreds of keys with long names.
  // makeUrl(): a new URL holding every other parameter.
  keyUrls: function (makeUrl, keys, maxKeys) {
    const urls = [];
    let url = null, count = 0, length = 0;
    keys.forEach(function (key) {
      const added = 1 + new URLSearchParams({ key: key }).toString().length;  // "&key=..."
      if (url === null || count >= maxKeys || (count > 0 && length + added > window.EchoChartView.URL_BUDGET)) {
        url = makeUrl();
        urls.push(url);
        count = 0;
        length = url.href.length;
      }
      url.searchParams.append("key", key);
      count += 1;
      length += added;
    });
    return urls;
  },

  // A number as an address writes one: digits, a point, an exponent; webapp.core.chart_view reads the same
  // (Number() alone also takes "0x10" and " 1", Python's float() "1_0" and "inf": the page's notice and
  // its charts disagreed).
  DECIMAL: /^[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$/,
  decimal: function (text) {
    return window.EchoChartView.DECIMAL.test(text) ? Number(text) : NaN;
  },

  // Step -> minutes of training from a run's seconds-per-step series ({step, value, sums}): the running
  // sum, each value counted for the steps since the previous point, linear between points. A downsampled
  // bucket comes with the seconds all its points took (`sums`, from the server): its last value alone
  // would stand for every step in it. null without a point.
  trainingClock: function (s) {
    if (!s || !s.step.length) return null;
    const steps = [s.step[0] - 1], minutes = [0];
    let total = 0;
    s.step.forEach(function (step, i) {
      const seconds = s.value[i], sum = s.sums ? s.sums[i] : null;
      if (sum !== null && sum !== undefined) total += sum;
      else if (seconds !== null && Number.isFinite(seconds)) total += seconds * (step - steps[steps.length - 1]);
      steps.push(step);
      minutes.push(total / 60);
    });
    return { steps: steps, minutes: minutes };
  },

  minutesAt: function (clock, step) {
    const steps = clock.steps, minutes = clock.minutes;
    if (step <= steps[0]) return minutes[0];
    if (step >= steps[steps.length - 1]) return minutes[minutes.length - 1];
    let low = 0, high = steps.length - 1;
    while (high - low > 1) {
      const middle = (low + high) >> 1;
      if (steps[middle] <= step) low = middle; else high = middle;
    }
    const share = (step - steps[low]) / (steps[high] - steps[low]);
    return minutes[low] + share * (minutes[high] - minutes[low]);
  },

  read: function () {
    const query = new URLSearchParams(window.location.search);
    const decimal = window.EchoChartView.decimal;
    const weight = decimal(query.get("smooth") || "");
    const parts = (query.get("xrange") || "").split(",").map(decimal);
    return {
      xmode: query.get("x") === "time" ? "time" : "step",
      xrange: parts.length === 2 && parts.every(Number.isFinite) && parts[0] < parts[1] ? parts : null,
      smoothing: Number.isFinite(weight) && weight >= 0 && weight <= 0.99 ? weight : 0,
      detector: query.get("detector") === "1",  // the run page's detector's view
    };
  },

  save: function (view) {
    const url = new URL(window.location.href);
    const put = function (name, value) { if (value === null) url.searchParams.delete(name); else url.searchParams.set(name, value); };
    put("x", view.xmode === "time" ? "time" : null);
    put("xrange", view.xrange ? view.xrange.join(",") : null);
    put("smooth", view.smoothing > 0 ? String(view.smoothing) : null);
    put("detector", view.detector ? "1" : null);
    window.history.replaceState(null, "", url);
  },

  // The x range a plotly_relayout event sets: [low, high], null for "the whole axis again" (a double
  // click), undefined when the event is no x zoom (a y-only zoom, a resize). A double click resets an
  // axis to the range it was drawn with: the page's unzoomed span is "the whole axis" too.
  zoomedRange: function (change) {
    let range;
    if (change["xaxis.autorange"]) return null;
    if (change["xaxis.range[0]"] !== undefined) range = [change["xaxis.range[0]"], change["xaxis.range[1]"]];
    else if (Array.isArray(change["xaxis.range"])) range = change["xaxis.range"].slice();
    else return undefined;
    const rounded = range.map(function (x) { return Number(Number(x).toFixed(3)); });
    const span = this.shared.span;
    const whole = span && rounded.every(function (x, end) { return Math.abs(x - span[end]) < 1e-3; });
    return whole ? null : rounded;
  },

  // Plotly's x axis layout for a range (null: fit the data); `steps`: its values are whole steps.
  xaxis: function (title, range, steps) {
    const axis = range ? { title: { text: title }, range: range.slice(), autorange: false }
                       : { title: { text: title }, autorange: true };
    return range && steps ? Object.assign(axis, this.wholeTicks(range[0], range[1])) : axis;
  },

  // The x range of unzoomed charts from their data's lowest and highest x, padded so that end markers show
  // whole; null without data. The run and compare pages' one rule.
  paddedSpan: function (low, high) {
    if (!(low <= high)) return null;
    // One x alone: half a step (or minute) either side (Plotly's own fit of step 0 went from -1 to 1, ticked at halves).
    const pad = low < high ? (high - low) * 0.01 : 0.5;
    return [low - pad, high + pad];
  },

  // A y axis, linear or log. Across a decade or two Plotly labels a log axis's ticks between powers of ten
  // with a bare digit ("2, 1, 9 8 7 ... 2" for 0.4 .. 20: a tester read 0.4 as 4); a tick format gives
  // every tick its whole value.
  yaxis: function (log, extra) {
    return Object.assign({ type: log ? "log" : "linear" }, log ? { tickformat: "~g" } : {}, extra);
  },

  // On a log axis a value at or below 0 is a gap: Plotly drew the line down to the axis's floor, which
  // read as data. The chart says how many values it leaves out (logNote).
  positiveOnly: function (values) {
    return values.map(function (v) { return v !== null && v <= 0 ? null : v; });
  },

  positiveTrace: function (trace) {
    return Object.assign({}, trace, { y: window.EchoChartView.positiveOnly(trace.y) });
  },

  notPositive: function (values) {
    return values.filter(function (v) { return v !== null && v <= 0; }).length;
  },

  // The note above a log chart's top right corner: how many values it does not draw.
  logNote: function (count) {
    return { text: count + (count === 1 ? " value" : " values") + " ≤ 0 not drawn on the log scale",
             xref: "paper", yref: "paper", x: 1, y: 1, xanchor: "right", yanchor: "bottom", showarrow: false,
             font: { size: 11, color: "#b45309" } };
  },

  // The y range and ticks where Plotly's own fit misreads (otherwise its fit, said outright so that a
  // switch from one to the other does not keep the old range). Traces on "y2" (event markers) do not count.
  // - Linear, every drawn value one number (a constant learning rate): Plotly pads a lone value by 1
  //   either side, so 1e-6 lay on the floor of a 0..1 axis, unreadable; here half the value either side,
  //   and on a chart of fractions (bounds [0, 1]) its whole range: a constant 1 (every group with zero
  //   std) was drawn on an axis from 0.5 to 1.5, values a fraction cannot take.
  // - Log, values across 0.8 to two and a half decades: Plotly ticks every digit there (0.4 ... 0.9, 1,
  //   2 ... 9, 10), labelled as small bare digits that yaxis's tick format writes out whole, so they
  //   overlapped; the 1, 2 and 5 of each decade instead. From 0.8, not 1: Plotly pads the values, and a
  //   gradient norm from 0.57 to 5.4 (0.98 decades) got an axis of more than one, ticked at every digit.
  //   Any 0.8 decades hold at least two of 1, 2 and 5.
  yRange: function (traces, log, bounds) {
    let low = Infinity;
    let high = -Infinity;
    traces.forEach(function (trace) {
      if (trace.yaxis === "y2" || !trace.y) return;
      for (let i = 0; i < trace.y.length; i++) {
        const value = trace.y[i];
        if (value !== null && Number.isFinite(value) && !(log && value <= 0)) {
          low = Math.min(low, value);
          high = Math.max(high, value);
        }
      }
    });
    if (log) {
      const decades = Math.log10(high / low);
      return decades >= 0.8 && decades <= 2.5 ? { autorange: true, dtick: "D2" } : { autorange: true };
    }
    if (low !== high) return { autorange: true };
    if (bounds && low >= bounds[0] && low <= bounds[1]) {
      const margin = (bounds[1] - bounds[0]) / 50;  // a line at either end is not drawn on the frame
      return { range: [bounds[0] - margin, bounds[1] + margin], autorange: false };
    }
    if (low === 0) return { autorange: true };
    const pad = Math.abs(low) / 2;
    return { range: [low - pad, high + pad], autorange: false };
  },

  // Ticks on whole numbers only: over a few steps Plotly's own fall between them (0, 0.2, 0.4 ... 1).
  wholeTicks: function (low, high) {
    return high - low < 8 ? { tick0: 0, dtick: Math.max(1, Math.ceil((high - low) / 5)) } : {};
  },

  // The run page's view shared with the panels its other scripts draw over steps (the reward-std heat
  // strip, the collapse panel's MI chart): run.js announces {xmode, xrange, span, cursor} with share()
  // (span: the x range of the page's unzoomed charts, null before they have data), which
  // fires "echolab:view" on document when it changes; a panel draws its x axis with stepAxis() and
  // joins with joinStepAxis(), whose x zoom fires "echolab:zoom" ({xrange}) for run.js to apply to the
  // whole page. One mechanism, so every step chart on the page zooms and marks the cursor alike.
  shared: { xmode: "step", xrange: null, span: null, cursor: null },

  // Plotly's options for the run page's step charts: its own double-click would reset an axis to the
  // range of the chart's first draw (a live run's span at page load, or steps on a time axis); the page
  // handles the double-click instead (wholeOnDoubleClick), as "the whole run again".
  // (Read when drawn: the compare page loads chart_config.js after this file.)
  get stepConfig() { return Object.assign({}, window.EchoChartConfig, { doubleClick: false }); },

  // A zoom typed instead of dragged (a keyboard cannot drag across a chart; Plotly's toolbar is out of the
  // tab order): the page's #range-form sends its two ends, in the x axis' units, to apply([from, to]), and
  // "Whole run" sends apply(null). show(range, units) keeps its fields on the range the charts show and
  // says the units; "Whole run" shows only while zoomed.
  rangeForm: function (apply) {
    const form = document.getElementById("range-form");
    if (!form) return { show: function () {} };
    const from = form.elements.from, to = form.elements.to;
    const whole = form.querySelector(".range-whole"), error = form.querySelector(".range-error");
    const rounded = function (x) { return String(Number(x.toPrecision(6))); };
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      const low = Number(from.value), high = Number(to.value);
      const problem = from.value.trim() === "" || to.value.trim() === "" ? "give both ends"
        : !Number.isFinite(low) || !Number.isFinite(high) ? "both ends must be numbers"
        : low >= high ? "the first end must be below the second" : "";
      error.textContent = problem;
      [from, to].forEach(function (field) { field.setAttribute("aria-invalid", problem ? "true" : "false"); });
      if (!problem) apply([low, high]);
    });
    whole.addEventListener("click", function () {
      apply(null);
      from.focus();  // the button hides with the zoom
    });
    return {
      show: function (range, units) {
        form.querySelectorAll(".range-units").forEach(function (label) { label.textContent = units; });
        whole.hidden = !range;
        if (form.contains(document.activeElement) && document.activeElement !== whole) return;  // being typed
        from.value = range ? rounded(range[0]) : "";
        to.value = range ? rounded(range[1]) : "";
      },
    };
  },

  wholeOnDoubleClick: function (plot, whole) {
    if (plot.dataset.wholeOnDoubleClick) return;
    plot.dataset.wholeOnDoubleClick = "true";
    plot.on("plotly_doubleclick", whole);
  },

  share: function (view) {
    const next = { xmode: view.xmode, xrange: view.xrange ? view.xrange.slice() : null,
                   span: view.span ? view.span.slice() : null, cursor: view.cursor };
    if (JSON.stringify(next) === JSON.stringify(this.shared)) return;
    this.shared = next;
    document.dispatchEvent(new CustomEvent("echolab:view", { detail: next }));
  },

  // Layout for a panel whose x is the step: the page's x range when the page's axis is the step too
  // (in training time the panel keeps its own zoom and its title says why), and the cursor's line.
  // The uirevision changes with the axis so that a zoom kept from one axis does not outlive it.
  stepAxis: function (name) {
    const view = this.shared;
    const following = view.xmode === "step";
    const xaxis = following ? this.xaxis("step", view.xrange || view.span, true)
                            : { title: { text: "step (not training time: this chart has no time axis)" }, autorange: true };
    const cursor = view.cursor === null || view.cursor === undefined ? [] : [view.cursor];
    return {
      xaxis: xaxis,
      uirevision: name + "-" + view.xmode,
      shapes: cursor.map(function (step) {
        return { type: "line", xref: "x", yref: "paper", x0: step, x1: step, y0: 0, y1: 1,
                 line: { color: "#374151", width: 1.5, dash: "dash" } };
      }),
      annotations: cursor.map(function (step) {
        return { text: "step " + step, x: step, xref: "x", y: 1, yref: "paper", yanchor: "bottom",
                 showarrow: false, font: { size: 11, color: "#374151" } };
      }),
    };
  },

  // Call after each draw of a panel's plot: the first time, its x zoom (on the step axis) becomes the
  // page's and the page's view changes redraw it (redraw: the panel's own draw of its last data).
  joinStepAxis: function (plot, redraw) {
    if (plot.dataset.stepAxisJoined) return;
    plot.dataset.stepAxisJoined = "true";
    const chartView = this;
    plot.on("plotly_relayout", function (change) {
      const range = chartView.zoomedRange(change);
      if (range === undefined || chartView.shared.xmode !== "step") return;  // in training time the zoom stays here
      if (JSON.stringify(range) === JSON.stringify(chartView.shared.xrange)) return;  // the page's own range, drawn
      document.dispatchEvent(new CustomEvent("echolab:zoom", { detail: { xrange: range } }));
    });
    this.wholeOnDoubleClick(plot, function () {
      if (chartView.shared.xmode !== "step") return;
      document.dispatchEvent(new CustomEvent("echolab:zoom", { detail: { xrange: null } }));
    });
    document.addEventListener("echolab:view", redraw);
  },

  // The reader's panel choices, kept in this browser for every run page and the compare page: each chart's
  // y scale (by its keys: the same chart on every page) and the run page's folded sections.
  PANELS_KEY: "echolab.run-panels",
  panelPrefs: function () {
    let prefs = {};
    try { prefs = JSON.parse(window.localStorage.getItem(this.PANELS_KEY)) || {}; } catch (error) { /* none */ }
    prefs.scale = prefs.scale || {};    // chart (its keys) -> "log" | "linear"
    prefs.folded = prefs.folded || {};  // section id -> true when folded
    return prefs;
  },
  savePanelPrefs: function (prefs) {
    try {
      window.localStorage.setItem(this.PANELS_KEY, JSON.stringify(prefs));
    } catch (error) { /* storage off (private mode): choices last until the page closes */ }
  },
  isLog: function (prefs, chart) {  // the reader's choice, else the chart's default (the gradient norm: log)
    const chosen = prefs.scale[chart.keys.join(",")];
    return chosen ? chosen === "log" : Boolean(chart.log);
  },
  chooseScale: function (prefs, chart, log) {
    prefs.scale[chart.keys.join(",")] = log ? "log" : "linear";
    this.savePanelPrefs(prefs);
  },
};
