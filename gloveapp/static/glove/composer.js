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

  document.body.addEventListener("htmx:afterRequest", function (event) {
    const form = event.detail.elt;
    if (event.detail.successful && form && form.matches && form.matches("form[data-composer]")) {
      form.reset();
    }
  });
})();
