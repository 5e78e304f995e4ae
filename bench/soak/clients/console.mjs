// Every minute, an operator signs in to the console, creates a key for an account, uses it once, revokes it, and
// checks that the revoked key is refused within 2 s (on whichever replica the balancer picks).
import { envelopeOk, jsonCall, record, request, running, settings, sleep } from "./soak-client.mjs";

const { email, password, account, everyMs } = settings;
const cookieName = "__Host-modelgate_console";

async function timed(route, call) {
  const t = Date.now();
  try {
    const res = await call();
    const text = await res.text();
    let body = null;
    try {
      body = JSON.parse(text);
    } catch {}
    record({ t, ms: Date.now() - t, route, status: res.status, ...(res.ok ? {} : { envelope: envelopeOk(body, res.status), code: body?.error?.code }) });
    return { res, body };
  } catch (err) {
    record({ t, ms: Date.now() - t, route, status: "network", detail: String(err.cause?.code ?? err.message).slice(0, 80) });
    return null;
  }
}

async function round() {
  const login = await timed("console login", () => request("/console/api/login", { body: { email, password }, headers: { origin: settings.origin } }));
  if (login?.res.status !== 200) return;
  const cookie = login.res.headers.getSetCookie().map((c) => c.split(";")[0]).find((c) => c.startsWith(`${cookieName}=`));
  const session = { cookie, "x-csrf-token": login.body.csrfToken, origin: settings.origin };
  const created = await timed("console key create", () => request("/admin/v1/keys", { body: { account, name: `soak-${Date.now()}` }, headers: session }));
  if (created?.res.status !== 201) return;
  const { key, id } = created.body;
  await jsonCall("embeddings (console key)", "/v1/embeddings", { key, keyId: id, body: { model: "embed", input: "A cat and a dog play in the park" }, bound: 64 });
  const revoked = await timed("console key revoke", () => request(`/admin/v1/keys/${id}/revoke`, { body: {}, headers: session }));
  if (revoked?.res.status !== 200 && revoked?.res.status !== 202) return;
  await sleep(2000);
  const after = await jsonCall("embeddings (revoked key)", "/v1/embeddings", { key, keyId: id, body: { model: "embed", input: "The cat sat on the mat" }, bound: 64 });
  if (after) record({ t: Date.now(), ms: 0, route: "revoked key still served", status: 200, keyId: id, violation: true });
}

while (running()) {
  const started = Date.now();
  await round();
  await sleep(Math.max(0, everyMs - (Date.now() - started)));
}
