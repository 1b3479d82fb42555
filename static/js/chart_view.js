// The view of a page's charts kept in its address, so that a copied link opens the same view: the x
// axis (?x=time, the run page's), the x range every chart shows (?xrange=10,50), the smoothing
// (?smooth=0.6) and the run page's detector's view (?detector=1). Shared by the run and compare pages;
// each keeps the rest of its address as it is.
window.EchoChartView = {
  read: function () {
    const query = new URLSearchParams(window.location.search);
    const smooth = query.get("smooth");
    const weight = smooth === null || smooth === "" ? NaN : Number(smooth);
    const parts = (query.get("xrange") || "").split(",").map(function (part) { return part === "" ? NaN : Number(part); });
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
  // click), undefined when the event is no x zoom (a y-only zoom, a resize).
  zoomedRange: function (change) {
    let range;
    if (change["xaxis.autorange"]) return null;
    if (change["xaxis.range[0]"] !== undefined) range = [change["xaxis.range[0]"], change["xaxis.range[1]"]];
    else if (Array.isArray(change["xaxis.range"])) range = change["xaxis.range"].slice();
    else return undefined;
    return range.map(function (x) { return Number(Number(x).toFixed(3)); });
  },

  // Plotly's x axis layout for a range (null: fit the data).
  xaxis: function (title, range) {
    return range ? { title: { text: title }, range: range.slice(), autorange: false }
                 : { title: { text: title }, autorange: true };
  },
};
