// The model in endpoint mode: glove-react's `useGlove({ endpoint })` posts
// `{systemPrompt, messages, tools}` to the endpoint with only `Content-Type:
// application/json` and reads back `data: {json}` frames (text_delta, tool_use, done).
//
// - Same origin (the page is served by the glove-django server or a proxy in front of it):
//     useGlove({ endpoint: CHAT_ENDPOINT, sessionId, store })
//   The session cookie authenticates; no CSRF header is needed for same-origin JSON.
// - Another origin, or a server-side app: mint a signed URL with a token or session,
//   then use it as the endpoint (it expires; mint a fresh one per page load):
//     const { url } = await mintChatUrl(sessionId, { baseUrl, headers });
//     useGlove({ endpoint: url, sessionId, store })

import { jsonClient } from "./http.js";

/** @typedef {import("./types.js").ClientOptions} ClientOptions */
/** @typedef {import("./types.js").Message} Message */

export const CHAT_ENDPOINT = "/api/chat";

/**
 * A short-lived chat URL bound to one of the caller's sessions.
 * @param {string} sessionId
 * @param {ClientOptions} [options]
 * @returns {Promise<{url: string, path: string, expiresAt: string}>}
 */
export function mintChatUrl(sessionId, options = {}) {
  const call = jsonClient(options);
  return call("POST", `/api/sessions/${encodeURIComponent(sessionId)}/chat-url`);
}

/**
 * One model turn over the endpoint, exactly as glove-react's endpoint model sends it (no
 * headers but Content-Type). glove-react does this for you; this is for non-React code
 * and for checking a deployment from Node.
 * @param {string} endpoint
 * @param {{systemPrompt?: string, messages: Message[],
 *   tools?: Array<{name: string, description: string, parameters?: object}>}} request
 * @param {{fetch?: typeof fetch, onFrame?: (frame: any) => void}} [options]
 * @returns {Promise<{message: Message, tokens_in: number, tokens_out: number}>} the `done` frame
 */
export async function chatTurn(endpoint, request, { fetch: fetchImpl, onFrame } = {}) {
  const response = await (fetchImpl ?? globalThis.fetch)(endpoint, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(request),
  });
  if (!response.ok) {
    throw new Error(`Chat endpoint error: ${response.status} ${response.statusText}`);
  }
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of response.body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) !== -1) {
      const raw = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!raw.startsWith("data: ")) continue;
      const frame = JSON.parse(raw.slice("data: ".length));
      onFrame?.(frame);
      if (frame.type === "done") return frame;
    }
  }
  throw new Error("Stream ended without a 'done' event");
}
