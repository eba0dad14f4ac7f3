// The approvals page: j/k/Enter as on the inbox, a to approve, x to reject, time left
// counting down, and live updates from /ws/approvals/ (the list and the open request are
// fetched again from the server when an approval changes). The server renders everything.
(function () {
  "use strict";

  const root = document.getElementById("approvals");
  if (!root) return;
  const list = document.getElementById("approvals-list");
  const detail = document.getElementById("approvals-detail");
  const empty = document.getElementById("approvals-empty");
  const liveState = document.getElementById("live-state");
  let selectedId = null;
  let detailRequest = 0;

  function rows() {
    return Array.prototype.slice.call(list.querySelectorAll(".approvals-row"));
  }
  function rowById(id) {
    return list.querySelector('.approvals-row[data-id="' + CSS.escape(id) + '"]');
  }
  function detailUrl(id) {
    return root.dataset.detailUrl.replace("APPROVAL_ID", encodeURIComponent(id));
  }
  function showDetail(html) {
    detail.innerHTML = html;
    if (window.htmx) window.htmx.process(detail);
    tick();
  }

  function select(row, options) {
    if (!row) return;
    rows().forEach(function (other) { other.classList.toggle("is-selected", other === row); });
    selectedId = row.dataset.id;
    row.scrollIntoView({ block: "nearest" });
    const link = row.querySelector(".inbox-row__link");
    if (options && options.focus && link) link.focus({ preventScroll: true });
    loadDetail(selectedId, true);
  }
  function loadDetail(id, remember) {
    const request = ++detailRequest;
    fetch(detailUrl(id), { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : Promise.reject(response); })
      .then(function (html) {
        if (request !== detailRequest) return; // a later selection won
        const editing = detail.querySelector(".approval__form :focus");
        if (!remember && editing) return; // never swap a form out from under the person
        showDetail(html);
        if (remember) {
          const params = new URLSearchParams(window.location.search);
          params.set("request", id);
          history.replaceState(null, "", "?" + params.toString());
        }
      })
      .catch(function () {});
  }
  function move(step) {
    const all = rows();
    if (!all.length) return;
    let index = all.findIndex(function (row) { return row.dataset.id === selectedId; });
    index = index < 0 ? 0 : Math.min(all.length - 1, Math.max(0, index + step));
    select(all[index], { focus: true });
  }
  function press(action) {
    const button = detail.querySelector('[data-action="' + action + '"]');
    if (button) button.click();
  }

  document.addEventListener("keydown", function (event) {
    const target = event.target;
    if (event.metaKey || event.ctrlKey || event.altKey) return;
    if (target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA" || target.isContentEditable)) return;
    if (event.key === "j") { event.preventDefault(); move(1); }
    else if (event.key === "k") { event.preventDefault(); move(-1); }
    else if (event.key === "Enter") {
      const row = target && target.closest ? target.closest(".approvals-row") : null;
      if (row) { event.preventDefault(); select(row, { focus: true }); }
    } else if (event.key === "a") { event.preventDefault(); press("approve"); }
    else if (event.key === "x") {
      event.preventDefault();
      const reason = detail.querySelector(".approval__reason");
      if (reason && !reason.value) reason.focus(); else press("reject");
    }
  });
  list.addEventListener("click", function (event) {
    const row = event.target.closest(".approvals-row");
    if (!row) return;
    event.preventDefault();
    select(row, { focus: true });
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
        const row = selectedId ? rowById(selectedId) : null;
        if (row) row.classList.add("is-selected");
        empty.hidden = rows().length > 0;
        tick();
      })
      .catch(function () {});
  }
  let refreshTimer = null;
  function changed(payload) {
    // Several events in a burst (a sweep, a busy queue): one refresh.
    window.clearTimeout(refreshTimer);
    refreshTimer = window.setTimeout(refreshRows, 150);
    if (payload && payload.id && payload.id === selectedId) loadDetail(selectedId, false);
  }
  let lastEventId = Number(root.dataset.lastEventId || 0);
  function setLive(open) {
    if (!liveState) return;
    liveState.dataset.state = open ? "open" : "offline";
    liveState.textContent = open ? "live" : "offline";
  }
  function connect(delay) {
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(scheme + "://" + window.location.host + "/ws/approvals/?last_event_id=" +
      encodeURIComponent(lastEventId));
    socket.addEventListener("open", function () { setLive(true); delay = 500; });
    socket.addEventListener("message", function (event) {
      let frame;
      try { frame = JSON.parse(event.data); } catch (error) { return; }
      if (typeof frame.id === "number") {
        if (frame.id <= lastEventId) return;
        lastEventId = frame.id;
      }
      if (frame.type === "resync") { refreshRows(); return; }
      if (String(frame.type || "").indexOf("approval.") === 0) changed(frame.payload || {});
    });
    socket.addEventListener("close", function (event) {
      setLive(false);
      if (event.code >= 4400 && event.code < 4500) return;
      const wait = delay + Math.random() * delay * 0.3;
      window.setTimeout(function () { connect(Math.min(delay * 2, 15000)); }, wait);
    });
  }
  connect(500);

  const initial = detail.querySelector(".approval");
  if (initial) {
    selectedId = initial.dataset.id;
    const row = rowById(selectedId);
    if (row) row.classList.add("is-selected");
  }
  tick();
})();
