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

// An address that names a folded section (/experiments/7/#alert-settings, where a test email or a refused
// save leads back to) opens it: the user lands on what they were using, not on its closed summary.
(function () {
  "use strict";
  function openNamed() {
    const named = window.location.hash && document.getElementById(decodeURIComponent(window.location.hash.slice(1)));
    if (named && named.tagName === "DETAILS") named.open = true;
  }
  openNamed();
  window.addEventListener("hashchange", openNamed);
})();
