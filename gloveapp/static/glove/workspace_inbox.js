// The workspace inbox page: date groups, j/k/Enter/Delete, undo, read state, live updates
// (one socket per workspace the user owns), and paging as the list scrolls. The server
// renders every row and the detail pane; this script only moves them around.
(function () {
  "use strict";

  const root = document.getElementById("workspace-inbox");
  if (!root) return;
  const list = document.getElementById("inbox-list");
  const detail = document.getElementById("inbox-detail");
  const more = document.getElementById("inbox-more");
  const empty = document.getElementById("inbox-empty");
  const toast = document.getElementById("inbox-toast");
  const badge = document.getElementById("inbox-badge");
  const liveState = document.getElementById("live-state");
  const UNDO_MS = 6000;
  let selectedId = null;
  let hasMore = root.dataset.hasMore === "1";
  let loadingMore = false;
  let detailRequest = 0;
  const pendingDeletes = new Map(); // id -> {row, timer}
  // The routes as the server reversed them (the project may mount the apps anywhere).
  function entryUrl(template, id) {
    return template.replace("ENTRY_ID", encodeURIComponent(id));
  }

  function csrf() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
    } catch (error) {
      return "";
    }
  }
  function api(method, url, options) {
    return fetch(url, Object.assign({
      method: method,
      credentials: "same-origin",
      headers: { "X-CSRFToken": csrf(), "Accept": "application/json" },
    }, options || {}));
  }

  function rows() {
    return Array.prototype.slice.call(list.querySelectorAll(".inbox-row"));
  }
  function rowById(id) {
    return list.querySelector('.inbox-row[data-id="' + CSS.escape(id) + '"]');
  }

  // -- date groups and relative times --------------------------------------------------
  function bucket(ts) {
    const midnight = new Date();
    midnight.setHours(0, 0, 0, 0);
    const day = 24 * 3600 * 1000;
    if (ts >= midnight.getTime()) return "Today";
    if (ts >= midnight.getTime() - day) return "Yesterday";
    if (ts >= midnight.getTime() - 6 * day) return "This week";
    return "Older";
  }
  function relative(ts) {
    const seconds = Math.max(0, Math.round((Date.now() - ts) / 1000));
    if (seconds < 60) return seconds + "s";
    if (seconds < 3600) return Math.floor(seconds / 60) + "m";
    if (seconds < 86400) return Math.floor(seconds / 3600) + "h";
    return Math.floor(seconds / 86400) + "d";
  }
  function regroup() {
    list.querySelectorAll(".inbox-group").forEach(function (el) { el.remove(); });
    let current = null;
    rows().forEach(function (row) {
      const ts = Number(row.dataset.ts);
      const name = bucket(ts);
      if (name !== current) {
        current = name;
        const header = document.createElement("li");
        header.className = "inbox-group";
        header.setAttribute("role", "presentation");
        header.textContent = name;
        list.insertBefore(header, row);
      }
      const time = row.querySelector(".inbox-row__time");
      if (time) time.textContent = relative(ts);
    });
    empty.hidden = rows().length > 0;
  }
  function insertRow(row) {
    const ts = Number(row.dataset.ts);
    const id = row.dataset.id;
    const after = rows().find(function (other) {
      const otherTs = Number(other.dataset.ts);
      return otherTs < ts || (otherTs === ts && other.dataset.id < id);
    });
    list.insertBefore(row, after || null);
  }

  // -- badge ---------------------------------------------------------------------------
  function bumpBadge(delta) {
    if (!badge) return;
    const count = Math.max(0, Number(badge.dataset.count || 0) + delta);
    badge.dataset.count = String(count);
    badge.textContent = count > 99 ? "99+" : String(count);
    badge.hidden = count === 0;
  }
  function setRead(row, read) {
    if (!row) return;
    const was = row.classList.contains("is-read");
    if (was === read) return;
    row.classList.toggle("is-read", read);
    bumpBadge(read ? -1 : 1);
  }

  // -- selection and detail ------------------------------------------------------------
  function select(row, options) {
    if (!row) return;
    rows().forEach(function (other) { other.classList.toggle("is-selected", other === row); });
    selectedId = row.dataset.id;
    row.scrollIntoView({ block: "nearest" });
    const link = row.querySelector(".inbox-row__link");
    if (options && options.focus && link) link.focus({ preventScroll: true });
    const request = ++detailRequest;
    fetch(link.dataset.detailUrl, { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : Promise.reject(response); })
      .then(function (html) {
        if (request !== detailRequest) return; // a later selection won
        detail.innerHTML = html;
        history.replaceState(null, "", "?entry=" + encodeURIComponent(row.dataset.id));
      })
      .catch(function () {});
    if (!row.classList.contains("is-read")) {
      setRead(row, true);
      api("PUT", entryUrl(root.dataset.entryReadUrl, row.dataset.id)).catch(function () {});
    }
  }
  function move(step) {
    const all = rows();
    if (!all.length) return;
    let index = all.findIndex(function (row) { return row.dataset.id === selectedId; });
    index = index < 0 ? 0 : Math.min(all.length - 1, Math.max(0, index + step));
    select(all[index], { focus: true });
    if (index >= all.length - 3) loadMore();
  }
  function clearDetail() {
    selectedId = null;
    detail.innerHTML = '<p class="inbox-detail__empty muted">Select an entry.</p>';
  }

  // -- delete with undo ----------------------------------------------------------------
  function sendDelete(id, keepalive) {
    api("DELETE", entryUrl(root.dataset.entryApiUrl, id), { keepalive: !!keepalive }).catch(function () {});
  }
  function remove(row) {
    const all = rows();
    const index = all.indexOf(row);
    const next = all[index + 1] || all[index - 1] || null;
    const wasUnread = !row.classList.contains("is-read");
    row.remove();
    if (wasUnread) bumpBadge(-1);
    regroup();
    if (row.dataset.id === selectedId) {
      if (next) select(next, { focus: true });
      else clearDetail();
    }
    return wasUnread;
  }
  function deleteWithUndo(row) {
    if (!row) return;
    const id = row.dataset.id;
    const wasUnread = remove(row);
    const timer = window.setTimeout(function () {
      pendingDeletes.delete(id);
      sendDelete(id);
      hideToast(id);
    }, UNDO_MS);
    pendingDeletes.set(id, { row: row, timer: timer, wasUnread: wasUnread });
    showToast(id);
  }
  function undo(id) {
    const pending = pendingDeletes.get(id);
    if (!pending) return;
    window.clearTimeout(pending.timer);
    pendingDeletes.delete(id);
    insertRow(pending.row);
    if (pending.wasUnread) bumpBadge(1);
    regroup();
    select(pending.row, { focus: true });
    hideToast(id);
  }
  function showToast(id) {
    toast.dataset.id = id;
    toast.querySelector(".toast__text").textContent = "Entry deleted.";
    toast.hidden = false;
  }
  function hideToast(id) {
    if (toast.dataset.id === id) toast.hidden = true;
  }
  toast.querySelector(".toast__undo").addEventListener("click", function () { undo(toast.dataset.id); });
  // Leaving the page ends the undo window: the deletions go out now.
  window.addEventListener("pagehide", function () {
    pendingDeletes.forEach(function (pending, id) {
      window.clearTimeout(pending.timer);
      sendDelete(id, true);
    });
    pendingDeletes.clear();
  });

  // -- keyboard and clicks -------------------------------------------------------------
  document.addEventListener("keydown", function (event) {
    const target = event.target;
    if (event.metaKey || event.ctrlKey || event.altKey) return;
    if (target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA" || target.isContentEditable)) return;
    if (event.key === "j") { event.preventDefault(); move(1); }
    else if (event.key === "k") { event.preventDefault(); move(-1); }
    else if (event.key === "Enter") {
      const row = target && target.closest ? target.closest(".inbox-row") : null;
      if (row) { event.preventDefault(); select(row, { focus: true }); }
    } else if (event.key === "Delete" || event.key === "Backspace") {
      if (selectedId) { event.preventDefault(); deleteWithUndo(rowById(selectedId)); }
    } else if (event.key === "z" && toast && !toast.hidden) {
      undo(toast.dataset.id);
    }
  });
  list.addEventListener("click", function (event) {
    const row = event.target.closest(".inbox-row");
    if (!row) return;
    event.preventDefault();
    select(row, { focus: true });
  });
  detail.addEventListener("click", function (event) {
    if (event.target.closest('[data-action="delete"]') && selectedId) deleteWithUndo(rowById(selectedId));
  });

  // -- paging --------------------------------------------------------------------------
  function loadMore() {
    if (!hasMore || loadingMore) return;
    const last = rows().pop();
    if (!last) return;
    loadingMore = true;
    fetch(root.dataset.rowsUrl + "&before=" + encodeURIComponent(last.dataset.id), { credentials: "same-origin" })
      .then(function (response) {
        hasMore = response.headers.get("X-Has-More") === "1";
        return response.text();
      })
      .then(function (html) {
        const holder = document.createElement("ol");
        holder.innerHTML = html;
        holder.querySelectorAll(".inbox-row").forEach(function (row) {
          if (!rowById(row.dataset.id)) list.appendChild(row);
        });
        regroup();
      })
      .catch(function () {})
      .then(function () {
        loadingMore = false;
        more.hidden = !hasMore;
      });
  }
  if (window.IntersectionObserver) {
    new IntersectionObserver(function (entries) {
      if (entries.some(function (entry) { return entry.isIntersecting; })) loadMore();
    }).observe(more);
  }

  // -- live ----------------------------------------------------------------------------
  function fetchRow(id) {
    fetch(entryUrl(root.dataset.entryPageUrl, id) + "?part=row", { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : Promise.reject(response); })
      .then(function (html) {
        if (rowById(id) || pendingDeletes.has(id)) return;
        const holder = document.createElement("ol");
        holder.innerHTML = html;
        const row = holder.querySelector(".inbox-row");
        if (!row) return;
        insertRow(row);
        if (!row.classList.contains("is-read")) bumpBadge(1);
        regroup();
      })
      .catch(function () {});
  }
  function refreshDetail(id) {
    const entry = detail.querySelector(".entry");
    const typing = entry && entry.querySelector(".reply-bar textarea");
    const draft = typing ? typing.value : "";
    fetch("/inbox/entries/" + encodeURIComponent(id), { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : Promise.reject(response); })
      .then(function (html) {
        if (selectedId !== id) return;
        detail.innerHTML = html;
        const field = detail.querySelector(".reply-bar textarea");
        if (field && draft) field.value = draft; // keep what the user was writing
      })
      .catch(function () {});
  }
  function handle(frame) {
    const payload = frame.payload || {};
    switch (frame.type) {
      case "resync":
      case "workspace.entries.imported":
        window.location.reload();
        return;
      case "workspace.entry.pushed":
        if (payload.entry && !rowById(payload.entry.id)) fetchRow(payload.entry.id);
        return;
      case "workspace.entry.deleted": {
        const row = rowById(payload.id);
        if (row) remove(row);
        return;
      }
      case "workspace.entry.read":
        setRead(rowById(payload.id), !!payload.readAt);
        return;
      case "workspace.entry.replied":
      case "workspace.reply.delivered":
        // The open entry's thread changed (a reply from another tab, or its agent read it).
        if (payload.entryId && payload.entryId === selectedId) refreshDetail(payload.entryId);
        return;
    }
  }
  let lastEventId = Number(root.dataset.lastEventId || 0);
  let open = 0;
  function setLive() {
    if (!liveState) return;
    liveState.dataset.state = open > 0 ? "open" : "offline";
    liveState.textContent = open > 0 ? "live" : "offline";
  }
  function connect(workspaceId, delay) {
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(scheme + "://" + window.location.host + "/ws/workspaces/" +
      encodeURIComponent(workspaceId) + "/?last_event_id=" + encodeURIComponent(lastEventId));
    let seen = lastEventId;
    let wasOpen = false;
    socket.addEventListener("open", function () { wasOpen = true; open += 1; setLive(); delay = 500; });
    socket.addEventListener("message", function (event) {
      let frame;
      try { frame = JSON.parse(event.data); } catch (error) { return; }
      if (typeof frame.id === "number") {
        if (frame.id <= seen) return;
        seen = frame.id;
        lastEventId = Math.max(lastEventId, frame.id);
      }
      handle(frame);
    });
    socket.addEventListener("close", function (event) {
      if (wasOpen) { wasOpen = false; open = Math.max(0, open - 1); }
      setLive();
      if (event.code >= 4400 && event.code < 4500) return;
      // 4503 "not now" names its delay in the close reason: `retry_after=<seconds>`.
      const asked = event.code === 4503 ? /retry_after=(\d+)/.exec(event.reason || "") : null;
      const base = asked ? Number(asked[1]) * 1000 : delay;
      const wait = base + Math.random() * base * 0.3;
      window.setTimeout(function () { connect(workspaceId, Math.min(delay * 2, 15000)); }, wait);
    });
  }
  (root.dataset.workspaces || "").split(",").filter(Boolean).forEach(function (id) { connect(id, 500); });

  // The sockets are the live path; while none is open, poll the first page every 20 s
  // (the seed's interval) so new entries still show up.
  window.setInterval(function () {
    regroup();
    if (open > 0) return;
    fetch(root.dataset.rowsUrl, { credentials: "same-origin" })
      .then(function (response) { return response.text(); })
      .then(function (html) {
        const holder = document.createElement("ol");
        holder.innerHTML = html;
        holder.querySelectorAll(".inbox-row").forEach(function (row) {
          if (rowById(row.dataset.id) || pendingDeletes.has(row.dataset.id)) return;
          insertRow(row);
          if (!row.classList.contains("is-read")) bumpBadge(1);
        });
        regroup();
      })
      .catch(function () {});
  }, 20000);

  regroup();
  const initial = detail.querySelector(".entry");
  if (initial) {
    selectedId = initial.dataset.id;
    const row = rowById(selectedId);
    if (row) row.classList.add("is-selected");
  }
})();
