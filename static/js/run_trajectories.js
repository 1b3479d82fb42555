// Trajectory viewer: the step slider picks a step that has samples and reloads the page; the filters
// show only the samples of an outcome, a minimum total reward, or a format validity. The server draws the
// page already filtered by the address; a filter changed here is written back to the address, so a
// reload, a shared link and the next step keep it.
(function () {
  "use strict";

  function setupFilters() {
    const form = document.getElementById("trajectory-filters");
    if (!form) return;
    const outcome = document.getElementById("filter-outcome");
    const reward = document.getElementById("filter-reward");
    const format = document.getElementById("filter-format");
    const samples = Array.from(document.querySelectorAll("section.trajectory"));
    function apply() {
      const least = reward.value === "" ? null : Number(reward.value);
      let shown = 0;
      samples.forEach(function (sample) {
        const value = sample.dataset.reward === "" ? null : Number(sample.dataset.reward);
        const keep = (!outcome.value || sample.dataset.success === outcome.value) &&
          (!format.value || sample.dataset.format === format.value) &&
          (least === null || (value !== null && value >= least));
        sample.hidden = !keep;
        shown += keep ? 1 : 0;
      });
      document.getElementById("filter-count").textContent = shown + " of " + samples.length + " shown";
      const url = new URL(window.location.href);
      [outcome, reward, format].forEach(function (field) {
        if (field.value === "") url.searchParams.delete(field.name);
        else url.searchParams.set(field.name, field.value);
      });
      window.history.replaceState(null, "", url.toString());
      const errors = document.getElementById("filter-errors");
      if (errors) errors.remove();  // they named values the address no longer holds
    }
    form.addEventListener("input", apply);
    form.addEventListener("change", apply);
    form.addEventListener("submit", function (event) { event.preventDefault(); });
  }

  const slider = document.getElementById("step-slider");
  const select = document.getElementById("step-select");
  setupFilters();
  if (!slider || !select) return;
  const steps = JSON.parse(document.getElementById("sample-steps").textContent);

  // The page reloads on a new step: the control that chose it gets the focus back (a keyboard user was
  // left at the top of the page after each arrow key), and a run of arrow presses loads once, at its end.
  const REFOCUS = "echolab.trajectories.refocus";
  const again = window.sessionStorage.getItem(REFOCUS);
  window.sessionStorage.removeItem(REFOCUS);
  if (again === slider.id || again === select.id) document.getElementById(again).focus();
  let pending = null;

  function go(step, from) {
    window.clearTimeout(pending);
    pending = window.setTimeout(function () {
      const url = new URL(window.location.href);
      url.searchParams.set("step", step);
      window.sessionStorage.setItem(REFOCUS, from.id);
      window.location.assign(url.toString());
    }, 500);
  }
  slider.addEventListener("input", function () {
    const step = String(steps[Number(slider.value)]);
    select.value = step;
    slider.setAttribute("aria-valuetext", "step " + step);  // its value is a position in the list
  });
  slider.addEventListener("change", function () { go(steps[Number(slider.value)], slider); });
  select.addEventListener("change", function () { go(select.value, select); });
})();
