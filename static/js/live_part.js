// Parts of a page that move while runs train ([data-live-part="name"], e.g. an experiment's runs table):
// while the part says it is live (data-live: a run is queued or running) and the tab is visible, the
// same URL with ?part=name is fetched every few seconds and the fresh part swapped in; the fresh part
// says itself whether to go on. Like healthchecks.io's status refresh: the server renders the HTML
// once, for the page and the refresh alike. Keyboard focus inside the part moves to the same control
// in the fresh one, and a scrolled table (a phone) keeps its scroll, so a refresh loses no place. A
// session that ended meanwhile (the fetch lands on the login page), or an answer of 4xx (the experiment
// deleted in another tab), stops the refresh and says so; a 5xx is tried again next round.
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

  // A control with data-off-while="selector" is disabled while the page holds an element the selector
  // matches, which a refreshed part may add or remove (an experiment's Delete, off while runs train); an
  // element with data-copy-of="selector" shows that element's text where it belongs (the reason, beside
  // the button), and hides while there is none.
  function followParts() {
    document.querySelectorAll("[data-off-while]").forEach(function (control) {
      control.disabled = document.querySelector(control.dataset.offWhile) !== null;
    });
    document.querySelectorAll("[data-copy-of]").forEach(function (copy) {
      const source = document.querySelector(copy.dataset.copyOf);
      copy.hidden = source === null;
      copy.textContent = source ? source.textContent : "";
    });
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
    followParts();
    document.dispatchEvent(new CustomEvent("echolab:part-updated", { detail: fresh }));
  }

  function stopWith(part, message) {
    delete part.dataset.live;
    const notice = document.createElement("p");
    notice.className = "callout";
    notice.setAttribute("role", "status");
    notice.textContent = message;
    part.prepend(notice);
  }

  function refresh(part) {
    // The part's own page (data-live-url) where it says one: a refused form is shown at its POST address.
    const url = new URL(part.dataset.liveUrl || window.location.href, window.location.href);
    url.searchParams.set("part", part.dataset.livePart);
    return fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) {
        if (response.redirected && !new URL(response.url).searchParams.has("part")) {
          stopWith(part, "You were signed out, so this table stopped updating: reload the page to sign in again.");
          return Promise.reject(new Error("signed out"));
        }
        if (response.status >= 400 && response.status < 500) { // gone, or a page that has no such part
          stopWith(part, "This table stopped updating (" + response.status + "): reload the page.");
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

  const asking = new Set(); // parts whose refresh is on its way: a slow server gets one at a time
  window.setInterval(function () {
    if (document.hidden) return;
    document.querySelectorAll("[data-live-part][data-live]").forEach(function (part) {
      const name = part.dataset.livePart;
      if (asking.has(name)) return;
      asking.add(name);
      refresh(part)
        .catch(function () {}) // a failed round (a server restarting, 5xx) waits for the next
        .finally(function () { asking.delete(name); });
    });
  }, EVERY_MS);
})();
