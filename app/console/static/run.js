// The run page's live updates and the chart's anchors (no framework, no build step).
//
// While the run is live, GET /runs/{id}/live every half second with If-None-Match: the server
// answers 304 while the run's change marker is unchanged, else the live sections rendered
// again, which replace theirs here. Polling rather than Server-Sent Events because the
// marker is a database row every API process reads alike (see app/console/runs.py).
// Polling stops once the run is final.
"use strict";
(function () {
  var POLL_MS = 500;

  function openAnchor() {
    if (!location.hash) return;
    var el = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (!el) return;
    var details = el.querySelector("details");
    if (details) details.open = true;
    el.scrollIntoView();
  }

  function timeLeft(root) {
    root.querySelectorAll("[data-deadline]").forEach(function (el) {
      var left = Math.floor((new Date(el.getAttribute("data-deadline")) - Date.now()) / 1000);
      el.textContent = left > 0
        ? Math.floor(left / 60) + " min " + (left % 60) + " s left"
        : "deadline passed";
    });
  }

  function swap(name, html) {
    var el = document.querySelector('[data-live="' + name + '"]');
    if (!el) return;
    // Keep what the person is doing: open <details>, a reply being typed.
    var open = Array.prototype.map.call(el.querySelectorAll("details[open][id]"), function (d) {
      return d.id;
    });
    var typing = el.querySelector("textarea");
    var draft = typing ? typing.value : "";
    var focused = typing && document.activeElement === typing;
    el.innerHTML = html;
    open.forEach(function (id) {
      var d = document.getElementById(id);
      if (d) d.open = true;
    });
    var area = el.querySelector("textarea");
    if (area && draft) area.value = draft;
    if (area && focused) area.focus();
    if (window.Understudy) window.Understudy.localTimes(el);
    timeLeft(el);
  }

  function poll(root) {
    // The shared poller (console.js, loaded first: both are deferred, in page order).
    window.Understudy.poll(root.getAttribute("data-run-live"), POLL_MS, function (json) {
      Object.keys(json.sections).forEach(function (name) { swap(name, json.sections[name]); });
      root.setAttribute("data-status", json.status);
      return !json.final;
    }, root.getAttribute("data-etag"));
  }

  document.addEventListener("DOMContentLoaded", function () {
    openAnchor();
    var root = document.getElementById("run");
    if (!root) return;
    timeLeft(root);
    setInterval(function () { timeLeft(root); }, 1000);
    if (root.getAttribute("data-run-live")) poll(root);
  });
  window.addEventListener("hashchange", openAnchor);
})();
