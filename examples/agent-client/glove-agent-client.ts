/**
 * A dependency-free client of a glove-django server's agents, for a browser or Node 18+
 * (it needs only `fetch`, `TextDecoder` and `AbortController`).
 *
 *   const glove = new GloveAgentClient("https://shop.example", { token: "…" });
 *   const session = await glove.createSession({ agent: "coffee" });
 *   const turn = await glove.startTurn(session, "Show me the Kenyan coffees");
 *   for await (const event of glove.stream(session, { since: turn.lastEventId, untilTurn: turn.turnId })) {
 *     if (event.type === "text_delta") render(event.payload.text);
 *     if (event.type === "slot.pushed") showSlots(await glove.slots(session));
 *   }
 *
 * In a browser on the server's own site, leave `token` out: the session cookie is sent, and
 * the same-origin JSON writes need no CSRF token. `stream` reads the session's Server-Sent
 * Events and resumes by itself after a dropped connection (`Last-Event-ID`), so every stored
 * event arrives once and in order; `resync` means "reload what you show".
 */

export interface StreamEvent {
  /** The event log's id; null for transient events (streamed text) and `resync`. */
  id: number | null;
  type: string;
  payload: Record<string, any>;
}

export interface TurnState {
  turnId: number;
  sessionId: string;
  state: "queued" | "running" | "waiting" | "done" | "failed" | "cancelled";
  text: string;
  attempts: number;
  error: string;
  notice: string;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  turnUrl: string;
  streamUrl: string;
}

export interface StartedTurn extends TurnState {
  ahead: number;
  lastEventId: number;
}

export interface Slot {
  id: string;
  renderer: string;
  input: any;
  toolName: string | null;
  callId: string | null;
  displayStrategy: string;
  waitsForAnswer: boolean;
  answeredBy: "owner" | "staff" | "nobody";
  answerSchema: Record<string, any> | null;
  expired: boolean;
  createdAt: string;
}

export interface StreamOptions {
  /** Start after this event id (a turn's `lastEventId`); omitted: from now. */
  since?: number | null;
  /** End once this turn finished, failed or was withdrawn. */
  untilTurn?: number;
  /** Reconnect after a dropped connection (default true). */
  reconnect?: boolean;
  signal?: AbortSignal;
}

export class GloveApiError extends Error {
  constructor(
    public status: number,
    message: string,
    public field: string | null = null,
    public retryAfter: number | null = null,
  ) {
    super(`${status}: ${message}`);
  }
}

const TURN_END_EVENTS = new Set(["turn.finished", "turn.error", "turn.withdrawn"]);
const RECONNECT_DELAY_MS = 500;
const MAX_RECONNECT_DELAY_MS = 10_000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const part = (value: string | number) => encodeURIComponent(String(value));

function newKey(): string {
  const random = (globalThis as any).crypto?.randomUUID?.();
  return random ?? `key-${Date.now()}-${Math.random().toString(36).slice(2)}`;
}

async function errorOf(response: Response): Promise<GloveApiError> {
  let body: any = {};
  try {
    body = await response.json();
  } catch {
    body = {};
  }
  const retry = response.headers.get("Retry-After");
  return new GloveApiError(
    response.status,
    String(body?.error ?? response.statusText),
    body?.field ?? null,
    retry !== null && !Number.isNaN(Number(retry)) ? Number(retry) : null,
  );
}

export class GloveAgentClient {
  private base: string;
  private streamBase: string;
  private headers: Record<string, string>;

  /** `streamUrl`: where the event stream is served when not at `baseUrl` (a server without
   * the production proxy in front: the ASGI server's own address). */
  constructor(baseUrl: string, options: { token?: string; streamUrl?: string } = {}) {
    this.base = baseUrl.replace(/\/+$/, "");
    this.streamBase = (options.streamUrl ?? baseUrl).replace(/\/+$/, "");
    this.headers = { Accept: "application/json" };
    if (options.token) this.headers.Authorization = `Token ${options.token}`;
  }

  private async call<T>(method: string, path: string, body?: unknown, extra: Record<string, string> = {}): Promise<T> {
    const init: RequestInit = { method, headers: { ...this.headers, ...extra }, credentials: "same-origin" };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      (init.headers as Record<string, string>)["Content-Type"] = "application/json";
    }
    const response = await fetch(`${this.base}/api/${path}`, init);
    if (!response.ok) throw await errorOf(response);
    const text = await response.text();
    return (text ? JSON.parse(text) : null) as T;
  }

  async createSession(options: { agent?: string; title?: string; sessionId?: string } = {}): Promise<string> {
    const body: Record<string, string> = { agentName: options.agent ?? "", title: options.title ?? "" };
    if (options.sessionId !== undefined) body.sessionId = options.sessionId;
    return (await this.call<{ sessionId: string }>("POST", "sessions", body)).sessionId;
  }

  /** Queue a message as a turn; a retry with the same key starts no second turn. */
  startTurn(sessionId: string, text: string, options: { idempotencyKey?: string } = {}): Promise<StartedTurn> {
    return this.call("POST", `sessions/${part(sessionId)}/agent/turns`, { text }, {
      "Idempotency-Key": options.idempotencyKey ?? newKey(),
    });
  }

  turn(sessionId: string, turnId: number): Promise<TurnState> {
    return this.call("GET", `sessions/${part(sessionId)}/agent/turns/${part(turnId)}`);
  }

  slots(sessionId: string): Promise<Slot[]> {
    return this.call("GET", `sessions/${part(sessionId)}/slots`);
  }

  async answerSlot(sessionId: string, slotId: string, value: unknown): Promise<void> {
    await this.call("POST", `sessions/${part(sessionId)}/slots/${part(slotId)}`, { value });
  }

  // Closes a slot unanswered, as the chat page's Dismiss button: Glove's reject. The waiting
  // tool is run again and may push a fresh slot (a permission prompt: a no for this call).
  async dismissSlot(sessionId: string, slotId: string): Promise<void> {
    await this.call("POST", `sessions/${part(sessionId)}/slots/${part(slotId)}`, { dismiss: true });
  }

  async answerPermission(sessionId: string, promptId: string, value = "once"): Promise<void> {
    await this.call("POST", `sessions/${part(sessionId)}/permission-prompts/${part(promptId)}`, { value });
  }

  async stop(sessionId: string): Promise<boolean> {
    return (await this.call<{ cancelled: boolean }>("POST", `sessions/${part(sessionId)}/cancel`)).cancelled;
  }

  /** Staff: the open approval requests they may see. */
  async approvals(): Promise<any[]> {
    return (await this.call<{ results: any[] }>("GET", "approvals/?view=all&status=open")).results;
  }

  /** Staff: decide an approval request (approve, reject, edit…) with its fingerprint. */
  decideApproval(approvalId: string, decision: string, fields: Record<string, unknown>): Promise<any> {
    return this.call("POST", `approvals/${part(approvalId)}/decide`, { decision, ...fields });
  }

  /** The session's events as an async iterator, resuming by itself after a drop. */
  async *stream(sessionId: string, options: StreamOptions = {}): AsyncGenerator<StreamEvent> {
    let cursor = options.since ?? null;
    let delay = RECONNECT_DELAY_MS;
    const reconnect = options.reconnect ?? true;
    while (!options.signal?.aborted) {
      const headers: Record<string, string> = { ...this.headers, Accept: "text/event-stream" };
      if (cursor !== null) headers["Last-Event-ID"] = String(cursor);
      let response: Response;
      try {
        response = await fetch(`${this.streamBase}/api/sessions/${part(sessionId)}/events`, {
          headers,
          credentials: "same-origin",
          signal: options.signal,
        });
      } catch (error) {
        if (!reconnect || options.signal?.aborted) throw error;
        await sleep(delay);
        delay = Math.min(delay * 2, MAX_RECONNECT_DELAY_MS);
        continue;
      }
      if (!response.ok) {
        const error = await errorOf(response);
        if (error.status !== 503 || !reconnect) throw error;
        await sleep((error.retryAfter ?? 1) * 1000);
        continue;
      }
      delay = RECONNECT_DELAY_MS;
      try {
        for await (const event of readEvents(response.body!)) {
          if (event.id !== null) cursor = event.id;
          else if (event.type === "resync") cursor = event.payload.last_event_id ?? cursor;
          yield event;
          const ended = options.untilTurn !== undefined && TURN_END_EVENTS.has(event.type) && event.payload.turn === options.untilTurn;
          if (ended || event.type === "session.deleted") return;
        }
      } catch (error) {
        if (!reconnect || options.signal?.aborted) throw error;
      }
      if (!reconnect) return;
      await sleep(delay); // the connection dropped: resume from the cursor
      delay = Math.min(delay * 2, MAX_RECONNECT_DELAY_MS);
    }
  }
}

/** Server-Sent Events from a response body: each message's data is one JSON frame. */
async function* readEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<StreamEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let data: string[] = [];
  try {
    while (true) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let newline: number;
      while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
        if (line === "") {
          if (data.length) {
            const frame = JSON.parse(data.join("\n"));
            data = [];
            yield { id: frame.id ?? null, type: frame.type, payload: frame.payload ?? {} };
          }
        } else if (line.startsWith("data:")) {
          data.push(line.slice(5).replace(/^ /, ""));
        }
        // `id:`, `event:` and comments (`: heartbeat`) need nothing here: the frame has them.
      }
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => undefined);
  }
}
