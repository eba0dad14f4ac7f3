// JSDoc types for the JSON glove-django speaks: glove-core's own field names (contract §1).
// No runtime code here; `import("./types.js").Message` in a JSDoc comment picks them up.

/**
 * @typedef {Object} ToolCall
 * @property {string} tool_name
 * @property {unknown} input_args
 * @property {string} [id]
 * @property {Record<string, Record<string, unknown>>} [provider_options] kept verbatim
 */

/**
 * @typedef {Object} ToolResult
 * @property {string} tool_name
 * @property {string} [call_id]
 * @property {{data: unknown, status: "success"|"error"|"aborted", message?: string,
 *   renderData?: unknown, summary?: string, generateSummaryArgs?: unknown}} result
 * @property {number} [duration_ms]
 */

/**
 * A glove-core message. The server keeps every field it does not interpret (and any field a
 * later Glove adds) verbatim, so this type is open.
 * @typedef {Object} Message
 * @property {"user"|"agent"} sender
 * @property {string} text
 * @property {string} [id]
 * @property {string} [pre_modified_text]
 * @property {Array<{type: "text"|"image"|"video"|"document", text?: string, name?: string,
 *   source?: {type: "base64"|"url", media_type: string, data?: string, url?: string}}>} [content]
 * @property {ToolCall[]} [tool_calls]
 * @property {ToolResult[]} [tool_results]
 * @property {boolean} [is_compaction]
 * @property {boolean} [is_skill_injection]
 * @property {"runtime"|"inbox"} [framework_context]
 * @property {string} [reasoning_content]
 * @property {Record<string, Record<string, unknown>>} [provider_options]
 */

/**
 * @typedef {Object} Task
 * @property {string} id
 * @property {string} content
 * @property {string} activeForm
 * @property {"pending"|"in_progress"|"completed"} status
 */

/**
 * @typedef {Object} InboxItem
 * @property {string} id
 * @property {string} tag
 * @property {string} request
 * @property {string|null} response
 * @property {"pending"|"resolved"|"consumed"} status
 * @property {boolean} blocking
 * @property {string} created_at ISO 8601 UTC
 * @property {string|null} resolved_at
 */

/** @typedef {"granted"|"denied"|"unset"} PermissionStatus */

/**
 * @typedef {Object} TokenUsage
 * @property {number} tokens_in
 * @property {number} tokens_out
 * @property {number} [cache_creation_input_tokens]
 * @property {number} [cache_read_input_tokens]
 */

/**
 * glove-react's `RemoteStoreActions`: every function receives the session id first.
 * @typedef {Object} RemoteStoreActions
 * @property {(sid: string) => Promise<Message[]>} getMessages
 * @property {(sid: string, messages: Message[]) => Promise<void>} appendMessages
 * @property {(sid: string) => Promise<number>} getTokenCount
 * @property {(sid: string, usage: TokenUsage) => Promise<void>} addTokens
 * @property {(sid: string) => Promise<number>} getTurnCount
 * @property {(sid: string) => Promise<void>} incrementTurn
 * @property {(sid: string) => Promise<void>} resetCounters
 * @property {(sid: string) => Promise<Task[]>} getTasks
 * @property {(sid: string, tasks: Task[]) => Promise<void>} addTasks
 * @property {(sid: string, taskId: string, updates: Partial<Pick<Task, "status"|"content"|"activeForm">>) => Promise<void>} updateTask
 * @property {(sid: string) => Promise<InboxItem[]>} getInboxItems
 * @property {(sid: string, item: InboxItem) => Promise<void>} addInboxItem
 * @property {(sid: string, itemId: string, updates: Partial<Pick<InboxItem, "status"|"response"|"resolved_at">>) => Promise<void>} updateInboxItem
 * @property {(sid: string) => Promise<InboxItem[]>} getResolvedInboxItems
 * @property {(sid: string, toolName: string, input?: unknown) => Promise<PermissionStatus>} getPermission
 * @property {(sid: string, toolName: string, status: PermissionStatus, input?: unknown) => Promise<void>} setPermission
 */

/**
 * How the actions reach the server.
 * @typedef {Object} ClientOptions
 * @property {string} [baseUrl] "" (same origin, the default) or e.g. "https://glove.example"
 * @property {Record<string, string>} [headers] e.g. {Authorization: "Token …"} outside a browser
 * @property {typeof fetch} [fetch] defaults to the global fetch
 */

export {};
