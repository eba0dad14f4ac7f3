// Live updates for the chat page: one websocket per page, resumed from the last event id.
//
// Durable events ("message.appended", "tasks.replaced", "inbox.changed", ...) carry an id and
// only tell the page which partial to fetch again; the server renders it, so the page never
// builds HTML from JSON. Transient events (text deltas, turn status) have no id and are shown
// directly. The page is fully rendered by the server without this script.
(function () {
  "use strict";

  const root = document.getElementById("chat");
  if (!root || !window.WebSocket || !window.htmx) return;

  const refreshUrl = root.dataset.refreshUrl;
  const liveState = document.getElementById("live-state");
  const stream = document.getElementById("stream");
  let lastEventId = Number(root.dataset.lastEventId || 0);
  let retryDelay = 500;
  let socket = null;

  // Which partials each durable event makes stale.
  const STALE = {
    "message.appended": ["messages"],
    "tasks.replaced": ["tasks"],
    "inbox.changed": ["inbox"],
    "slot.pushed": ["slots"],
    "slot.resolved": ["slots"],
    "permissions.changed": ["permissions"],
    "turn.queued": ["messages", "turn-status"],
    "turn.withdrawn": ["messages", "turn-status"],
    "turn.started": ["messages", "turn-status"],
    "turn.notice": ["turn-status"],
    "turn.restarted": ["messages", "slots", "turn-status"],
    "turn.waiting": ["messages", "turn-status"],
    "turn.resumed": ["messages", "turn-status"],
    "turn.finished": ["messages", "slots", "tasks", "inbox", "turn-status", "permissions"],
    "turn.error": ["messages", "slots", "turn-status", "permissions"],
    "approval.decided": ["messages", "slots"],
    // Who answers the chat changed (a person joined, handed it back): the banner and history.
    "session.answerer": ["messages", "handoff", "turn-status"],
  };

  // One request per partial at a time; events arriving meanwhile mark it dirty and it is
  // fetched once more afterwards, so a burst costs two requests and the last answer wins.
  const refreshes = {};
  function refresh(part) {
    const state = (refreshes[part] = refreshes[part] || { busy: false, dirty: false, after: [] });
    if (state.busy) {
      state.dirty = true;
      return;
    }
    const element = document.getElementById(part);
    if (!element) return;
    state.busy = true;
    // The partial is its own source: htmx queues requests per source element and keeps only
    // the last one queued, so sharing one source (the body) would silently drop refreshes.
    htmx
      .ajax("GET", refreshUrl, { source: element, target: element, swap: "outerHTML" })
      .catch(function () {})
      .then(function () {
        state.busy = false;
        const callbacks = state.after.splice(0);
        callbacks.forEach(function (fn) { fn(); });
        if (state.dirty) {
          state.dirty = false;
          refresh(part);
        }
      });
  }
  function afterRefresh(part, fn) {
    const state = refreshes[part];
    if (state && state.busy) state.after.push(fn);
    else fn();
  }

  function setStatus(text) {
    // Looked up each time: the turn-status partial is swapped by refreshes.
    const status = document.querySelector("#turn-status .turn-status__text");
    if (status) status.textContent = text || "";
  }
  // A chat is titled from its first message after the page was rendered.
  const heading = document.querySelector(".chat__head h1");
  function setTitle(title) {
    if (!title || !heading || heading.textContent === title) return;
    heading.textContent = title;
    document.title = title + " · glove-django";
  }
  function appendDelta(text) {
    if (!stream || !text) return;
    stream.hidden = false;
    stream.querySelector(".bubble").textContent += text;
    stream.scrollIntoView({ block: "nearest" });
  }
  function clearStream() {
    if (!stream) return;
    stream.hidden = true;
    stream.querySelector(".bubble").textContent = "";
  }

  function handle(frame) {
    const payload = frame.payload || {};
    switch (frame.type) {
      case "resync":
        // The server could not replay what we missed: the page itself is the fresh state.
        window.location.reload();
        return;
      case "text_delta":
        appendDelta(payload.text);
        return;
      case "session.updated":
        setTitle((payload.session || {}).title);
        break;
      case "turn.started":
        setStatus("The agent is working…");
        break;
      case "tool_use":
        setStatus("Running " + (payload.label || "a tool") + "…");
        break;
      case "tool_use_result":
        setStatus("The agent is working…");
        break;
      case "turn.finished":
        setStatus("");
        break;
      case "session.answerer":
        // "Bea from the baristas joined the chat.": said at once, before the refresh lands.
        setStatus(payload.text || "");
        break;
      case "turn.error":
        setStatus("Something went wrong: " + (payload.error || payload.message || "the turn failed") + ".");
        clearStream();
        break;
    }
    (STALE[frame.type] || []).forEach(refresh);
    const message = payload.message;
    if (frame.type === "message.appended" && message && message.sender === "agent") {
      // The streamed text is now stored: drop the draft once the stored copy is on the page.
      refresh("messages");
      afterRefresh("messages", clearStream);
    }
    if (frame.type === "turn.finished") afterRefresh("messages", clearStream);
  }

  // A refresh and the composer's own answer can cross on the wire; whichever comes last
  // would win. The history only moves forward: an answer older than what is shown is dropped.
  document.body.addEventListener("htmx:beforeSwap", function (event) {
    const target = event.detail.target;
    if (!target || target.id !== "messages") return;
    const incoming = /data-last-seq="(\d+)"/.exec(event.detail.serverResponse || "");
    if (incoming && Number(incoming[1]) < Number(target.dataset.lastSeq || 0)) {
      event.detail.shouldSwap = false;
    }
  });
  // The history is paged: a request that re-renders it (a refresh, the composer's post, a
  // withdrawal) names the oldest message the page shows, so the earlier pages a reader
  // loaded stay on the page (the server renders from there on, within a bound).
  document.body.addEventListener("htmx:configRequest", function (event) {
    const target = event.detail.target;
    if (!target || target.id !== "messages") return;
    let oldest = 0;
    target.querySelectorAll("[data-first-seq]").forEach(function (element) {
      const seq = Number(element.dataset.firstSeq || 0);
      if (seq > 0 && (oldest === 0 || seq < oldest)) oldest = seq;
    });
    const own = Number(target.dataset.firstSeq || 0);
    if (own > 0 && (oldest === 0 || own < oldest)) oldest = own;
    if (oldest > 0) event.detail.parameters.from = String(oldest);
  });
  // The display stack has no version to compare: after answering a prompt in place, read
  // the stack once more, so a prompt the resumed tool pushed meanwhile is never hidden.
  document.body.addEventListener("htmx:afterSwap", function (event) {
    const config = event.detail.requestConfig;
    if (event.target.id === "slots" && config && config.verb === "post") refresh("slots");
  });

  function connect() {
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    const url = scheme + "://" + window.location.host + root.dataset.liveUrl +
      "?last_event_id=" + encodeURIComponent(lastEventId);
    socket = new WebSocket(url);
    socket.addEventListener("open", function () {
      retryDelay = 500;
      if (liveState) {
        liveState.dataset.state = "open";
        liveState.textContent = "live";
      }
    });
    socket.addEventListener("message", function (event) {
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch (error) {
        return;
      }
      if (typeof frame.id === "number") {
        if (frame.id <= lastEventId) return; // replayed twice across a reconnect
        lastEventId = frame.id;
        root.dataset.lastEventId = String(lastEventId);
      }
      handle(frame);
    });
    socket.addEventListener("close", function (event) {
      if (event.code >= 4400 && event.code < 4500) {
        // Final refusals (logged out, not allowed, no such session): retrying cannot help.
        if (liveState) {
          liveState.dataset.state = "closed";
          liveState.textContent = "offline";
        }
        return;
      }
      if (liveState) {
        liveState.dataset.state = "offline";
        liveState.textContent = "reconnecting";
      }
      // Back off (with jitter, so a restarted server is not hit by every page at once).
      // 4503 "not now" names its delay in the close reason: `retry_after=<seconds>`.
      const asked = event.code === 4503 ? /retry_after=(\d+)/.exec(event.reason || "") : null;
      const base = asked ? Number(asked[1]) * 1000 : retryDelay;
      const wait = base + Math.random() * base * 0.3;
      retryDelay = Math.min(retryDelay * 2, 15000);
      window.setTimeout(connect, wait);
    });
  }

  connect();
})();
