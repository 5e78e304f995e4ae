import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { ConfigError, loadConfig } from "../src/config/load-config.ts";
import { builtInEngines } from "../src/engines/registry.ts";
import type { UpstreamOptions } from "../src/engines/upstream/upstream.support.ts";
import { runCli, tempDir, writeConfig } from "../harness/server.ts";

const entry = (upstreams: string, extra = "") => `models:
  - id: llama-70b
    engine: upstream
    capabilities: [chat, tools]
    contextSize: 32768
    upstreams:
${upstreams}
${extra}`;

test("${ENV} in config values: set variables are filled in, an unset one stops the start naming it and where", () => {
  const dir = tempDir("upstream-config-");
  const file = writeConfig(dir, entry(`      - { url: "https://gpu-a:8000/v1", apiKey: "\${MG_TEST_VLLM_KEY}", model: "meta-llama/Llama-3.3-70B-Instruct" }`));
  process.env.MG_TEST_VLLM_KEY = "sk-from-env";
  try {
    const options = loadConfig(file, builtInEngines()).models[0].options as UpstreamOptions;
    assert.equal(options.upstreams[0].apiKey, "sk-from-env");
  } finally {
    delete process.env.MG_TEST_VLLM_KEY;
  }
  assert.throws(
    () => loadConfig(file, builtInEngines()),
    (err: unknown) => err instanceof ConfigError && /environment variable MG_TEST_VLLM_KEY is not set \(used at models\[0\]\.upstreams\[0\]\.apiKey\)/.test(err.message),
  );
  const literal = writeConfig(dir, entry(`      - { url: "https://gpu-a:8000/v1", apiKey: "$\${NOT_A_VAR}", model: m }`), "literal.yaml");
  assert.equal((loadConfig(literal, builtInEngines()).models[0].options as UpstreamOptions).upstreams[0].apiKey, "${NOT_A_VAR}");
});

test("upstream entries: no source needed, ca relative to the config file, parallel defaults to the upstreams' maxInFlight", () => {
  const dir = tempDir("upstream-config-");
  const file = writeConfig(
    dir,
    entry(`      - { url: "https://gpu-a:8000/v1", model: m, ca: ./certs/gpu-ca.pem, maxInFlight: 8 }
      - { url: "https://gpu-b:8000/v1", model: m, maxInFlight: 24 }`),
  );
  const model = loadConfig(file, builtInEngines()).models[0];
  assert.equal(model.source, null);
  assert.equal(model.path, null);
  assert.equal(model.parallel, 32);
  assert.equal((model.options as UpstreamOptions).upstreams[0].ca, path.join(dir, "certs/gpu-ca.pem"));
});

test("upstream entries: the old single-upstream fields and unknown keys are errors naming their path", () => {
  const dir = tempDir("upstream-config-");
  const old = writeConfig(dir, `models:\n  - { id: x, engine: upstream, capabilities: [chat], upstreams: [{ url: "https://a/v1", model: m }], url: "https://a/v1" }\n`);
  assert.throws(() => loadConfig(old, builtInEngines()), /unknown key "url" at models\[0\]\.url/);
  const insecure = writeConfig(dir, entry(`      - { url: "https://a/v1", model: m, insecure: true }`), "insecure.yaml");
  assert.throws(() => loadConfig(insecure, builtInEngines()), /unknown key "insecure" at models\[0\]\.upstreams\[0\]\.insecure/);
  const none = writeConfig(dir, `models:\n  - { id: x, engine: upstream, capabilities: [chat], upstreams: [] }\n`, "none.yaml");
  assert.throws(() => loadConfig(none, builtInEngines()), /models\[0\]\.upstreams/);
});

test("modelgate models list shows upstream models, with no files to pull", async () => {
  const dir = tempDir("upstream-config-");
  const file = writeConfig(dir, entry(`      - { url: "https://gpu-a:8000/v1", model: m }`, "dataDir: ./data\n"));
  const out = await runCli(["models", "list", "--config", file, "--json"]);
  assert.equal(out.code, 0, out.stderr);
  const listed = JSON.parse(out.stdout).models as { id: string; engine: string; state: string; pullCommand: string | null }[];
  assert.deepEqual(
    listed.map((m) => [m.id, m.engine, m.state, m.pullCommand]),
    [["llama-70b", "upstream", "remote", null]],
  );
});
