// glove-react's default useGlove flow, as its HTTP calls: the session id is made up in the
// browser (`glove_<uuid>`, as glove-react's generateSessionId does) and its history is read
// at once, before anything exists on the server; the first message then creates it.
// Runs examples/glove-react's store actions and chat turn, unchanged, with Node's fetch.
//
//   node drive_use_glove_default.mjs <baseUrl> <token>

import { createStoreActions } from "../../examples/glove-react/store-actions.js";
import { chatTurn, mintChatUrl } from "../../examples/glove-react/chat.js";

const [baseUrl, token] = process.argv.slice(2);
const actions = createStoreActions({ baseUrl, headers: { Authorization: `Token ${token}` } });
const sid = `glove_${crypto.randomUUID()}`;
const out = { sessionId: sid };

// Mount: the hook hydrates its timeline, tasks and counters from the store.
out.mount = {
  messages: await actions.getMessages(sid),
  tasks: await actions.getTasks(sid),
  inbox: await actions.getInboxItems(sid),
  tokens: await actions.getTokenCount(sid),
  turns: await actions.getTurnCount(sid),
};

// sendMessage: the user's message is stored first, then the model runs at /api/chat.
await actions.appendMessages(sid, [{ sender: "user", text: "Hello" }]);
const { url } = await mintChatUrl(sid, { baseUrl, headers: { Authorization: `Token ${token}` } });
const done = await chatTurn(url, {
  systemPrompt: "You are a barista.",
  messages: await actions.getMessages(sid),
  tools: [],
});
await actions.appendMessages(sid, [done.message]);
await actions.addTokens(sid, {
  tokens_in: done.tokens_in,
  tokens_out: done.tokens_out,
  cache_read_input_tokens: done.cache_read_input_tokens,
  cache_creation_input_tokens: done.cache_creation_input_tokens,
});
await actions.incrementTurn(sid);

// Reload: the same id reads the stored conversation back.
out.reload = {
  messages: (await actions.getMessages(sid)).map((m) => [m.sender, m.text]),
  turns: await actions.getTurnCount(sid),
};
process.stdout.write(JSON.stringify(out));
