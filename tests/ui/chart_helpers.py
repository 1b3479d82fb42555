"""Reading and zooming a drawn Plotly chart as a person does: its x tick labels, a mouse drag."""

from tests.drawn_charts import drawn


def ticks(page, chart):
    return [float(t.replace("\u2212", "-").replace(",", "")) for t in drawn(page, chart)["xticks"] if t]


def drag_across(page, chart, start=0.3, end=0.6):
    """A mouse drag across the middle of a chart's plot area, as a person zooms."""
    box = page.locator(f"#chart-{chart} .nsewdrag").first.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * start, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * (start + end) / 2, y, steps=5)
    page.mouse.move(box["x"] + box["width"] * end, y, steps=5)
    page.mouse.up()
