// Every page: a form refused by the server comes back with its errors, perhaps far below the top of the
// page (the new-experiment page's config import) or on a page rewritten by script (the import's upload):
// take the user to the first field in error, so the keyboard is there and a screen reader reads its error
// (each field's aria-describedby names it).
(function () {
  "use strict";
  const first = document.querySelector("main [aria-invalid='true']");
  if (!first) return;
  first.scrollIntoView({ block: "center" });
  first.focus({ preventScroll: true });
})();
