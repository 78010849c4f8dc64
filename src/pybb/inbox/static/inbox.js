// pybb inbox: live updates. When the board changes, the server says so over
// Server-Sent Events and the page fetches its freshly rendered (escaped) live part.
"use strict";

(function () {
  const root = document.getElementById("live");
  const status = document.getElementById("live-status");
  if (!root || !window.EventSource || !window.fetch) {
    return;
  }
  let busy = false;
  let again = false;

  function show(text, down) {
    if (status) {
      status.textContent = text;
      status.classList.toggle("down", Boolean(down));
    }
  }

  function typing() {
    const active = document.activeElement;
    return active && root.contains(active) && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName);
  }

  async function refresh() {
    if (busy || typing()) {
      again = true;
      return;
    }
    busy = true;
    try {
      const response = await fetch(root.dataset.fragment, {
        credentials: "same-origin",
        headers: { Accept: "text/html" },
      });
      if (response.status === 401) {
        window.location.assign("/login");
        return;
      }
      if (response.ok) {
        // The fragment is rendered by the server with autoescaping on.
        root.innerHTML = await response.text();
      }
    } catch (error) {
      show("reconnecting…", true);
    } finally {
      busy = false;
      if (again) {
        again = false;
        window.setTimeout(refresh, 50);
      }
    }
  }

  const source = new EventSource(root.dataset.events);
  source.addEventListener("open", function () { show("live"); });
  source.addEventListener("error", function () { show("reconnecting…", true); });
  source.addEventListener("board", refresh);
  source.addEventListener("logout", function () {
    source.close();
    window.location.assign("/login");
  });
  document.addEventListener("focusout", function () {
    if (again) {
      again = false;
      refresh();
    }
  });
})();

// Notes: each card has one note field; the option clicked carries it in its form.
(function () {
  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (!(form instanceof HTMLFormElement)) {
      return;
    }
    const hidden = form.querySelector("input[data-note]");
    if (hidden) {
      const field = document.getElementById(hidden.dataset.note);
      hidden.value = field ? field.value : "";
    }
  });
})();
