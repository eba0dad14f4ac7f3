// The staff console (/handoffs/): the approvals page's queue (list_nav.js `queuePage`: j/k/
// Enter, live updates), c to claim, t to take over, r to write a reply, on each group's
// stream (/ws/handoffs/<group>/). The server renders everything; without this script the
// page still works.
(function () {
  "use strict";

  const root = document.getElementById("handoffs");
  if (!root) return;

  function focusReply(event, page) {
    const reply = document.querySelector("#handoffs-detail [data-reply]");
    if (reply) { event.preventDefault(); reply.focus(); }
  }
  function pressing(action) {
    return function (event, page) { event.preventDefault(); page.press(action); };
  }

  const page = window.GloveListNav.queuePage({
    root: root,
    list: document.getElementById("handoffs-list"),
    detail: document.getElementById("handoffs-detail"),
    empty: document.getElementById("handoffs-empty"),
    placeholder: "SESSION_ID",
    param: "chat",
    rowSelector: ".handoffs-row",
    initialSelector: ".handoff-chat",
    eventPrefix: "handoff.",
    eventId: function (payload) { return payload.session; },
    editing: function (detail) {
      const typing = detail.querySelector("textarea:focus, input:focus");
      return Boolean(typing && typing.value);
    },
    keys: { c: pressing("claim"), t: pressing("take-over"), r: focusReply },
  });
  // Each group's stream numbers its events on its own: its cursor, by the group's name.
  const cursors = JSON.parse(root.dataset.lastEventIds || "{}");
  (root.dataset.groups || "").split(" ").forEach(function (group) {
    const name = decodeURIComponent(group);
    page.live.connect(group ? "/ws/handoffs/" + group + "/" : "/ws/handoffs/", cursors[name] || 0);
  });
  // Replies and hand-backs answer with the chat's pane; keep the list in step too.
  document.body.addEventListener("htmx:afterSwap", function () { page.changed({}); });
})();
