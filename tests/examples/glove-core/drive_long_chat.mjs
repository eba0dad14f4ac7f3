// The published glove-core (unchanged, from npm) against a live glove-django server: a store
// adapter over examples/glove-react's store actions (what glove-react's createRemoteStore
// builds), one processRequest on an existing long chat with a scripted model. Prints one
// JSON document of what the model was handed and what the store holds after; the callers
// (tests/examples/test_glove_core_long_chat.py, bench/long_chat.py) assert on it.
//
//   node drive_long_chat.mjs <baseUrl> <token> <sessionId>

import { Glove, Displaymanager } from "glove-core";
import { createStoreActions } from "../../../examples/glove-react/store-actions.js";

const [baseUrl, token, sid] = process.argv.slice(2);
const actions = createStoreActions({ baseUrl, headers: { Authorization: `Token ${token}` } });

// Every method glove-react's RemoteStoreActions names, bound to this session.
const store = { identifier: sid };
for (const [name, call] of Object.entries(actions)) {
  store[name] = (...args) => call(sid, ...args);
}

const seen = [];
const model = {
  name: "scripted:long-chat",
  setSystemPrompt() {},
  async prompt(request, notify) {
    const messages = request.messages;
    seen.push({ count: messages.length, first: messages[0]?.text, last: messages.at(-1)?.text });
    const reply = { sender: "agent", text: `Read ${messages.length} messages.` };
    await notify("model_response_complete", {
      text: reply.text, stop_reason: "end_turn", tokens_in: 10, tokens_out: 5,
    });
    return { messages: [reply], tokens_in: 10, tokens_out: 5 };
  },
};

const glove = new Glove({
  store,
  model,
  displayManager: new Displaymanager(),
  systemPrompt: "You are Brew.",
  serverMode: true,
  compaction_config: { compaction_instructions: "Summarize." },
});
glove.build();

const started = performance.now();
const returned = await glove.processRequest("One more thing: what did I order first?");
const turnMs = performance.now() - started;
const after = await store.getMessages();
process.stdout.write(JSON.stringify({
  modelCalls: seen,
  returnedText: returned?.messages?.at(-1)?.text ?? null,
  storedAfter: after.length,
  lastStored: after.slice(-2).map((m) => [m.sender, m.text]),
  turnMs: Math.round(turnMs),
}) + "\n");
