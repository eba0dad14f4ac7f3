// The composer: Enter sends (Shift+Enter breaks the line), and typed text is never lost.
// The text leaves the field when it is sent (what is typed meanwhile stays, and a failed
// post puts the sent text back before it); the draft is kept in sessionStorage, so a reload
// (a live resync, a reconnect) brings it back.
// A static file rather than inline handlers, so the page runs under a script CSP.
(function () {
  "use strict";

  const draftKey = "glove-draft:" + window.location.pathname;
  function field() { return document.getElementById("composer-text"); }
  function keep(value) {
    try {
      if (value) window.sessionStorage.setItem(draftKey, value);
      else window.sessionStorage.removeItem(draftKey);
    } catch (error) { /* storage off: the field alone holds the draft */ }
  }
  function restore() {
    const text = field();
    if (!text || text.value) return;
    try { text.value = window.sessionStorage.getItem(draftKey) || ""; } catch (error) { /* off */ }
  }

  document.addEventListener("keydown", function (event) {
    const text = event.target;
    if (!text || text.id !== "composer-text") return;
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      text.form.requestSubmit();
    }
  });
  document.addEventListener("input", function (event) {
    if (event.target && event.target.id === "composer-text") keep(event.target.value);
  });

  // Each message gets a key of its own: a post sent twice (a retry after a timeout, a double
  // submit) is stored once. A sent message's key is used up; the next one gets a new key.
  function newKey() {
    if (window.crypto && window.crypto.randomUUID) return window.crypto.randomUUID();
    return Date.now().toString(36) + "-" + Math.random().toString(36).slice(2) +
      Math.random().toString(36).slice(2);
  }
  function isComposer(form) { return form && form.matches && form.matches("form[data-composer]"); }

  const sending = new WeakMap();
  // htmx has read the form's values by now: the field can take the next message at once.
  document.body.addEventListener("htmx:beforeRequest", function (event) {
    const form = event.detail.elt;
    const text = isComposer(form) && form.querySelector("textarea[name=text]");
    if (!text) return;
    sending.set(form, text.value);
    text.value = "";
    keep("");
  });
  document.body.addEventListener("htmx:afterRequest", function (event) {
    const form = event.detail.elt;
    if (!isComposer(form)) return;
    const sent = sending.get(form) || "";
    sending.delete(form);
    const text = form.querySelector("textarea[name=text]");
    if (event.detail.successful) {
      const key = form.querySelector("input[name=idempotency_key]");
      if (key) key.value = newKey();
    } else if (text && sent) {
      // Not sent: the text comes back, before whatever was typed meanwhile.
      text.value = text.value ? sent + "\n" + text.value : sent;
      keep(text.value);
    }
  });
  restore();
})();
