// Parts of a page that move while runs train ([data-live-part="name"], e.g. an experiment's runs table):
// while the part says it is live (data-live: a run is queued or running) and the tab is visible, the
// same URL with ?part=name is fetched every few seconds and the fresh part swapped in; the fresh part
// says itself whether to go on. Like healthchecks.io's status refresh: the server renders the HTML
// once, for the page and the refresh alike. Keyboard focus inside the part moves to the same control
// in the fresh one, and a scrolled table (a phone) keeps its scroll, so a refresh loses no place. A
// session that ended meanwhile (the fetch lands on the login page) stops the refresh and says so.
(function () {
  "use strict";

  const EVERY_MS = 5000;
  const CONTROLS = "a[href], button, input, select, textarea";

  function identity(control) {
    return [control.tagName, control.getAttribute("href"), control.name, control.value, control.className].join("|");
  }

  function scrolled(part) {
    return Array.from(part.querySelectorAll(".table-scroll")).map(function (box) { return box.scrollLeft; });
  }

  function swap(part, fresh) {
    const focused = part.contains(document.activeElement) ? identity(document.activeElement) : null;
    const scroll = scrolled(part);
    part.replaceWith(fresh);
    fresh.querySelectorAll(".table-scroll").forEach(function (box, i) { box.scrollLeft = scroll[i] || 0; });
    if (focused !== null) {
      const same = Array.from(fresh.querySelectorAll(CONTROLS)).find(function (c) { return identity(c) === focused; });
      if (same) same.focus({ preventScroll: true });
    }
    document.dispatchEvent(new CustomEvent("echolab:part-updated", { detail: fresh }));
  }

  function signedOut(part) {
    delete part.dataset.live;
    const notice = document.createElement("p");
    notice.className = "callout";
    notice.setAttribute("role", "status");
    notice.textContent = "You were signed out, so this table stopped updating: reload the page to sign in again.";
    part.prepend(notice);
  }

  function refresh(part) {
    const url = new URL(window.location.href);
    url.searchParams.set("part", part.dataset.livePart);
    return fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) {
        if (response.redirected && !new URL(response.url).searchParams.has("part")) {
          signedOut(part); // sent to the login page
          return Promise.reject(new Error("signed out"));
        }
        return response.ok ? response.text() : Promise.reject(new Error(String(response.status)));
      })
      .then(function (html) {
        const holder = document.createElement("template");
        holder.innerHTML = html; // our own server's template, as the page itself
        const fresh = holder.content.querySelector("[data-live-part]");
        if (fresh && part.isConnected) swap(part, fresh);
      });
  }

  window.setInterval(function () {
    if (document.hidden) return;
    document.querySelectorAll("[data-live-part][data-live]").forEach(function (part) {
      refresh(part).catch(function () {}); // a failed round (server restarting) waits for the next
    });
  }, EVERY_MS);
})();
