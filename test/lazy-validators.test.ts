import { test } from "node:test";
import assert from "node:assert/strict";
import { Type } from "@sinclair/typebox";
import { lazyValidators } from "../src/http/lazy-validators.ts";

const options = { customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: true, allErrors: false } };
const route = (schema: unknown, url = "/a") => ({ method: "POST", url, httpPart: "body", schema });

test("a request validator is compiled at its route's first request, not when the route is built, and validates with ajv's errors", () => {
  const compile = lazyValidators()({ Part: Type.Object({ text: Type.String() }, { $id: "Part" }) }, options);
  // ajv refuses this schema when it compiles it: building the route's validator must not compile yet.
  const broken = compile(route({ type: "not-a-type" }, "/broken"));
  assert.throws(() => broken({}), /schema is invalid/, "its compile happens at the first request");
  const validate = compile(route(Type.Object({ part: Type.Ref("Part"), n: Type.Integer({ default: 1 }) })));
  const body: Record<string, unknown> = { part: { text: "t" } };
  assert.equal(validate(body), true);
  assert.equal(body.n, 1, "ajv's useDefaults still fills defaults");
  assert.equal(validate({ part: { text: 3 } }), false);
  assert.match(JSON.stringify(validate.errors), /must be string/, "a failure's errors are on the function Fastify was given");
  assert.equal(validate({ part: { text: "ok" } }), true);
  assert.equal(validate.errors, null, "and cleared by a success");
});

test("every route's request schemas compile with the server's shared schemas and ajv options (compiled lazily, so checked here)", async () => {
  const { startServer } = await import("../harness/server.ts");
  const srv = await startServer();
  try {
    const app = srv.server.app;
    const compile = lazyValidators()(app.getSchemas(), options);
    const compiled: string[] = [];
    for (const { method, url, schema } of app.routeTable.routes) {
      for (const httpPart of ["body", "querystring", "params", "headers"]) {
        const part = schema?.[httpPart];
        if (part === undefined) continue;
        const validate = compile({ method, url, httpPart, schema: part });
        assert.doesNotThrow(() => validate({}), `${method} ${url} ${httpPart}`);
        compiled.push(`${method} ${url} ${httpPart}`);
      }
    }
    // The route table has every route, admin and console ones included.
    for (const expected of ["POST /v1/chat/completions body", "POST /v1/messages body", "GET /v1/models/* params", "POST /admin/v1/keys body"]) assert.ok(compiled.includes(expected), expected);
  } finally {
    await srv.close();
  }
});
