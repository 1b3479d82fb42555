// The top bar's Menu button: on a narrow screen (CSS shows the button there) the links fold behind it.
// The bar is marked folded only once this script runs, so a browser without script shows the links.
(function () {
  "use strict";
  const bar = document.querySelector(".topbar");
  const toggle = document.getElementById("menu-toggle");
  if (!bar || !toggle) return;
  bar.classList.add("menu-folds");
  toggle.addEventListener("click", function () {
    const open = toggle.getAttribute("aria-expanded") !== "true";
    toggle.setAttribute("aria-expanded", String(open));
    bar.classList.toggle("menu-open", open);
  });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && bar.classList.contains("menu-open")) {
      toggle.setAttribute("aria-expanded", "false");
      bar.classList.remove("menu-open");
      toggle.focus();
    }
  });
})();
