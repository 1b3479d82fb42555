// An experiment's Alert settings: the test email goes to the saved recipients. Recipients typed but not
// saved would not get it, and the page reloads without them: ask first (confirm.js asks data-confirm).
(function () {
  "use strict";
  const field = document.getElementById("id_alert_recipients");
  const test = document.getElementById("alert-test-form");
  if (!field || !test) return;
  const saved = field.value;
  field.addEventListener("input", function () {
    if (field.value === saved) {
      delete test.dataset.confirm;
    } else {
      test.dataset.confirm = "The recipients typed above are not saved: the test email goes to the saved ones (" +
        test.dataset.saved + "), and what you typed is lost when the page reloads. Send it anyway?";
    }
  });
})();
