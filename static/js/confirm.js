// A form with data-confirm="question" asks the question before it submits (Stop, Stop all, Revoke, Delete): none
// can be undone. Kept out of the templates, which carry no inline script.
document.addEventListener("submit", function (event) {
  const question = event.target.dataset && event.target.dataset.confirm;
  if (question && !window.confirm(question)) event.preventDefault();
});
