// The approvals page: the live queue of list_nav.js (`queuePage`: j/k/Enter, the list and
// the open request fetched again from the server when an approval changes, from
// /ws/approvals/), a to approve, x to reject, the diff staff approve, time left counting
// down. The server renders everything.
(function () {
  "use strict";

  const root = document.getElementById("approvals");
  if (!root) return;
  const detail = document.getElementById("approvals-detail");
  const list = document.getElementById("approvals-list");

  // -- the diff staff approve: every field that differs from the call, old -> new ----------
  function fieldValue(input) {
    return input.type === "checkbox" ? (input.checked ? "true" : "false") : input.value;
  }
  function showDiff() {
    const box = detail.querySelector("[data-diff]");
    if (!box) return;
    const items = box.querySelector("ul");
    items.textContent = "";
    detail.querySelectorAll(".approval__args [data-original]").forEach(function (input) {
      const now = fieldValue(input);
      if (now === input.dataset.original) return;
      const label = input.closest(".approval__field").querySelector("span").textContent;
      const li = document.createElement("li");
      const was = document.createElement("del");
      const becomes = document.createElement("ins");
      was.textContent = input.dataset.original || "(empty)";
      becomes.textContent = now || "(empty)";
      li.append(label + ": ", was, " \u2192 ", becomes);
      items.appendChild(li);
    });
    box.hidden = !items.children.length;
    const approve = detail.querySelector('[data-action="approve"]');
    if (approve) approve.textContent = items.children.length ? "Approve with changes" : "Approve";
  }
  detail.addEventListener("input", showDiff);
  detail.addEventListener("change", showDiff);

  // -- time left -------------------------------------------------------------------------
  function left(el) {
    if (!el.dataset.secondsLeft) return null;
    if (!el.dataset.at) el.dataset.at = String(Date.now());
    const passed = Math.floor((Date.now() - Number(el.dataset.at)) / 1000);
    return Math.max(0, Number(el.dataset.secondsLeft) - passed);
  }
  function format(seconds) {
    if (seconds >= 3600) return Math.floor(seconds / 3600) + "h " + Math.floor((seconds % 3600) / 60) + "m";
    if (seconds >= 60) return Math.floor(seconds / 60) + "m " + (seconds % 60) + "s";
    return seconds + "s";
  }
  function tick() {
    list.querySelectorAll(".inbox-row__time[data-seconds-left]").forEach(function (el) {
      const seconds = left(el);
      if (seconds !== null) el.textContent = format(seconds) + " left";
    });
    detail.querySelectorAll(".approval__deadline").forEach(function (el) {
      const seconds = left(el);
      const strong = el.querySelector(".approval__left");
      if (seconds !== null && strong) strong.textContent = format(seconds);
    });
  }
  window.setInterval(tick, 1000);

  // -- the queue, live --------------------------------------------------------------------
  window.GloveListNav.queuePage({
    root: root,
    list: list,
    detail: detail,
    empty: document.getElementById("approvals-empty"),
    placeholder: "APPROVAL_ID",
    param: "request",
    rowSelector: ".approvals-row",
    initialSelector: ".approval",
    eventPrefix: "approval.",
    eventId: function (payload) { return payload.id; },
    editing: function (pane) { return Boolean(pane.querySelector(".approval__form :focus")); },
    keys: {
      a: function (event, page) { event.preventDefault(); page.press("approve"); },
      x: function (event, page) {
        event.preventDefault();
        const reason = detail.querySelector(".approval__reason");
        if (reason && !reason.value) reason.focus(); else page.press("reject");
      },
    },
    afterShow: function (pane) {
      if (window.GloveLocalTime) window.GloveLocalTime(pane);
      tick();
    },
    afterRows: tick,
  }).live.connect("/ws/approvals/");

  tick();
})();
