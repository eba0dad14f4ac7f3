// The approvals page: j/k/Enter as on the inbox (list_nav.js), a to approve, x to reject,
// time left counting down, and live updates from /ws/approvals/ (the list and the open
// request are fetched again from the server when an approval changes). The server renders
// everything.
(function () {
  "use strict";

  const root = document.getElementById("approvals");
  if (!root) return;
  const list = document.getElementById("approvals-list");
  const detail = document.getElementById("approvals-detail");
  const empty = document.getElementById("approvals-empty");

  function detailUrl(id) {
    return root.dataset.detailUrl.replace("APPROVAL_ID", encodeURIComponent(id));
  }
  function showDetail(html) {
    detail.innerHTML = html;
    if (window.htmx) window.htmx.process(detail);
    if (window.GloveLocalTime) window.GloveLocalTime(detail);
    tick();
  }
  function loadDetail(id, remember) {
    nav.loadDetail(detailUrl(id), function (html) {
      const editing = detail.querySelector(".approval__form :focus");
      if (!remember && editing) return; // never swap a form out from under the person
      showDetail(html);
      if (remember) {
        const params = new URLSearchParams(window.location.search);
        params.set("request", id);
        history.replaceState(null, "", "?" + params.toString());
      }
    });
  }
  function press(action) {
    const button = detail.querySelector('[data-action="' + action + '"]');
    if (button) button.click();
  }

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

  const nav = window.GloveListNav.listNav({
    list: list,
    rowSelector: ".approvals-row",
    onSelect: function (row) { loadDetail(row.dataset.id, true); },
    onKey: function (event) {
      if (event.key === "a") { event.preventDefault(); press("approve"); }
      else if (event.key === "x") {
        event.preventDefault();
        const reason = detail.querySelector(".approval__reason");
        if (reason && !reason.value) reason.focus(); else press("reject");
      }
    },
  });

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

  // -- live --------------------------------------------------------------------------------
  function refreshRows() {
    fetch(root.dataset.rowsUrl, { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : Promise.reject(response); })
      .then(function (html) {
        list.innerHTML = html;
        if (nav.selectedId) nav.markSelected(nav.selectedId);
        empty.hidden = nav.rows().length > 0;
        tick();
      })
      .catch(function () {});
  }
  let refreshTimer = null;
  function changed(payload) {
    // Several events in a burst (a sweep, a busy queue): one refresh.
    window.clearTimeout(refreshTimer);
    refreshTimer = window.setTimeout(refreshRows, 150);
    if (payload && payload.id && payload.id === nav.selectedId) loadDetail(nav.selectedId, false);
  }
  window.GloveListNav.live({
    lastEventId: root.dataset.lastEventId,
    liveState: document.getElementById("live-state"),
    onFrame: function (frame) {
      if (frame.type === "resync") { refreshRows(); return; }
      if (String(frame.type || "").indexOf("approval.") === 0) changed(frame.payload || {});
    },
  }).connect("/ws/approvals/");

  const initial = detail.querySelector(".approval");
  if (initial) nav.markSelected(initial.dataset.id);
  tick();
})();
