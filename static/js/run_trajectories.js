// Step slider for the trajectory viewer: moving it picks a step that has samples and reloads the page.
(function () {
  "use strict";
  const slider = document.getElementById("step-slider");
  const select = document.getElementById("step-select");
  if (!slider || !select) return;
  const steps = JSON.parse(document.getElementById("sample-steps").textContent);

  function go(step) {
    const url = new URL(window.location.href);
    url.searchParams.set("step", step);
    window.location.assign(url.toString());
  }
  slider.addEventListener("input", function () { select.value = String(steps[Number(slider.value)]); });
  slider.addEventListener("change", function () { go(steps[Number(slider.value)]); });
  select.addEventListener("change", function () { go(select.value); });
})();
