// glove-react `RemoteStoreActions` for a glove-django server: every store method, one route
// each (docs/reference/rest-api.md). Use them with glove-react's `createRemoteStore`:
//
//   import { createRemoteStore } from "glove-react";
//   import { storeActions } from "./store-actions.js";
//   const store = createRemoteStore(sessionId, storeActions);
//
// Unlike the coffee example's actions, failures throw (with the server's `{error}` text)
// instead of turning into empty lists, so a refused write is never silently lost.

import { jsonClient } from "./http.js";

/** @typedef {import("./types.js").RemoteStoreActions} RemoteStoreActions */
/** @typedef {import("./types.js").ClientOptions} ClientOptions */

const enc = encodeURIComponent;

/**
 * @param {ClientOptions} [options]
 * @returns {RemoteStoreActions}
 */
export function createStoreActions(options = {}) {
  const call = jsonClient(options);
  const at = (sid, tail) => `/api/sessions/${enc(sid)}/${tail}`;
  return {
    getMessages: (sid) => call("GET", at(sid, "messages")),
    appendMessages: async (sid, messages) => {
      await call("POST", at(sid, "messages"), { messages });
    },

    getTokenCount: async (sid) => (await call("GET", at(sid, "tokens"))).token_count,
    addTokens: async (sid, usage) => {
      await call("POST", at(sid, "tokens"), usage);
    },
    getTurnCount: async (sid) => (await call("GET", at(sid, "turns"))).turn_count,
    incrementTurn: async (sid) => {
      await call("POST", at(sid, "turns"));
    },
    resetCounters: async (sid) => {
      await call("POST", at(sid, "reset-counters"));
    },

    getTasks: (sid) => call("GET", at(sid, "tasks")),
    addTasks: async (sid, tasks) => {
      await call("PUT", at(sid, "tasks"), { tasks });
    },
    updateTask: async (sid, taskId, updates) => {
      await call("POST", at(sid, `tasks/${enc(taskId)}`), { updates });
    },

    getInboxItems: (sid) => call("GET", at(sid, "inbox")),
    addInboxItem: async (sid, item) => {
      await call("POST", at(sid, "inbox"), { item });
    },
    updateInboxItem: async (sid, itemId, updates) => {
      await call("POST", at(sid, "inbox/update"), { itemId, updates });
    },
    getResolvedInboxItems: (sid) => call("GET", at(sid, "inbox/resolved")),

    getPermission: async (sid, toolName, input) => {
      const query = new URLSearchParams({ toolName });
      if (input !== undefined) query.set("input", JSON.stringify(input));
      return (await call("GET", `${at(sid, "permissions")}?${query}`)).status;
    },
    setPermission: async (sid, toolName, status, input) => {
      await call("PUT", at(sid, "permissions"), { toolName, status, input: input ?? null });
    },
  };
}

/** Same-origin actions for a page served by (or proxied to) the glove-django server. */
export const storeActions = createStoreActions();
