// The one place that talks HTTP: JSON in, JSON out, errors as exceptions.
//
// In a browser on the server's own origin nothing but `Content-Type: application/json` is
// sent: the Django session cookie goes along by itself and the server accepts same-origin
// JSON without a CSRF token. Anywhere else pass `headers: {Authorization: "Token …"}`.

/** @typedef {import("./types.js").ClientOptions} ClientOptions */

/**
 * @param {ClientOptions} options
 * @returns {(method: string, path: string, body?: unknown) => Promise<any>}
 */
export function jsonClient({ baseUrl = "", headers = {}, fetch: fetchImpl } = {}) {
  const doFetch = fetchImpl ?? globalThis.fetch;
  const root = baseUrl.replace(/\/+$/, "");
  return async function call(method, path, body) {
    const response = await doFetch(`${root}${path}`, {
      method,
      headers: {
        Accept: "application/json",
        ...(method === "GET" ? {} : { "Content-Type": "application/json" }),
        ...headers,
      },
      body: method === "GET" ? undefined : JSON.stringify(body ?? {}),
    });
    const text = await response.text();
    const data = text ? JSON.parse(text) : null;
    if (!response.ok) {
      const message = data && data.error ? data.error : response.statusText;
      const error = new Error(`${method} ${path}: ${response.status} ${message}`);
      Object.assign(error, { status: response.status, body: data });
      throw error;
    }
    return data;
  };
}
