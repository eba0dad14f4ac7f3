// The list-and-detail pages' shared skeleton (/approvals/, /handoffs/ and the workspace
// inbox): j/k/Enter and clicks move the selection and load the server-rendered detail pane,
// and live sockets hand each new event to the page; the two live queues (/approvals/ and
// /handoffs/) share the rest of their shape too (`queuePage`). Each page's script keeps what
// is its own (its other keys, what selecting a row does, what an event means).
window.GloveListNav = (function () {
  "use strict";

  // options: list (the <ol> of server-rendered rows, each with data-id and an
  // .inbox-row__link), rowSelector, onSelect(row) to load the detail (via loadDetail),
  // onMove(index, rows) after j/k, onKey(event) for the keys that are not j/k/Enter.
  function listNav(options) {
    const list = options.list;
    const rowSelector = options.rowSelector;
    let detailRequest = 0;
    const nav = { selectedId: null };

    nav.rows = function () {
      return Array.prototype.slice.call(list.querySelectorAll(rowSelector));
    };
    nav.rowById = function (id) {
      return list.querySelector(rowSelector + '[data-id="' + CSS.escape(id) + '"]');
    };
    // The selection as the server rendered it (a page opened on ?request= or ?entry=), or
    // kept across a list the page swapped in.
    nav.markSelected = function (id) {
      nav.selectedId = id;
      const row = nav.rowById(id);
      if (row) row.classList.add("is-selected");
    };
    nav.select = function (row, selectOptions) {
      if (!row) return;
      nav.rows().forEach(function (other) { other.classList.toggle("is-selected", other === row); });
      nav.selectedId = row.dataset.id;
      row.scrollIntoView({ block: "nearest" });
      const link = row.querySelector(".inbox-row__link");
      if (selectOptions && selectOptions.focus && link) link.focus({ preventScroll: true });
      options.onSelect(row);
    };
    // Fetches a detail pane and hands it to show(html), unless a later load began meanwhile.
    nav.loadDetail = function (url, show) {
      const request = ++detailRequest;
      fetch(url, { credentials: "same-origin" })
        .then(function (response) { return response.ok ? response.text() : Promise.reject(response); })
        .then(function (html) {
          if (request !== detailRequest) return; // a later selection won
          show(html);
        })
        .catch(function () {});
    };
    nav.move = function (step) {
      const all = nav.rows();
      if (!all.length) return;
      let index = all.findIndex(function (row) { return row.dataset.id === nav.selectedId; });
      index = index < 0 ? 0 : Math.min(all.length - 1, Math.max(0, index + step));
      nav.select(all[index], { focus: true });
      if (options.onMove) options.onMove(index, all);
    };

    document.addEventListener("keydown", function (event) {
      const target = event.target;
      if (event.metaKey || event.ctrlKey || event.altKey) return;
      if (target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA" || target.isContentEditable)) return;
      if (event.key === "j") { event.preventDefault(); nav.move(1); }
      else if (event.key === "k") { event.preventDefault(); nav.move(-1); }
      else if (event.key === "Enter") {
        const row = target && target.closest ? target.closest(rowSelector) : null;
        if (row) { event.preventDefault(); nav.select(row, { focus: true }); }
      } else if (options.onKey) options.onKey(event);
    });
    list.addEventListener("click", function (event) {
      const row = event.target.closest(rowSelector);
      if (!row) return;
      event.preventDefault();
      nav.select(row, { focus: true });
    });
    return nav;
  }

  // Sockets on event streams (gloveapp/live/consumers.py), any number of them: each resumes
  // after the last event id it has seen of its own stream (ids count per stream), passes
  // every frame it has not had to onFrame(frame), and reconnects with backoff unless closed
  // for good (44xx); 4503 names its own delay. #live-state says whether any socket is open.
  // options: lastEventId (the page's stream's, as rendered: for a socket connected without
  // one of its own), liveState (element or null), onFrame.
  function live(options) {
    const liveState = options.liveState;
    const rendered = Number(options.lastEventId || 0);
    let open = 0;
    function setLive() {
      if (!liveState) return;
      liveState.dataset.state = open > 0 ? "open" : "offline";
      liveState.textContent = open > 0 ? "live" : "offline";
    }
    // `cursor.last`: the newest id this stream's sockets have seen, across reconnects.
    function connect(path, delay, cursor) {
      const scheme = window.location.protocol === "https:" ? "wss" : "ws";
      const socket = new WebSocket(scheme + "://" + window.location.host + path + "?last_event_id=" +
        encodeURIComponent(cursor.last));
      let wasOpen = false;
      socket.addEventListener("open", function () { wasOpen = true; open += 1; setLive(); delay = 500; });
      socket.addEventListener("message", function (event) {
        let frame;
        try { frame = JSON.parse(event.data); } catch (error) { return; }
        if (typeof frame.id === "number") {
          if (frame.id <= cursor.last) return;
          cursor.last = frame.id;
        }
        options.onFrame(frame);
      });
      socket.addEventListener("close", function (event) {
        if (wasOpen) { wasOpen = false; open = Math.max(0, open - 1); }
        setLive();
        if (event.code >= 4400 && event.code < 4500) return;
        // 4503 "not now" names its delay in the close reason: `retry_after=<seconds>`.
        const asked = event.code === 4503 ? /retry_after=(\d+)/.exec(event.reason || "") : null;
        const base = asked ? Number(asked[1]) * 1000 : delay;
        const wait = base + Math.random() * base * 0.3;
        window.setTimeout(function () { connect(path, Math.min(delay * 2, 15000), cursor); }, wait);
      });
    }
    return {
      // lastEventId: this stream's cursor as rendered (else the page's).
      connect: function (path, lastEventId) {
        const last = lastEventId === undefined ? rendered : Number(lastEventId || 0);
        connect(path, 500, { last: last });
      },
      isOpen: function () { return open > 0; },
    };
  }

  // A live queue beside a detail pane (/approvals/ and /handoffs/): selecting a row loads
  // its pane and names it in the address (?<param>=<id>); a pane is never swapped out from
  // under a person typing in it; an event of the page's kind fetches the list again (once
  // per burst) and the open pane too when the event is about it.
  // options: root (with data-detail-url holding `placeholder`, data-rows-url and
  // data-last-event-id), list, detail, empty, placeholder, param, rowSelector,
  // initialSelector (the pane the server rendered open), eventPrefix ("approval."),
  // eventId(payload) (the row an event is about), editing(detail) (true while a person
  // types there), keys ({key: function (event, page)}), afterShow(detail), afterRows().
  function queuePage(options) {
    const root = options.root;
    const list = options.list;
    const detail = options.detail;
    const page = {};

    function detailUrl(id) {
      return root.dataset.detailUrl.replace(options.placeholder, encodeURIComponent(id));
    }
    page.showDetail = function (html) {
      detail.innerHTML = html;
      if (window.htmx) window.htmx.process(detail);
      if (options.afterShow) options.afterShow(detail);
    };
    page.loadDetail = function (id, remember) {
      page.nav.loadDetail(detailUrl(id), function (html) {
        if (!remember && options.editing(detail)) return;
        page.showDetail(html);
        if (remember) {
          const params = new URLSearchParams(window.location.search);
          params.set(options.param, id);
          history.replaceState(null, "", "?" + params.toString());
        }
      });
    };
    page.press = function (action) {
      const button = detail.querySelector('[data-action="' + action + '"]');
      if (button) button.click();
    };
    page.nav = listNav({
      list: list,
      rowSelector: options.rowSelector,
      onSelect: function (row) { page.loadDetail(row.dataset.id, true); },
      onKey: function (event) {
        const handle = options.keys && options.keys[event.key];
        if (handle) handle(event, page);
      },
    });

    function refreshRows() {
      fetch(root.dataset.rowsUrl, { credentials: "same-origin" })
        .then(function (response) { return response.ok ? response.text() : Promise.reject(response); })
        .then(function (html) {
          list.innerHTML = html;
          if (page.nav.selectedId) page.nav.markSelected(page.nav.selectedId);
          options.empty.hidden = page.nav.rows().length > 0;
          if (options.afterRows) options.afterRows();
        })
        .catch(function () {});
    }
    let refreshTimer = null;
    page.changed = function (payload) {
      // Several events in a burst (a sweep, a busy queue): one refresh.
      window.clearTimeout(refreshTimer);
      refreshTimer = window.setTimeout(refreshRows, 150);
      const id = payload ? options.eventId(payload) : null;
      if (id && id === page.nav.selectedId) page.loadDetail(id, false);
    };
    page.live = live({
      lastEventId: root.dataset.lastEventId,
      liveState: document.getElementById("live-state"),
      onFrame: function (frame) {
        if (frame.type === "resync") { refreshRows(); return; }
        if (String(frame.type || "").indexOf(options.eventPrefix) === 0) page.changed(frame.payload || {});
      },
    });

    const initial = detail.querySelector(options.initialSelector);
    if (initial) page.nav.markSelected(initial.dataset.id);
    return page;
  }

  return { listNav: listNav, live: live, queuePage: queuePage };
})();
