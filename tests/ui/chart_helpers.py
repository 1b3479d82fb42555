"""Reading and zooming a drawn Plotly chart as a person does: its x tick labels, a mouse drag."""

from tests.drawn_charts import drawn_element


def ticks(page, chart):
    return element_ticks(page, f"chart-{chart}")


def element_ticks(page, element_id):
    """The x tick labels, as numbers, of the Plotly chart in the element `element_id`."""
    labels = drawn_element(page, element_id)["xticks"]
    return [float(t.replace("\u2212", "-").replace(",", "")) for t in labels if t]


def drag_across(page, chart, start=0.3, end=0.6):
    """A mouse drag across the middle of a chart's plot area, as a person zooms."""
    drag_element(page, f"chart-{chart}", start, end)


def drag_element(page, element_id, start=0.3, end=0.6):
    """drag_across on the Plotly chart in the element `element_id`."""
    area = page.locator(f"#{element_id} .nsewdrag").first
    area.scroll_into_view_if_needed()  # the mouse reaches only what is on screen
    box = area.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * start, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * (start + end) / 2, y, steps=5)
    page.mouse.move(box["x"] + box["width"] * end, y, steps=5)
    page.mouse.up()
