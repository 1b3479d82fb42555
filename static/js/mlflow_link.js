// The links the mlflow client prints (`{tracking URI}/#/experiments/<id>/runs/<run id>`, MLflow's UI
// routes) reach EchoLab's home page with the route in the fragment, which no server sees: go to the page
// it means, the experiment's or the run's. Pasted into a tab already on that page, only the fragment
// changes and nothing loads: the route is followed on that change too.
(function () {
  "use strict";
  function follow() {
    const route = location.hash.match(/^#\/experiments\/(\d+)(?:\/runs\/([0-9a-f]{32}))?/);
    if (!route) return;
    location.replace(route[2] ? "/mlflow/runs/" + route[2] + "/" : "/mlflow/experiments/" + route[1] + "/");
  }
  follow();
  window.addEventListener("hashchange", follow);
})();
