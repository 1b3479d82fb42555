"""What a Plotly chart on a page has drawn, read from its SVG as a person would see it (not from the
data the page handed to Plotly): the vertices of each line, the markers, the x axis tick labels."""

import json
import urllib.request

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


def post_points(base: str, run_id: int, token: str, points: list[tuple[int, str, float]]):
    """Send points through the real ingest API, as the trainer's HTTP sink does."""
    body = json.dumps([{"step": step, "key": key, "value": value} for step, key, value in points]).encode()
    request = urllib.request.Request(
        f"{base}/api/runs/{run_id}/metrics",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200, response.read()
