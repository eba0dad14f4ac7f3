// The chat page opens at its newest message, or at a prompt waiting for an answer, and keeps
// following the conversation as it grows (unless the reader scrolled up to read history).
(function () {
  "use strict";

  function waitingPrompt() {
    return document.querySelector("#slots .slot");
  }

  function newest() {
    const items = document.querySelectorAll("#messages .timeline > li");
    return items.length ? items[items.length - 1] : null;
  }

  function nearBottom() {
    const doc = document.documentElement;
    return doc.scrollHeight - (window.scrollY + window.innerHeight) < 200;
  }

  function showLatest(behavior) {
    const prompt = waitingPrompt();
    if (prompt) {
      prompt.scrollIntoView({ block: "center", behavior: behavior || "auto" });
    } else if (newest()) {
      // The bottom of the page: the newest message and the composer under it.
      window.scrollTo({ top: document.documentElement.scrollHeight, behavior: behavior || "auto" });
    }
  }

  if (!document.getElementById("chat")) return;
  showLatest();

  let following = true;
  window.addEventListener("scroll", function () { following = nearBottom(); }, { passive: true });
  document.body.addEventListener("htmx:afterSwap", function (event) {
    const id = event.detail.target && event.detail.target.id;
    if ((id === "messages" && following) || (id === "slots" && waitingPrompt())) {
      showLatest("smooth");
    }
  });
})();
