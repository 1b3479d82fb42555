// A button with data-copy="<element id>" copies that element's text and says "Copied" for a moment. Plain
// HTTP deployments have no clipboard API: the text is selected and copied the old way.
(function () {
  "use strict";

  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    const label = button.textContent;
    button.addEventListener("click", function () {
      const source = document.getElementById(button.dataset.copy);
      const done = function () {
        button.textContent = "Copied";
        setTimeout(function () { button.textContent = label; }, 1500);
      };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(source.textContent).then(done);
      } else {
        const range = document.createRange();
        range.selectNodeContents(source);
        window.getSelection().removeAllRanges();
        window.getSelection().addRange(range);
        document.execCommand("copy");
        done();
      }
    });
  });
})();
