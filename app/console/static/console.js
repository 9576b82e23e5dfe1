// The console's little JavaScript (no framework, no build step). Pages work without it;
// it adds local times, copy buttons, confirmations, and `Understudy.poll` for live pages.
"use strict";
(function () {
  function localTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      var d = new Date(el.getAttribute("datetime"));
      if (isNaN(d)) return;
      el.textContent = d.toLocaleString(undefined, {
        year: "numeric", month: "short", day: "numeric",
        hour: "2-digit", minute: "2-digit", second: "2-digit"
      });
    });
  }

  function copy(button) {
    var text = button.getAttribute("data-copy");
    var target = button.getAttribute("data-copy-from");
    if (target) {
      var el = document.getElementById(target);
      text = el ? el.textContent : "";
    }
    var done = function () {
      var was = button.textContent;
      button.textContent = "copied";
      setTimeout(function () { button.textContent = was; }, 1200);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done);
    } else {
      var area = document.createElement("textarea");
      area.value = text;
      document.body.appendChild(area);
      area.select();
      document.execCommand("copy");
      area.remove();
      done();
    }
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button.copy");
    if (button) copy(button);
  });

  // <form data-confirm="Cancel this run?">: asks first.
  document.addEventListener("submit", function (event) {
    var message = event.target.getAttribute("data-confirm");
    if (message && !window.confirm(message)) event.preventDefault();
  });

  // Poll a JSON endpoint every `ms` with If-None-Match (starting from `etag`, the one the
  // page was rendered at, if given); call `onChange(json)` when it changed; stop when
  // `onChange` returns false (the run or eval is final). An answer that is not JSON (a
  // sign-in page after the session ended, say) is tried again on the next tick.
  function poll(url, ms, onChange, etag) {
    var stopped = false;
    etag = etag || null;
    function tick() {
      if (stopped) return;
      var headers = etag ? { "If-None-Match": etag } : {};
      fetch(url, { headers: headers, credentials: "same-origin" }).then(function (r) {
        if (r.status === 304) return null;
        if (!r.ok || (r.headers.get("content-type") || "").indexOf("json") < 0) {
          throw new Error("HTTP " + r.status);
        }
        etag = r.headers.get("ETag") || etag;
        return r.json();
      }).then(function (json) {
        if (json !== null && onChange(json) === false) stopped = true;
      }).catch(function () { /* try again on the next tick */ }).then(function () {
        if (!stopped) setTimeout(tick, ms);
      });
    }
    setTimeout(tick, ms);
    return { stop: function () { stopped = true; } };
  }

  window.Understudy = { poll: poll, localTimes: localTimes };
  document.addEventListener("DOMContentLoaded", function () { localTimes(document); });
})();
