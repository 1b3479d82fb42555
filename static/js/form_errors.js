// Every page: a form refused by the server comes back with its errors, perhaps far below the top of the
// page (the new-experiment page's config import) or on a page rewritten by script (the import's upload):
// take the user to the first field in error, so the keyboard is there and a screen reader reads its error
// (each field's aria-describedby names it).
// An error of the whole form (a wrong password) is on no field: its message takes the focus, so that it
// is read out (an alert present when the page loads is not announced, and autofocus read the username).
(function () {
  "use strict";
  const first = document.querySelector("main [aria-invalid='true'], main .errorlist.nonfield");
  if (!first) return;
  if (!first.matches("input, select, textarea, button")) first.setAttribute("tabindex", "-1");
  first.scrollIntoView({ block: "center" });
  first.focus({ preventScroll: true });
})();
