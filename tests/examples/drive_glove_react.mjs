// Runs examples/glove-react's modules, unchanged, with Node's fetch against a live server:
// every RemoteStoreActions method, then one chat turn over a signed URL (no headers at all).
// Prints one JSON document of what each call returned; the pytest asserts on it.
//
//   node drive_glove_react.mjs <baseUrl> <token> <sessionId>

import { createStoreActions } from "../../examples/glove-react/store-actions.js";
import { chatTurn, mintChatUrl } from "../../examples/glove-react/chat.js";

const [baseUrl, token, sid] = process.argv.slice(2);
const options = { baseUrl, headers: { Authorization: `Token ${token}` } };
const actions = createStoreActions(options);
const out = {};

const message = {
  sender: "agent",
  text: "Checking.",
  provider_options: { openrouter: { reasoning_details: [{ type: "reasoning.text", text: "hm" }] } },
  tool_calls: [{ id: "c1", tool_name: "check_stock", input_args: { sku: "AA" },
                 provider_options: { google: { thoughtSignature: "sig" } } }],
};
await actions.appendMessages(sid, [{ sender: "user", text: "Hi", pre_modified_text: "hi" }, message]);
out.messages = await actions.getMessages(sid);

await actions.addTokens(sid, { tokens_in: 100, tokens_out: 20, cache_read_input_tokens: 80 });
out.tokenCountAfterAdd = await actions.getTokenCount(sid);
await actions.incrementTurn(sid);
await actions.incrementTurn(sid);
out.turnCountAfterTwo = await actions.getTurnCount(sid);
await actions.resetCounters(sid);
out.countersAfterReset = [await actions.getTokenCount(sid), await actions.getTurnCount(sid)];

await actions.addTasks(sid, [
  { id: "t1", content: "Grind beans", activeForm: "Grinding beans", status: "pending" },
  { id: "t/2", content: "Brew", activeForm: "Brewing", status: "pending" },
]);
await actions.updateTask(sid, "t/2", { status: "in_progress" });
out.tasks = await actions.getTasks(sid);

const item = {
  id: `inbox_${Date.now()}_node`, tag: "restock_watch", request: "Tell me when AA is back",
  response: null, status: "pending", blocking: false,
  created_at: new Date().toISOString(), resolved_at: null,
};
await actions.addInboxItem(sid, item);
out.inbox = await actions.getInboxItems(sid);
out.resolvedBefore = await actions.getResolvedInboxItems(sid);
await actions.updateInboxItem(sid, item.id, { status: "consumed" }); // the owner withdraws it
out.inboxAfterUpdate = await actions.getInboxItems(sid);
try {
  await actions.updateInboxItem(sid, "inbox_no_such_item", { status: "consumed" });
  out.unknownUpdate = "accepted";
} catch (error) {
  out.unknownUpdate = error.status;
}

out.permissionBefore = await actions.getPermission(sid, "checkout", { total: 12, items: ["AA"] });
await actions.setPermission(sid, "checkout", "granted", { total: 12, items: ["AA"] });
out.permissionAfter = await actions.getPermission(sid, "checkout", { total: 12, items: ["AA"] });
out.permissionOtherInput = await actions.getPermission(sid, "checkout", { total: 13, items: ["AA"] });
await actions.setPermission(sid, "wipe", "denied");
out.permissionNoInput = await actions.getPermission(sid, "wipe");

const { url } = await mintChatUrl(sid, options);
const frames = [];
out.done = await chatTurn(
  url,
  { systemPrompt: "You are a barista.", messages: [{ sender: "user", text: "Hello" }], tools: [] },
  { onFrame: (frame) => frames.push(frame.type) },
);
out.frameTypes = frames;
try {
  await chatTurn(`${baseUrl}/api/chat`, { messages: [{ sender: "user", text: "Hello" }] });
  out.plainChatFromNode = "accepted";
} catch (error) {
  out.plainChatFromNode = error.message;
}

process.stdout.write(JSON.stringify(out));
