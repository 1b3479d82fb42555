"""What a Plotly chart on a page has drawn, read from its SVG as a person would see it (not from the
data the page handed to Plotly): the vertices of each line, the markers, the x axis tick labels."""

DRAWN = """(id) => {
  const chart = document.getElementById(id);
  const vertices = (d) => d ? (d.match(/[ML]/g) || []).length : 0;
  return {
    lines: Array.from(chart.querySelectorAll('.scatterlayer .trace')).map(
      (trace) => Array.from(trace.querySelectorAll('path.js-line'))
        .reduce((n, p) => n + vertices(p.getAttribute('d')), 0)),
    markers: Array.from(chart.querySelectorAll('.scatterlayer .trace')).map(
      (trace) => trace.querySelectorAll('.points path.point').length),
    shapes: chart.querySelectorAll('.shapelayer path').length,
    xticks: Array.from(chart.querySelectorAll('.xaxislayer-above .xtick text')).map((t) => t.textContent),
    yticks: Array.from(chart.querySelectorAll('.yaxislayer-above .ytick text')).map((t) => t.textContent),
    texts: Array.from(chart.querySelectorAll('.annotation-text, .gtitle')).map((t) => t.textContent),
    legend: Array.from(chart.querySelectorAll('.legend .legendtext')).map((t) => t.textContent),
  };
}"""


def drawn(page, chart: str) -> dict:
    """What chart `chart-<chart>` draws: {lines: [vertices per trace], markers: [markers per trace],
    shapes, xticks and yticks: [labels], texts: [title and annotations], legend: [entries' text]}."""
    return drawn_element(page, f"chart-{chart}")


def drawn_element(page, element_id: str) -> dict:
    """What the Plotly chart in the element `element_id` draws, as drawn() says."""
    return page.evaluate(DRAWN, element_id)


def last_tick(page, chart: str) -> float:
    """The x axis' largest tick label as a number (Plotly writes minus as U+2212, thousands with commas)."""
    ticks = [float(t.replace("\u2212", "-").replace(",", "")) for t in drawn(page, chart)["xticks"] if t]
    return max(ticks) if ticks else float("nan")


def write_points(run_id: int, points: list[tuple[int, str, float]]):
    """Write (step, key, value) points into a run EchoLab trains, with its latest_metrics, as its worker's
    sink does (the ingest API takes points only for runs trained elsewhere)."""
    from webapp.metrics.models import MetricPoint

    MetricPoint.write_batch(run_id, points, latest_metrics=True)
