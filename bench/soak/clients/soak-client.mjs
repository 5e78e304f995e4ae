// What every soak traffic client shares: its settings (one JSON argument), a TLS client that trusts the replicas'
// certificate, one JSON line per request in its own file, and the §7 envelope check. A client runs until `endAt`.
import { appendFileSync, readFileSync } from "node:fs";
import { Agent } from "undici";

export const settings = JSON.parse(process.argv[2]);
const connect = { ca: readFileSync(settings.caFile, "utf8") };
const agent = new Agent({ connect, keepAliveTimeout: 4000 });
// No keep-alive (undici's `pipelining: 0`): each request on a connection of its own, which the balancer gives to the
// next replica in turn (decision 0052).
const oneRequestEach = new Agent({ connect, pipelining: 0 });
const statuses = { 400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "invalid_request_error", 413: "invalid_request_error", 429: "rate_limit_error", 500: "server_error", 503: "server_error" };

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const running = () => Date.now() < settings.endAt;
export const pick = (xs) => xs[Math.floor(Math.random() * xs.length)];

/** Whether an error body (or a stream's error event) has the §7 shape, with the type its status calls for. */
export function envelopeOk(body, status) {
  const e = body?.error;
  if (!e || typeof e.message !== "string" || typeof e.type !== "string" || typeof e.code !== "string" || !("param" in e)) return false;
  return status === undefined || statuses[status] === undefined || statuses[status] === e.type;
}

/** Appends one request's outcome: t (start, epoch ms), ms, status (or "network"), and what the check needs. */
export function record(entry) {
  appendFileSync(settings.outFile, JSON.stringify({ client: settings.name, ...entry }) + "\n");
}

export function request(path, { key, body, form, method = "POST", headers = {}, signal, connectionEach = false } = {}) {
  return fetch(`${settings.origin}${path}`, {
    method,
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...(body !== undefined ? { "content-type": "application/json" } : {}), ...headers },
    body: form ?? (body === undefined ? undefined : JSON.stringify(body)),
    signal,
    dispatcher: connectionEach ? oneRequestEach : agent,
  });
}

/**
 * One JSON request, recorded. `usageOf` a 200 is what the client was billed for, by its own count (null: a
 * count it cannot know, as a transcription's completion tokens, which no answer carries); `bound` is at
 * most what a request the client does not know the outcome of (a network error) may have been charged.
 */
export async function jsonCall(route, path, { key, keyId, body, form, bound = 0, usageOf = (parsed) => parsed.usage, limitHeader = false, connectionEach = false }) {
  const t = Date.now();
  try {
    const res = await request(path, { key, body, form, connectionEach });
    const text = await res.text();
    const entry = { t, ms: Date.now() - t, route, keyId, status: res.status, ...(limitHeader ? { limit: Number(res.headers.get("x-ratelimit-limit-requests")) } : {}) };
    if (res.status === 200) {
      const parsed = JSON.parse(text);
      const usage = usageOf(parsed) ?? {};
      record({ ...entry, prompt: usage.prompt_tokens ?? 0, completion: usage.completion_tokens === null ? null : (usage.completion_tokens ?? 0) });
      return parsed;
    }
    let parsed = null;
    try {
      parsed = JSON.parse(text);
    } catch {}
    record({ ...entry, envelope: envelopeOk(parsed, res.status), code: parsed?.error?.code });
    return null;
  } catch (err) {
    record({ t, ms: Date.now() - t, route, keyId, status: "network", bound, detail: String(err.cause?.code ?? err.message).slice(0, 80) });
    return null;
  }
}

/**
 * One streamed chat, recorded; `abortAfter` chunks of content, the client leaves. A stream that ends with an error
 * event, without [DONE] or is aborted is `broken` (charged what was generated: at most `bound`).
 */
export async function streamCall(route, { key, keyId, body, abortAfter = null, bound }) {
  const t = Date.now();
  const controller = new AbortController();
  let chunks = 0;
  try {
    const res = await request("/v1/chat/completions", { key, body: { ...body, stream: true, stream_options: { include_usage: true } }, signal: controller.signal });
    if (res.status !== 200) {
      const text = await res.text();
      let parsed = null;
      try {
        parsed = JSON.parse(text);
      } catch {}
      record({ t, ms: Date.now() - t, route, keyId, status: res.status, envelope: envelopeOk(parsed, res.status), code: parsed?.error?.code });
      return;
    }
    let buffer = "";
    let usage = null;
    let done = false;
    let errorEvent = null;
    const decoder = new TextDecoder();
    for await (const piece of res.body) {
      buffer += decoder.decode(piece, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = event.split("\n").find((l) => l.startsWith("data: "))?.slice(6);
        if (!data) continue;
        if (data === "[DONE]") {
          done = true;
          continue;
        }
        const parsed = JSON.parse(data);
        if (parsed.error) errorEvent = parsed;
        if (parsed.usage) usage = parsed.usage;
        if (parsed.choices?.[0]?.delta?.content) chunks++;
      }
      if (abortAfter !== null && chunks >= abortAfter) {
        controller.abort();
        record({ t, ms: Date.now() - t, route, keyId, status: 200, broken: "aborted", chunks, bound });
        return;
      }
    }
    if (done && usage && !errorEvent) record({ t, ms: Date.now() - t, route, keyId, status: 200, prompt: usage.prompt_tokens, completion: usage.completion_tokens, streamed: true });
    else record({ t, ms: Date.now() - t, route, keyId, status: 200, broken: errorEvent ? "error-event" : "cut", envelope: errorEvent ? envelopeOk(errorEvent) : undefined, code: errorEvent?.error?.code, chunks, bound });
  } catch (err) {
    if (controller.signal.aborted) return;
    record({ t, ms: Date.now() - t, route, keyId, status: chunks > 0 ? 200 : "network", broken: "network", chunks, bound, detail: String(err.cause?.code ?? err.message).slice(0, 80) });
  }
}
