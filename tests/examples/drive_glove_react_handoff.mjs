// examples/glove-react's store actions, unchanged, reading a chat a person answers: the
// history as a glove-react app loads it (`getMessages`), with the staff member's replies.
// Prints one JSON document; the pytest asserts on it.
//
//   node drive_glove_react_handoff.mjs <baseUrl> <token> <sessionId>

import { createStoreActions } from "../../examples/glove-react/store-actions.js";

const [baseUrl, token, sid] = process.argv.slice(2);
const actions = createStoreActions({ baseUrl, headers: { Authorization: `Token ${token}` } });
process.stdout.write(JSON.stringify({ messages: await actions.getMessages(sid) }));
