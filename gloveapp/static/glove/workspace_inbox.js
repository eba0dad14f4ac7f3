// The workspace inbox page: date groups, j/k/Enter (list_nav.js) and Delete, undo, read
// state, live updates (one socket per workspace the user owns), and paging as the list
// scrolls. The server renders every row and the detail pane; this script only moves them
// around.
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
  const UNDO_MS = 6000;
  let hasMore = root.dataset.hasMore === "1";
  let loadingMore = false;
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

  const nav = window.GloveListNav.listNav({
    list: list,
    rowSelector: ".inbox-row",
    onSelect: function (row) {
      const id = row.dataset.id;
      nav.loadDetail(row.querySelector(".inbox-row__link").dataset.detailUrl, function (html) {
        detail.innerHTML = html;
        if (window.GloveLocalTime) window.GloveLocalTime(detail);
        history.replaceState(null, "", "?entry=" + encodeURIComponent(id));
      });
      if (!row.classList.contains("is-read")) {
        setRead(row, true);
        api("PUT", entryUrl(root.dataset.entryReadUrl, id)).catch(function () {});
      }
    },
    onMove: function (index, all) {
      if (index >= all.length - 3) loadMore();
    },
    onKey: function (event) {
      if (event.key === "Delete" || event.key === "Backspace") {
        if (nav.selectedId) { event.preventDefault(); deleteWithUndo(rowById(nav.selectedId)); }
      } else if (event.key === "z" && toast && !toast.hidden) {
        undo(toast.dataset.id);
      }
    },
  });
  const rows = nav.rows;
  const rowById = nav.rowById;

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

  // -- detail --------------------------------------------------------------------------
  function clearDetail() {
    nav.selectedId = null;
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
    if (row.dataset.id === nav.selectedId) {
      if (next) nav.select(next, { focus: true });
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
    nav.select(pending.row, { focus: true });
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

  // -- clicks --------------------------------------------------------------------------
  detail.addEventListener("click", function (event) {
    if (event.target.closest('[data-action="delete"]') && nav.selectedId) deleteWithUndo(rowById(nav.selectedId));
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
    fetch(entryUrl(root.dataset.entryPageUrl, id), { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : Promise.reject(response); })
      .then(function (html) {
        if (nav.selectedId !== id) return;
        detail.innerHTML = html;
        if (window.GloveLocalTime) window.GloveLocalTime(detail);
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
        if (payload.entryId && payload.entryId === nav.selectedId) refreshDetail(payload.entryId);
        return;
    }
  }
  const live = window.GloveListNav.live({
    lastEventId: root.dataset.lastEventId,
    liveState: document.getElementById("live-state"),
    onFrame: handle,
  });
  // Each workspace's stream numbers its events on its own: its cursor, by the workspace's id.
  const cursors = JSON.parse(root.dataset.lastEventIds || "{}");
  (root.dataset.workspaces || "").split(",").filter(Boolean).forEach(function (id) {
    live.connect("/ws/workspaces/" + encodeURIComponent(id) + "/", cursors[id] || 0);
  });

  // The sockets are the live path; while none is open, poll the first page every 20 s
  // (the seed's interval) so new entries still show up.
  window.setInterval(function () {
    regroup();
    if (live.isOpen()) return;
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

  // The reply box sends on Ctrl+Enter (Cmd+Enter on a Mac); Enter alone breaks the line.
  detail.addEventListener("keydown", function (event) {
    const text = event.target;
    if (!text || !text.matches || !text.matches(".reply-bar textarea")) return;
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && !event.isComposing) {
      event.preventDefault();
      text.form.requestSubmit();
    }
  });

  regroup();
  const initial = detail.querySelector(".entry");
  if (initial) nav.markSelected(initial.dataset.id);
})();
