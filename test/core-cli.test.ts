import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, existsSync, readFileSync } from "node:fs";
import { X509Certificate } from "node:crypto";
import path from "node:path";
import { repoRoot, runCli, sourceCliPath, spawnServer, tempDir, trustingFetch, writeConfig } from "../harness/server.ts";
import { testConfig } from "../harness/config.ts";
import { createKey } from "../harness/keys.ts";
import { loadOrCreateTls } from "../src/http/tls.ts";

const literalExample = `server: { host: 127.0.0.1, port: 8443, tls: { cert: ./cert.pem, key: ./key.pem }, trustProxy: ["10.0.0.0/8"] }
deployment: shared            # this node's deployment id
dataDir: ./data
plans:
  free: { rateLimit: { requests: 60, window: 1m }, maxBodyBytes: 1048576, maxUploadBytes: 26214400,
          models: ["*"], endpoints: [models, chat, embeddings, transcriptions] }
models:
  - { id: stories, engine: llama, source: ../shared/models/stories260K.gguf, capabilities: [chat, embeddings],
      contextSize: 2048, parallel: 4, threads: 1, ownedBy: modelgate }
`;

test("issue 3.2 the literal example config loads and serves through the real CLI, and SIGTERM exits 0", async () => {
  // The example's paths are relative to its folder: ../shared/models must resolve, so the folder sits beside the repo.
  const dir = mkdtempSync(path.join(repoRoot, "..", "mg-literal-"));
  try {
    const certSource = tempDir();
    const tls = await loadOrCreateTls(null, certSource);
    writeConfig(dir, readFileSync(tls.certPath, "utf8"), "cert.pem");
    writeConfig(dir, readFileSync(path.join(certSource, "tls/key.pem"), "utf8"), "key.pem");
    const configFile = writeConfig(dir, literalExample);
    const config = testConfig((await import("yaml")).parse(literalExample), configFile);
    assert.equal(config.dataDir, path.join(dir, "data"));
    assert.equal(config.models[0].path, path.resolve(repoRoot, "../shared/models/stories260K.gguf"));
    assert.equal(config.plans.get("free")!.rateLimit.windowMs, 60_000);

    // bin/modelgate.js, the sources through tsx as `npx modelgate` runs them; the other spawned servers run dist/.
    const server = await spawnServer((await import("yaml")).parse(literalExample), dir, [], {}, sourceCliPath);
    try {
      assert.match(server.origin, /^https:\/\/127\.0\.0\.1:\d+$/);
      const { key } = await createKey(config, { plan: "free" });
      const { fetch } = trustingFetch(readFileSync(tls.certPath, "utf8"));
      const res = await fetch(`${server.origin}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
      assert.equal(res.status, 200);
      const body = (await res.json()) as { data: { id: string; owned_by: string }[] };
      assert.deepEqual(body.data.map((m) => [m.id, m.owned_by]), [["stories", "modelgate"]]);
    } finally {
      assert.equal(await server.stop("SIGTERM"), 0);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("issue 3.2 an unknown key is a startup error naming the key and its path", async () => {
  const dir = tempDir();
  const file = writeConfig(dir, "server:\n  host: 127.0.0.1\n  tsl: { cert: a, key: b }\n");
  const human = await runCli(["serve", "--config", file]);
  assert.equal(human.code, 1);
  assert.match(human.stderr, /unknown key "tsl" at server\.tsl/);
  const json = await runCli(["serve", "--config", file, "--json"]);
  assert.equal(json.code, 1);
  const parsed = JSON.parse(json.stdout.trim()) as { error: { code: string; message: string } };
  assert.equal(parsed.error.code, "invalid_config");
  assert.match(parsed.error.message, /server\.tsl/);
  const nested = await runCli(["serve", "--config", writeConfig(dir, "models:\n  - { id: a, engine: llama, source: x.gguf, capabilities: [chat], thread: 2 }\n", "m.yaml")]);
  assert.match(nested.stderr, /unknown key "thread" at models\[0\]\.thread/);
  const badValue = await runCli(["serve", "--config", writeConfig(dir, "plans:\n  p: { rateLimit: { requests: 10, window: soon } }\n", "p.yaml")]);
  assert.equal(badValue.code, 1);
  assert.match(badValue.stderr, /plans\.p\.rateLimit\.window/);
});

test("issue 3.2 an empty config is valid and every field has a default", () => {
  const config = testConfig({}, null);
  assert.equal(config.server.port, 8443);
  assert.equal(config.deployment, "shared");
  assert.equal(config.dataDir, path.resolve("data"));
  assert.ok(config.plans.get(config.defaultPlan));
  assert.ok(config.models.length > 0, "the default catalog is served");
  assert.equal(testConfig(null, null).server.host, "127.0.0.1");
});

test("issue 3.3 --data-dir wins over the config's dataDir, which wins over ./data", () => {
  const dir = tempDir();
  assert.equal(testConfig({ dataDir: "./d1" }, path.join(dir, "c.yaml")).dataDir, path.join(dir, "d1"));
  assert.equal(testConfig({ dataDir: "./d1" }, path.join(dir, "c.yaml"), { dataDir: "/tmp/flag" }).dataDir, "/tmp/flag");
});

test("issue 3.3 an unknown command fails non-zero with a JSON error under --json", async () => {
  const res = await runCli(["frobnicate", "--json"]);
  assert.equal(res.code, 1);
  assert.equal(JSON.parse(res.stdout).error.code, "unknown_command");
});

test("issue 3.4 a self-signed certificate is generated once with the right SANs, then reused", async () => {
  const dir = tempDir();
  const first = await loadOrCreateTls(null, dir);
  assert.equal(first.generated, true);
  assert.ok(existsSync(path.join(dir, "tls/cert.pem")) && existsSync(path.join(dir, "tls/key.pem")));
  const san = new X509Certificate(first.cert).subjectAltName ?? "";
  assert.match(san, /DNS:localhost/);
  assert.match(san, /IP Address:127\.0\.0\.1/);
  assert.match(san, /IP Address:0:0:0:0:0:0:0:1|IP Address:::1/);
  const second = await loadOrCreateTls(null, dir);
  assert.equal(second.generated, false);
  assert.equal(second.fingerprint, first.fingerprint);
});

test("issue 3.10 with no config the default catalog is served; offline it starts and names the missing models", async () => {
  const dir = tempDir();
  const server = await spawnServer({ dataDir: path.join(dir, "data") }, dir, [], { HF_ENDPOINT: "http://127.0.0.1:9" });
  try {
    const output = server.stdout.join("");
    assert.match(output, /missing .*run: modelgate pull hf:/);
    const { fetch } = trustingFetch(readFileSync(path.join(dir, "data/tls/cert.pem"), "utf8"));
    const health = await fetch(`${server.origin}/healthz`);
    assert.equal(health.status, 200);
    const ready = await fetch(`${server.origin}/readyz`);
    assert.equal(ready.status, 503, "missing eager models mean not ready");
  } finally {
    assert.equal(await server.stop(), 0);
  }
});
