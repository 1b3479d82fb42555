// New-experiment form: show the chosen environment's parameters (and the chosen preset's values).
// Hidden parameter inputs are disabled so the browser does not post them; the server reads only
// the chosen environment's parameters either way.
(function () {
  "use strict";
  const form = document.getElementById("experiment-form");
  if (!form) return;

  function showOnly(selector, attribute, value) {
    form.querySelectorAll(selector).forEach(function (section) {
      const chosen = section.getAttribute(attribute) === value;
      section.hidden = !chosen;
      section.querySelectorAll("input, select, textarea").forEach(function (input) {
        input.disabled = !chosen;
      });
    });
  }

  const env = form.elements.namedItem("env");
  const preset = form.elements.namedItem("preset");
  function update() {
    showOnly("fieldset.env-params", "data-env", env.value);
    showOnly("pre[data-preset]", "data-preset", preset.value);
  }
  env.addEventListener("change", update);
  preset.addEventListener("change", update);
  update();
})();
