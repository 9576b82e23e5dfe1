// The eval pages' JavaScript (no framework, no build step); the pages work without it.
//
// The eval page, while the eval runs, polls GET /evals/{id}/live every second with
// If-None-Match (Understudy.poll): a 304 while nothing changed, else the live section
// rendered again, swapped in here. Polling stops once the eval is completed or cancelled.
// The start form: a category's box ticks all of its scenarios; the mode greys out the
// scenarios that do not support it.
"use strict";
(function () {
  var POLL_MS = 1000;

  function live(root) {
    var url = root.getAttribute("data-eval-live");
    var section = root.querySelector('[data-live="eval"]');
    if (!url || !section || !window.Understudy) return;
    window.Understudy.poll(url, POLL_MS, function (json) {
      var open = Array.prototype.map.call(section.querySelectorAll("details[open][id]"), function (d) {
        return d.id;
      });
      section.innerHTML = json.html;
      open.forEach(function (id) {
        var d = document.getElementById(id);
        if (d) d.open = true;
      });
      window.Understudy.localTimes(section);
      root.setAttribute("data-status", json.status);
      return !json.final;
    });
  }

  function startForm(form) {
    function mode() {
      var checked = form.querySelector('input[name="mode"]:checked');
      return checked ? checked.value : "";
    }
    function fitMode() {
      var m = mode();
      form.querySelectorAll('input[name="scenario"]').forEach(function (box) {
        var fits = (" " + box.getAttribute("data-modes") + " ").indexOf(" " + m + " ") >= 0;
        box.disabled = !fits;
        if (!fits) box.checked = false;
        box.closest("label").classList.toggle("off", !fits);
      });
    }
    form.addEventListener("change", function (event) {
      var el = event.target;
      if (el.name === "mode") fitMode();
      if (el.name === "category") {
        form.querySelectorAll('input[name="scenario"]').forEach(function (box) {
          if (box.getAttribute("data-in") === el.value && !box.disabled) box.checked = el.checked;
        });
      }
      if (el.name === "persona" && el.checked) {
        var chosen = form.querySelector('input[name="personas"][value="chosen"]');
        if (chosen) chosen.checked = true;
      }
    });
    fitMode();
  }

  document.addEventListener("DOMContentLoaded", function () {
    var root = document.getElementById("eval");
    if (root) live(root);
    var form = document.getElementById("eval-form");
    if (form) startForm(form);
  });
})();
