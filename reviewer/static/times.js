// Times in the reader's own time zone: the server writes each <time data-local> in UTC (right without JavaScript),
// and this rewrites it where the browser knows its zone, keeping the UTC text as a tooltip.
(function () {
  "use strict";

  var FORMATS = {
    datetime: { day: "2-digit", month: "short", year: "numeric", hour: "2-digit", minute: "2-digit", timeZoneName: "short" },
    time: { hour: "2-digit", minute: "2-digit", timeZoneName: "short" }
  };

  function localise(root) {
    Array.prototype.forEach.call(root.querySelectorAll("time[data-local]"), function (el) {
      var at = new Date(el.getAttribute("datetime"));
      var format = FORMATS[el.getAttribute("data-local")];
      if (isNaN(at.getTime()) || !format) return;
      el.title = el.title || el.textContent;
      el.textContent = new Intl.DateTimeFormat(undefined, format).format(at);
    });
    var zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    Array.prototype.forEach.call(root.querySelectorAll("[data-time-zone]"), function (el) {
      el.textContent = "your time zone (" + zone + ")";
    });
  }

  function start() {
    localise(document);
    document.body.addEventListener("htmx:afterSettle", function (event) { localise(event.target); });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
