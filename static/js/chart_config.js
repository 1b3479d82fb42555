// Plotly options shared by every chart: fit the container, no Plotly logo, and no "Share chart"
// button (it uploads to Plotly's cloud, which a self-hosted install neither has nor may reach).
// A double-click (zoom back to the whole run) may take 500 ms between its clicks, the desktop systems'
// default, not Plotly's 300 ms: on a busy machine the page handled the second click too late and saw two
// single clicks (a browser test failed so under a loaded CI run).
// On a phone-wide screen the toolbar (shown for good after a tap: touch has no hover) sat on the charts'
// centred titles; there it is left out: a drag still zooms and a double tap still zooms back out.
// Elsewhere it keeps four buttons: the download, zoom and pan modes, and the reset. Plotly's seven covered
// the end of a centred title on a half-width chart ("Success (train and validation)" lost its last word
// on hover); zoom in, zoom out and autoscale do what a drag and the reset (or a double click) do.
window.EchoChartConfig = Object.freeze({
  responsive: true, displaylogo: false, showSendToCloud: false, doubleClickDelay: 500,
  displayModeBar: window.matchMedia("(max-width: 600px)").matches ? false : "hover",
  modeBarButtonsToRemove: ["zoomIn2d", "zoomOut2d", "autoScale2d", "lasso2d", "select2d"],
});

// Each chart's toolbar is 9 buttons: on a run page of 50 charts, 450 Tab stops before the events table.
// Keyboard users get the page's own controls instead (smoothing, x axis, "Show as table", the events
// list); the toolbar stays a mouse tool, out of the Tab order.
new MutationObserver(function () {
  document.querySelectorAll(".modebar-btn:not([tabindex='-1'])").forEach(function (button) {
    button.tabIndex = -1;
  });
}).observe(document.documentElement, { childList: true, subtree: true });
