// Run selection for the compare page. Ticks are kept in localStorage, so runs ticked on several
// experiment pages add up; the tray links to /compare?runs=<ids in the order ticked>.
(function () {
  "use strict";

  const STORE = "echolab.compare.runs";
  const tray = document.getElementById("compare-tray");
  const max = Number(tray.dataset.max);

  function load() {
    try {
      const ids = JSON.parse(window.localStorage.getItem(STORE) || "[]");
      return Array.isArray(ids) ? ids.filter(Number.isInteger) : [];
    } catch (error) {
      return [];
    }
  }

  function save(ids) {
    window.localStorage.setItem(STORE, JSON.stringify(ids));
    show(ids);
  }

  function boxes() {
    return Array.from(document.querySelectorAll("input.compare-select"));
  }

  function show(ids) {
    boxes().forEach(function (box) { box.checked = ids.indexOf(Number(box.value)) >= 0; });
    document.querySelectorAll("input.compare-select-all").forEach(function (all) {
      const mine = boxes().filter(function (box) { return box.closest("table") === all.closest("table"); });
      all.checked = mine.length > 0 && mine.every(function (box) { return box.checked; });
    });
    tray.hidden = ids.length === 0;
    document.getElementById("compare-count").textContent =
      ids.length + " run" + (ids.length === 1 ? "" : "s") + " selected";
    const link = document.getElementById("compare-selected");
    link.href = tray.dataset.url + "?runs=" + ids.join(",");
    document.getElementById("compare-limit").textContent = ids.length > max
      ? "the compare page shows at most " + max + " runs: it will show the first " + max : "";
  }

  function set(ids, id, on) {
    const at = ids.indexOf(id);
    if (on && at < 0) ids.push(id);
    if (!on && at >= 0) ids.splice(at, 1);
    return ids;
  }

  document.addEventListener("change", function (event) {
    const target = event.target;
    if (target.matches("input.compare-select")) {
      save(set(load(), Number(target.value), target.checked));
    } else if (target.matches("input.compare-select-all")) {
      let ids = load();
      boxes().filter(function (box) { return box.closest("table") === target.closest("table"); })
        .forEach(function (box) { ids = set(ids, Number(box.value), target.checked); });
      save(ids);
    }
  });
  document.getElementById("compare-clear").addEventListener("click", function () { save([]); });
  window.addEventListener("storage", function () { show(load()); });  // ticks in another tab
  document.addEventListener("echolab:part-updated", function () { show(load()); });  // fresh rows (live_part.js)
  // Runs just deleted (the runs table's "Delete N selected") leave the selection: ticked, they would be
  // counted and sent to Compare and Export, which no longer find them.
  const forget = (tray.dataset.forget || "").split(",").map(Number).filter(Boolean);
  if (forget.length) save(load().filter(function (id) { return forget.indexOf(id) < 0; }));
  show(load());
})();
