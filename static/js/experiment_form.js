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
    showOnly("pre[data-preset]", "data-preset", preset.value + " " + env.value);
  }
  env.addEventListener("change", update);
  preset.addEventListener("change", update);
  update();
})();

// Before submitting: how many runs the form makes and how long each should take on this server, asked
// of the server (webapp/experiments/estimate.py) whenever the form settles after a change. The new
// experiment and the paper ablation forms: each holds a box #run-estimate with its estimate's URL.
(function () {
  "use strict";
  const box = document.getElementById("run-estimate");
  const form = box && box.closest("form");
  if (!form) return;
  let timer = null;
  let asked = 0;

  // On page load a form not filled in yet gets no "No estimate until..." (nothing was chosen to refuse);
  // one the server refused (its fields in error) does: the box said something before the submit.
  const IMPORT_FIELDS = ["file", "text"]; // "Import a config" (ImportConfigForm), sent with the form it fills

  // A field as the form shows it ("size" under FrozenLake), not its input's name (env__frozenlake__size).
  function fieldLabel(name) {
    const label = form.querySelector('label[for="id_' + CSS.escape(name) + '"]');
    const text = label ? label.textContent.replace(/:\s*$/, "").trim() : "";
    const env = name.split("__");
    return !text ? name : env.length === 3 && env[0] === "env" ? env[1] + " " + text : text;
  }

  async function ask(onLoad) {
    const number = ++asked;
    let text;
    let refused = false;
    try {
      const fields = new FormData(form);
      IMPORT_FIELDS.forEach(function (name) { fields.delete(name); }); // not the form's: no upload each time
      const response = await fetch(box.dataset.url, {
        method: "POST", body: fields, credentials: "same-origin",
        headers: { Accept: "application/json" },
      });
      const body = await response.json();
      if (response.ok && !body.errors) {
        text = "Estimate: " + body.text + " Each waits for " + body.waits_for + ".";
      } else {
        const first = Object.entries(body.errors || {})[0];
        const where = first && first[0] !== "__all__" ? fieldLabel(first[0]) + ": " : "";  // the form's own errors name no field
        const problem = first ? String(first[1]).replace(/\.$/, "") : "";  // "required." + ")." read ".)."
        text = "No estimate until the form is valid" + (first ? " (" + where + problem + ")" : "") + ".";
        refused = true;
      }
    } catch (error) {
      text = "No estimate: the server did not answer (" + error.message + ").";
    }
    if (number !== asked) return;  // a later change asked again
    if (onLoad === true && refused && !form.querySelector("[aria-invalid='true']")) return;
    // The box is a live region: rewritten with the same words, a screen reader read them out again.
    if (box.textContent !== text) box.textContent = text;
    box.hidden = false;
  }

  function later() {
    window.clearTimeout(timer);
    timer = window.setTimeout(ask, 400);
  }
  form.addEventListener("input", later);
  form.addEventListener("change", later);
  ask(true);
})();
