import { test } from "node:test";
import assert from "node:assert/strict";
import { Type } from "@sinclair/typebox";
import { sharedSerializers } from "../src/http/shared-serializers.ts";

const route = (schema: unknown, url = "/a", httpStatus = "200") => ({ method: "GET", url, httpStatus, schema });

test("response serializers are compiled once per distinct schema text, across routes and scopes, and still keep to their schema", () => {
  const factory = sharedSerializers();
  const shared = { Error: Type.Object({ message: Type.String() }, { $id: "Error" }) };
  const envelope = () => Type.Object({ error: Type.Ref("Error") });
  const scopeA = factory(shared, undefined);
  const scopeB = factory({ ...shared }, undefined);
  const first = scopeA(route(envelope(), "/a", "400"));
  assert.equal(scopeA(route(envelope(), "/b", "404")), first, "the same schema text on another route and status");
  assert.equal(scopeB(route(envelope(), "/c", "401")), first, "another scope with the same shared schemas");
  const other = scopeA(route(Type.Object({ id: Type.String() })));
  assert.notEqual(other, first);
  assert.equal(other({ id: "x", secret: "never sent" }), '{"id":"x"}', "properties outside the schema are still left out");
  assert.equal(first({ error: { message: "m", extra: 1 } }), '{"error":{"message":"m"}}');
  const otherShared = factory({ Error: Type.Object({ code: Type.String() }, { $id: "Error" }) }, undefined);
  assert.notEqual(otherShared(route(envelope())), first, "other shared schemas: another serializer");
  assert.equal(otherShared(route(envelope()))({ error: { code: "c", message: "m" } }), '{"error":{"code":"c"}}');
});

test("each serializer is compiled with only the shared schemas it refers to, through others and to ids nested in them", () => {
  const shared = {
    Usage: Type.Object({ tokens: Type.Integer() }, { $id: "Usage" }),
    Reply: Type.Object({ usage: Type.Ref("Usage"), part: Type.Ref("Part") }, { $id: "Reply" }),
    // A shared schema holding another by its own $id, as TypeBox modules do.
    Parts: Type.Object({ one: Type.Object({ text: Type.String() }, { $id: "Part" }) }, { $id: "Parts" }),
    // Not valid JSON Schema: fast-json-stringify refuses every compile it is given to.
    Broken: { $id: "Broken", type: "not-a-type" },
  };
  const compile = sharedSerializers()(shared, undefined);
  const reply = compile(route(Type.Object({ reply: Type.Ref("Reply") }), "/reply"));
  assert.equal(reply({ reply: { usage: { tokens: 3, x: 1 }, part: { text: "t", y: 2 }, z: 3 } }), '{"reply":{"usage":{"tokens":3},"part":{"text":"t"}}}');
  assert.throws(() => compile(route(Type.Object({ b: Type.Ref("Broken") }), "/broken")), /schema is invalid/, "a route that refers to it still gets its error");
});
