// Times people read in their own time zone: every <time data-local-time datetime="…"> the
// server wrote in UTC ("28 Nov 2026, 06:40 UTC") becomes the reader's local time, now and in
// every part htmx swaps in later.
(function () {
  "use strict";

  const format = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
  function localize(root) {
    (root || document).querySelectorAll("time[data-local-time]").forEach(function (el) {
      const when = new Date(el.getAttribute("datetime"));
      if (isNaN(when.getTime())) return;
      el.textContent = format.format(when);
      el.title = el.getAttribute("datetime");
      el.removeAttribute("data-local-time");
    });
  }
  document.addEventListener("DOMContentLoaded", function () { localize(document); });
  document.addEventListener("htmx:afterSettle", function (event) { localize(event.target); });
  window.GloveLocalTime = localize; // for parts swapped in without htmx (approvals.js)
})();
