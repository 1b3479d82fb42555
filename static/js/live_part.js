// Parts of a page that move while runs train ([data-live-part="name"], e.g. an experiment's runs table):
// while the part says it is live (data-live: a run is queued or running) and the tab is visible, the
// same URL with ?part=name is fetched every few seconds and the fresh part swapped in; the fresh part
// says itself whether to go on. Like healthchecks.io's status refresh: the server renders the HTML
// once, for the page and the refresh alike. The fresh part is merged into the page's element by element
// (morph): what did not change is not touched, so the focused control stays the same element (a screen
// reader announced it again at every swap, every 5 s, and lost its reading place), a ticked box stays
// ticked and a scrolled table (a phone) keeps its scroll. A
// session that ended meanwhile (the fetch lands on the login page), or an answer of 4xx (the experiment
// deleted in another tab), stops the refresh and says so; a 5xx is tried again next round.
(function () {
  "use strict";

  const EVERY_MS = 5000;

  // Rows are matched by data-key (a run's or an experiment's id), other elements by their id, so that a
  // new run at the top does not turn the focused row's link into its neighbour's, nor "Stop all" into the
  // "Resume" form that replaced it; other nodes by their place among those of their kind.
  function key(node) {
    return node.nodeType === Node.ELEMENT_NODE ? node.getAttribute("data-key") || node.id || null : null;
  }

  // The first old node from `cursor` on that is not keyed and is of the fresh node's kind, or null.
  function sameKind(cursor, fresh) {
    for (let node = cursor; node; node = node.nextSibling) {
      if (key(node) === null && node.nodeName === fresh.nodeName) return node;
    }
    return null;
  }

  // Makes `node` what `fresh` says, keeping every element whose tag and key stay.
  function morph(node, fresh) {
    if (node.nodeType !== fresh.nodeType || node.nodeName !== fresh.nodeName || key(node) !== key(fresh)) {
      node.replaceWith(fresh);
      return;
    }
    if (node.nodeType !== Node.ELEMENT_NODE) {
      if (node.nodeValue !== fresh.nodeValue) node.nodeValue = fresh.nodeValue;
      return;
    }
    Array.from(node.attributes).forEach(function (attribute) {
      if (!fresh.hasAttribute(attribute.name)) node.removeAttribute(attribute.name);
    });
    Array.from(fresh.attributes).forEach(function (attribute) {
      if (node.getAttribute(attribute.name) !== attribute.value) node.setAttribute(attribute.name, attribute.value);
    });
    const keyed = new Map();
    node.childNodes.forEach(function (child) { if (key(child) !== null) keyed.set(key(child), child); });
    let cursor = node.firstChild; // the old children from here on are not matched yet
    Array.from(fresh.childNodes).forEach(function (child) {
      const wanted = key(child);
      const match = wanted !== null ? keyed.get(wanted) : sameKind(cursor, child);
      if (!match) {
        node.insertBefore(child, cursor);
        return;
      }
      keyed.delete(wanted);
      if (match === cursor) cursor = cursor.nextSibling;
      else node.insertBefore(match, cursor);
      morph(match, child);
    });
    while (cursor) {
      const next = cursor.nextSibling;
      cursor.remove();
      cursor = next;
    }
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
    morph(part, fresh);
    followParts();
    document.dispatchEvent(new CustomEvent("echolab:part-updated", { detail: part }));
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
