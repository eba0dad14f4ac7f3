// Glove's extension scenarios run through the published glove-core@4.1.0 with a scripted
// model: hooks, skills (user- and agent-invoked), subagents and content skills.
// Only this harness is ours; everything it exercises is the installed package.
//
//   npm install glove-core@4.1.0 zod@4   (in a scratch folder; see README.md here)
//   node extensions.mjs > ../fixtures/glove_core_4_1_0_extensions.json
//
// The scenarios follow the behaviour glove's own docs and sources describe
// (packages/glove/src/extensions.ts, content-skills.ts): the repository ships no tests for
// them, so each case here is one of those documented behaviours.

import { Glove, MemoryStore, Displaymanager, getToolJsonSchema } from "glove-core";
import { useReadSkill } from "glove-core/content-skills";

const clone = (v) => (v === undefined ? null : JSON.parse(JSON.stringify(v)));
const SYSTEM_PROMPT = "You are Brew, the assistant of a small coffee shop.";
const EVENTS = new Set(["hook_invoked", "skill_invoked", "subagent_invoked", "subagent_completed", "tool_use_result"]);

class ScriptedModel {
  constructor(label, steps) {
    this.label = label;
    this.name = `scripted:${label}`;
    this.steps = [...steps];
    this.calls = [];
  }
  setSystemPrompt(p) { this.systemPrompt = p; }
  async prompt(request, notify) {
    const index = this.calls.length;
    const step = this.steps.shift();
    if (!step) throw new Error(`[${this.label}] script exhausted at call #${index}`);
    const tool_calls = step.tool_calls?.map((tc, i) => ({
      id: `call_${this.label}_${index}_${i}`, tool_name: tc.name, input_args: tc.input,
    }));
    const reply = { sender: "agent", text: step.text ?? "", ...(tool_calls?.length ? { tool_calls } : {}) };
    this.calls.push({
      messages: clone(request.messages),
      tools: (request.tools ?? []).map((t) => ({ name: t.name, description: t.description, input_schema: getToolJsonSchema(t) })),
    });
    await notify("model_response_complete", { text: reply.text, tool_calls: reply.tool_calls, tokens_in: 100, tokens_out: 20 });
    return { messages: [reply], tokens_in: 100, tokens_out: 20 };
  }
}

function build(label, steps, storeId = `session_${label}`) {
  const store = new MemoryStore(storeId);
  const model = new ScriptedModel(label, steps);
  const glove = new Glove({
    store, model, displayManager: new Displaymanager(), systemPrompt: SYSTEM_PROMPT, serverMode: true,
    compaction_config: { compaction_instructions: "Summarize." },
  });
  const events = [];
  glove.addSubscriber({ async record(type, data) { if (EVENTS.has(type)) events.push({ type, data: clone(data) }); } });
  return { glove, store, model, events };
}

async function run(name, description, { label, steps, setup, requests }) {
  const s = build(label, steps);
  await setup?.(s);
  s.glove.build();
  const returned = [];
  for (const request of requests) returned.push(clone(await s.glove.processRequest(request)));
  for (const e of s.events) if (e.type === "tool_use_result") delete e.data.duration_ms;
  const stored = clone(await s.store.getMessages());
  for (const m of stored) for (const r of m.tool_results ?? []) delete r.duration_ms;
  for (const c of s.model.calls) for (const m of c.messages) for (const r of m.tool_results ?? []) delete r.duration_ms;
  return { name, description, requests, returned, model_calls: s.model.calls, stored_messages: stored, events: s.events };
}

const scenarios = [];

scenarios.push(await run("user_skill", "A /skill in the user's text: its content stored as a user message marked is_skill_injection before the user's message, whose directive becomes a placeholder; unbound /paths stay.", {
  label: "user_skill",
  steps: [{ text: "Grind medium-fine, 1:16." }],
  setup: ({ glove }) => glove.defineSkill({ name: "brew-guide", async handler({ parsedText }) { return `Brewing guide. Asked: ${parsedText}`; } }),
  requests: ["/brew-guide how do I brew in /usr/local/bin?"],
}));

scenarios.push(await run("multimodal_skill", "A skill that answers content parts: a text line plus the parts in `content`.", {
  label: "multimodal_skill",
  steps: [{ text: "Noted." }],
  setup: ({ glove }) => glove.defineSkill({ name: "menu", async handler() {
    return [{ type: "text", text: "Today's menu" }, { type: "image", source: { type: "url", media_type: "image/png", url: "https://example.com/menu.png" } }];
  } }),
  requests: ["/menu what is on?"],
}));

scenarios.push(await run("hook_rewrite", "A /hook that rewrites the text; hooks bind before skills of the same name.", {
  label: "hook_rewrite",
  steps: [{ text: "Ok." }],
  setup: ({ glove }) => {
    glove.defineHook("polite", async ({ parsedText, rawText }) => ({ rewriteText: `Please: ${parsedText} (raw: ${rawText})` }));
    glove.defineSkill({ name: "polite", async handler() { return "never used"; } });
  },
  requests: ["/polite add milk"],
}));

scenarios.push(await run("hook_short_circuit", "A /hook that ends the request: the user message and the hook's message are stored, no model call.", {
  label: "hook_short_circuit",
  steps: [],
  setup: ({ glove }) => glove.defineHook("closed", async () => ({ shortCircuit: { message: { sender: "agent", text: "We are closed today." } } })),
  requests: ["/closed can I order?"],
}));

scenarios.push(await run("agent_skill", "An exposed skill the model pulls in with glove_invoke_skill; an unknown one gets the error listing the exposed skills.", {
  label: "agent_skill",
  steps: [
    { tool_calls: [{ name: "glove_invoke_skill", input: { name: "brew-guide", args: "v60" } }, { name: "glove_invoke_skill", input: { name: "latte" } }, { name: "glove_invoke_skill", input: { name: "secret" } }] },
    { text: "Use a V60." },
  ],
  setup: ({ glove }) => {
    glove.defineSkill({ name: "brew-guide", description: "How to brew by hand", exposeToAgent: true, async handler({ args, source, parsedText }) { return `Guide (${source}) for ${args}; parsed: ${parsedText}`; } });
    glove.defineSkill({ name: "latte", exposeToAgent: true, async handler() { return ""; } });
    glove.defineSkill({ name: "secret", async handler() { return "hidden"; } });
  },
  requests: ["How do I brew?"],
}));

scenarios.push(await run("subagent", "A parent delegating with glove_invoke_subagent: the child's final text is the tool result; unknown names, a throwing factory and a child without text.", {
  label: "subagent",
  steps: [
    { tool_calls: [
      { name: "glove_invoke_subagent", input: { name: "roaster", prompt: "Which roast for Kenya AA?" } },
      { name: "glove_invoke_subagent", input: { name: "nobody", prompt: "x" } },
      { name: "glove_invoke_subagent", input: { name: "broken", prompt: "y" } },
      { name: "glove_invoke_subagent", input: { name: "quiet", prompt: "z" } },
    ] },
    { text: "A medium roast." },
  ],
  setup: ({ glove }) => {
    glove.defineSubAgent({ name: "roaster", description: "Knows every roast", factory: () => build("roaster_child", [{ text: "Medium, 12 minutes." }]).glove.build() });
    glove.defineSubAgent({ name: "broken", factory: () => { throw new Error("no roaster today"); } });
    glove.defineSubAgent({ name: "quiet", factory: () => build("quiet_child", [{ text: "" }]).glove.build() });
  },
  requests: ["@roaster which roast?"],
}));

const SKILLS = [
  { name: "python-debug", description: "Diagnose Python errors & apply <fix> patterns.", content: "# Python Debugging\nRead the traceback.", sections: { "api-reference": "# API\nraise", examples: "# Examples\n1/0" }, priority: 2 },
  { name: "git-flow", description: "Branching rules.", content: "# Git\nRebase.", path: "/skills/git-flow" },
  { name: "hidden-one", description: "Not listed.", content: "Secret content.", hidden: true },
];

scenarios.push(await run("content_skills", "useReadSkill: glove_read_skill's listing, a read, a section read, a missing section, an unknown skill, a hidden skill read by name, and /name directives.", {
  label: "content_skills",
  steps: [
    { tool_calls: [
      { name: "glove_read_skill", input: { name: "python-debug" } },
      { name: "glove_read_skill", input: { name: "python-debug", section: "examples" } },
      { name: "glove_read_skill", input: { name: "python-debug", section: "nope" } },
      { name: "glove_read_skill", input: { name: "unknown" } },
      { name: "glove_read_skill", input: { name: "hidden-one" } },
      { name: "glove_read_skill", input: { name: "git-flow" } },
    ] },
    { text: "Read them." },
    { text: "Following git-flow." },
  ],
  setup: ({ glove }) => useReadSkill(glove, SKILLS),
  requests: ["Help me debug", "/git-flow which branch?"],
}));

scenarios.push(await run("content_skills_budget", "A listing over its token budget: descriptions kept by priority, then name-only lines, then an omitted count.", {
  label: "content_skills_budget",
  steps: [{ text: "Ok." }],
  setup: ({ glove }) => useReadSkill(glove, Array.from({ length: 12 }, (_, i) => ({
    name: `skill-${String(i).padStart(2, "0")}`, description: `Skill number ${i} `.repeat(4).trim(), content: `Body ${i}`, priority: i % 3,
  })), { listingBudgetTokens: 100 }),
  requests: ["Hi"],
}));

console.log(JSON.stringify({ generated_by: "tests/core/reference/extensions.mjs", package: "glove-core@4.1.0", scenarios }, null, 1));
