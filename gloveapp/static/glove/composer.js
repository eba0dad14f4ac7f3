// The composer: Enter sends (Shift+Enter breaks the line), and a sent message clears it.
// A static file rather than inline handlers, so the page runs under a script CSP.
(function () {
  "use strict";

  document.addEventListener("keydown", function (event) {
    const field = event.target;
    if (!field || field.id !== "composer-text") return;
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      field.form.requestSubmit();
    }
  });

  // Each message gets a key of its own: a post sent twice (a retry after a timeout, a double
  // submit) is stored once. A sent message's key is used up; the next one gets a new key.
  function newKey() {
    if (window.crypto && window.crypto.randomUUID) return window.crypto.randomUUID();
    return Date.now().toString(36) + "-" + Math.random().toString(36).slice(2) +
      Math.random().toString(36).slice(2);
  }

  document.body.addEventListener("htmx:afterRequest", function (event) {
    const form = event.detail.elt;
    if (event.detail.successful && form && form.matches && form.matches("form[data-composer]")) {
      form.reset();
      const key = form.querySelector("input[name=idempotency_key]");
      if (key) key.value = newKey();
    }
  });
})();
