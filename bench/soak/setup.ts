import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { modelsDir, type TestServer } from "../../harness/server.ts";
import { adminToken } from "./topology.ts";

/** What the soak and its probes set up on a started topology before any traffic: one place, so they stay alike. */
type Api = Pick<TestServer, "post" | "get">;
export interface SoakKey {
  key: string;
  id: string;
}

/** The admin token's header, and an admin API call that throws on any answer but 2xx and returns its JSON. */
export function adminClient(api: Api) {
  const admin = { authorization: `Bearer ${adminToken}` };
  const adminJson = async <T>(method: string, route: string, body?: unknown): Promise<T> => {
    const res = body === undefined ? await api.get(route, { headers: admin, method }) : await api.post(route, body, { headers: admin, method });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${text}`);
    return JSON.parse(text) as T;
  };
  return { admin, adminJson };
}

/** The soak's accounts (gold, silver, flood), a key per client and role, and a console operator signed up. */
export async function soakTenants(api: Api, origin: string) {
  const { adminJson } = adminClient(api);
  const account = (name: string, plan: string) => adminJson<{ id: string }>("POST", "/admin/v1/accounts", { name, plan });
  const key = (accountId: string) => adminJson<SoakKey>("POST", "/admin/v1/keys", { account: accountId });
  const gold = await account("soak-gold", "gold");
  const silver = await account("soak-silver", "silver");
  const flood = await account("soak-flood", "flood");
  const keys = {
    local: await key(gold.id),
    localAborts: await key(gold.id),
    upstream: await key(silver.id),
    upstreamAborts: await key(silver.id),
    embed: await key(silver.id),
    transcribe: await key(gold.id),
    flood: await key(flood.id),
    batch: await key(silver.id),
    warm: await key(gold.id),
  };
  const operator = { email: "soak-operator@example.com", password: "a quiet lighthouse keeps 42 boats" };
  const invite = await adminJson<{ token: string }>("POST", "/admin/v1/operators/invites", { email: operator.email, role: "operator-admin" });
  const accepted = await api.post("/console/api/invites/accept", { token: invite.token, password: operator.password }, { headers: { origin } });
  if (!accepted.ok) throw new Error(`invite accept: ${accepted.status} ${await accepted.text()}`);
  return { gold, silver, flood, keys, operator };
}

/** Every model loaded before the clock starts (a first request may wait for a load; whisper's first adds 14 MB once). */
export async function warmEveryModel(api: Api, key: string): Promise<void> {
  const warm = { key };
  for (let round = 0; round < 4; round++) {
    await Promise.all([
      api.post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: "Once" }], max_tokens: 4 }, warm),
      api.post("/v1/chat/completions", { model: "ls-pool", messages: [{ role: "user", content: "Once" }], max_tokens: 4 }, warm),
      api.post("/v1/chat/completions", { model: "canned-pool", messages: [{ role: "user", content: "Once" }], max_tokens: 4 }, warm),
      api.post("/v1/embeddings", { model: "embed", input: "warm" }, warm),
      api.post("/v1/rerank", { model: "rerank", query: "warm", documents: ["warm"] }, warm),
    ].map(async (p) => (await p).arrayBuffer()));
    const form = new FormData();
    form.append("model", "whisper");
    form.append("file", new Blob([readFileSync(path.join(modelsDir, "jfk.wav"))]), "jfk.wav");
    await (await api.post("/v1/audio/transcriptions", form, warm)).arrayBuffer();
  }
}

/** A client's key as its settings name it. */
export const keySettings = (x: SoakKey) => ({ key: x.key, keyId: x.id });

/**
 * Runs one of bench/soak/clients/ in its own process until `endAt`, its requests appended to
 * OUT_DIR/requests/NAME.jsonl (a client run again under the same name adds to its file); resolves when it exits.
 */
export function runClient(target: { origin: string; caFile: string; outDir: string }, name: string, script: string, endAt: number, extra: Record<string, unknown>): Promise<void> {
  const settings = { name, origin: target.origin, caFile: target.caFile, endAt, outFile: path.join(target.outDir, "requests", `${name}.jsonl`), ...extra };
  writeFileSync(settings.outFile, "", { flag: "a" });
  const child = spawn(process.execPath, [path.join(import.meta.dirname, "clients", script), JSON.stringify(settings)], { stdio: ["ignore", "inherit", "inherit"] });
  return new Promise((resolve) => child.once("exit", (code) => (code !== 0 && process.stderr.write(`client ${name} exited ${code}\n`), resolve())));
}
