import assert from "node:assert/strict";
import type { TlsFetch } from "../../harness/server.ts";

export const sessionCookie = "__Host-modelgate_console";

/** A browser-like client of one console session: its cookie, its CSRF token, its origin on every change. */
export interface ConsoleClient {
  cookie: string;
  csrf: string;
  user: { id: string; email: string; role: string; accountId: string | null };
  send(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Response>;
  json<T = Record<string, unknown>>(method: string, path: string, body?: unknown): Promise<T>;
}

/** The session cookie a response sets (its value), or null. */
export function setCookieValue(res: Response, name = sessionCookie): string | null {
  for (const line of res.headers.getSetCookie()) {
    const [pair] = line.split(";");
    const eq = pair!.indexOf("=");
    if (pair!.slice(0, eq) === name) return pair!.slice(eq + 1);
  }
  return null;
}

export function consoleClient(fetch: TlsFetch, origin: string, cookie: string, session: { csrfToken: string; user: ConsoleClient["user"] }): ConsoleClient {
  const send = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    fetch(`${origin}${path}`, {
      method,
      headers: {
        cookie: `${sessionCookie}=${cookie}`,
        ...(method === "GET" ? {} : { "x-csrf-token": session.csrfToken, origin }),
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  return {
    cookie,
    csrf: session.csrfToken,
    user: session.user,
    send,
    async json(method, path, body) {
      const res = await send(method, path, body);
      const text = await res.text();
      assert.ok(res.ok, `${method} ${path}: ${res.status} ${text}`);
      return JSON.parse(text);
    },
  };
}

/** Turns a sign-in answer (login or accepted invite) into a client. */
export async function clientFrom(fetch: TlsFetch, origin: string, res: Response): Promise<ConsoleClient> {
  const text = await res.text();
  assert.equal(res.status, 200, text);
  const cookie = setCookieValue(res);
  assert.ok(cookie, "a session cookie is set");
  return consoleClient(fetch, origin, cookie, JSON.parse(text));
}

const post = (fetch: TlsFetch, origin: string, path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${origin}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });

/** An invite made with the admin token (an account's member, or an operator when `account` is null); returns its token. */
export async function inviteWithToken(fetch: TlsFetch, origin: string, adminToken: string, account: string | null, email: string, role: string): Promise<string> {
  const path = account === null ? "/admin/v1/operators/invites" : `/admin/v1/accounts/${encodeURIComponent(account)}/invites`;
  const res = await post(fetch, origin, path, { email, role }, { authorization: `Bearer ${adminToken}` });
  const body = (await res.json()) as { token: string };
  assert.equal(res.status, 201, JSON.stringify(body));
  return body.token;
}

export const testPassword = "a quiet lighthouse keeps 42 boats";

/** Invites `email` with the admin token and accepts the invite: the new user's signed-in client. */
export async function joinWithToken(fetch: TlsFetch, origin: string, adminToken: string, account: string | null, email: string, role: string, password = testPassword): Promise<ConsoleClient> {
  const token = await inviteWithToken(fetch, origin, adminToken, account, email, role);
  return clientFrom(fetch, origin, await post(fetch, origin, "/console/api/invites/accept", { token, password }));
}

export function signInRequest(fetch: TlsFetch, origin: string, email: string, password: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}): Promise<Response> {
  return post(fetch, origin, "/console/api/login", { email, password, ...extra }, headers);
}
