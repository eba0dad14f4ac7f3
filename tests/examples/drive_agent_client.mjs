// Drives the coffee demo end to end with examples/agent-client (compiled from TypeScript),
// with no HTML: node drive_agent_client.mjs <client.js> <base url> <customer token> <barista token>
// Prints what it saw as JSON for tests/examples/test_agent_client_example.py.
const [clientPath, baseUrl, customerToken, baristaToken] = process.argv.slice(2);
const { GloveAgentClient, GloveApiError } = await import(clientPath);

const glove = new GloveAgentClient(baseUrl, { token: customerToken });
const staff = new GloveAgentClient(baseUrl, { token: baristaToken });
const out = { answered: [], secondAnswer: null, replies: [], inboxTags: [], turnStates: [] };

async function answer(sessionId, slotId) {
  const slot = (await glove.slots(sessionId)).find((s) => s.id === slotId);
  if (slot.answeredBy === "owner" && slot.renderer === "permission_request") {
    await glove.answerPermission(sessionId, slotId, "once");
    out.answered.push("permission_request");
  } else if (slot.answeredBy === "owner") {
    await glove.answerSlot(sessionId, slotId, { confirmed: true });
    try {
      await glove.answerSlot(sessionId, slotId, { confirmed: true });
    } catch (error) {
      out.secondAnswer = error instanceof GloveApiError ? error.status : String(error);
    }
    out.answered.push(slot.renderer);
  } else if (slot.answeredBy === "staff") {
    const request = (await staff.approvals()).find((row) => row.tool === "checkout");
    const decided = await staff.decideApproval(request.id, "approve", { fingerprint: request.fingerprint });
    out.answered.push(`approval:${decided.status}`);
  }
}

async function runTurn(sessionId, text) {
  console.error("turn:", text);
  const turn = await glove.startTurn(sessionId, text);
  let last = null;
  for await (const event of glove.stream(sessionId, { since: turn.lastEventId, untilTurn: turn.turnId })) {
    last = event;
    if (event.type === "slot.pushed") await answer(sessionId, event.payload.slot_id);
    if (event.type === "inbox.changed") out.inboxTags.push(event.payload.item.tag);
  }
  out.replies.push(last.type === "turn.finished" ? last.payload.text : `${last.type}: ${JSON.stringify(last.payload)}`);
  out.turnStates.push((await glove.turn(sessionId, turn.turnId)).state);
}

const sessionId = await glove.createSession({ agent: "coffee", title: "from node" });
out.sessionId = sessionId;
await runTurn(sessionId, "Do you have Yirgacheffe?");
await runTurn(sessionId, "yes please");
await runTurn(sessionId, "add 6 Colombia");
await runTurn(sessionId, "checkout");
out.slotsAfter = await glove.slots(sessionId);
const key = "node-retry-1";
const first = await glove.startTurn(sessionId, "hello", { idempotencyKey: key });
const again = await glove.startTurn(sessionId, "hello", { idempotencyKey: key });
out.sameTurn = first.turnId === again.turnId;
for await (const event of glove.stream(sessionId, { since: first.lastEventId, untilTurn: first.turnId })) {
  // drained: the last turn ends before the test reads the orders
}
try {
  await glove.createSession({ agent: "roastery" });
} catch (error) {
  out.roastery = { status: error.status, field: error.field };
}
console.log(JSON.stringify(out));
