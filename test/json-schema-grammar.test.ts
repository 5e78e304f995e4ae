import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { Ajv } from "ajv";
import { LlamaCompletion } from "node-llama-cpp";
import { toGbnfJsonSchema } from "../src/engines/llama/json-schema-grammar.ts";
import { getLlamaRuntime } from "../src/engines/llama/llama-runtime.ts";
import { AppError } from "../src/errors/app-error.ts";

const base = "tools[0].function.parameters";

function rejects(schema: unknown, param: string): void {
  assert.throws(
    () => toGbnfJsonSchema(schema, base),
    (err: unknown) => {
      assert.ok(err instanceof AppError, String(err));
      assert.equal(err.code, "invalid_parameter");
      assert.equal(err.param, param);
      assert.ok(err.message.includes(param));
      return true;
    },
  );
}

const weather = {
  type: "object",
  properties: {
    city: { type: "string", description: "City name", minLength: 1, maxLength: 12 },
    unit: { type: "string", enum: ["celsius", "fahrenheit"] },
    days: { type: "integer" },
    tags: { type: "array", items: { type: "string", maxLength: 6 }, maxItems: 3 },
    exact: { type: "boolean" },
  },
  required: ["city"],
  additionalProperties: false,
};

test("§4.2 rule 1 a plain OpenAI tool schema converts keyword for keyword", () => {
  assert.deepEqual(toGbnfJsonSchema(weather, base), {
    type: "object",
    properties: {
      city: { type: "string", minLength: 1, maxLength: 12, description: "City name" },
      unit: { enum: ["celsius", "fahrenheit"] },
      days: { type: "integer" },
      tags: { type: "array", items: { type: "string", maxLength: 6 }, maxItems: 3 },
      exact: { type: "boolean" },
    },
  });
});

test("§4.2 rule 1 anyOf becomes oneOf (the grammar would turn anyOf into null)", () => {
  // pydantic v2's Optional[str]
  assert.deepEqual(
    toGbnfJsonSchema({ type: "object", properties: { note: { anyOf: [{ type: "string" }, { type: "null" }], default: null, title: "Note" } } }, base),
    { type: "object", properties: { note: { oneOf: [{ type: "string" }, { type: "null" }] } } },
  );
  assert.deepEqual(toGbnfJsonSchema({ type: ["string", "null"] }, base), { type: ["string", "null"] });
  assert.deepEqual(toGbnfJsonSchema({ type: "string", nullable: true }, base), { oneOf: [{ type: "string" }, { type: "null" }] });
  assert.deepEqual(toGbnfJsonSchema({ type: ["object", "null"], properties: { a: { type: "number" } } }, base), {
    oneOf: [{ type: "null" }, { type: "object", properties: { a: { type: "number" } } }],
  });
});

test("§4.2 rule 1 $ref under definitions or $defs is hoisted to the root $defs, recursion included", async () => {
  const tree = {
    type: "object",
    properties: { root: { $ref: "#/definitions/Node" } },
    definitions: {
      Node: { type: "object", properties: { name: { type: "string" }, children: { type: "array", items: { $ref: "#/definitions/Node" }, maxItems: 2 } } },
      Unused: { type: "string", pattern: "^x$" },
    },
  };
  const converted = toGbnfJsonSchema(tree, base);
  assert.deepEqual(converted, {
    type: "object",
    properties: { root: { $ref: "#/$defs/Node" } },
    $defs: {
      Node: {
        type: "object",
        properties: { name: { type: "string" }, children: { type: "array", items: { $ref: "#/$defs/Node" }, maxItems: 2 } },
      },
    },
  });
  const llama = await getLlamaRuntime();
  const grammar = await llama.createGrammarForJsonSchema(converted as never);
  assert.deepEqual(grammar.parse('{"root": {"name": "a", "children": []}}'), { root: { name: "a", children: [] } });
});

test("§4.2 rule 1 allOf: one part is inlined, disjoint object parts are merged", () => {
  assert.deepEqual(
    toGbnfJsonSchema({ type: "object", properties: { p: { allOf: [{ $ref: "#/$defs/Color" }], description: "pick" } }, $defs: { Color: { enum: ["red", "blue"] } } }, base),
    { type: "object", properties: { p: { $ref: "#/$defs/Color", description: "pick" } }, $defs: { Color: { enum: ["red", "blue"] } } },
  );
  assert.deepEqual(
    toGbnfJsonSchema({ allOf: [{ $ref: "#/$defs/A" }, { type: "object", properties: { b: { type: "integer" } }, required: ["b"] }], $defs: { A: { type: "object", properties: { a: { type: "string" } } } } }, base),
    { type: "object", properties: { a: { type: "string" }, b: { type: "integer" } } },
  );
});

test("§4.2 rule 1 unenforceable keywords get 400 invalid_parameter naming their path", () => {
  rejects({ type: "object", properties: { code: { type: "string", pattern: "^[A-Z]{3}$" } } }, `${base}.properties.code.pattern`);
  rejects({ type: "object", properties: { age: { type: "integer", minimum: 0 } } }, `${base}.properties.age.minimum`);
  rejects({ type: "object", properties: { list: { type: "array", items: { type: "number", maximum: 3 } } } }, `${base}.properties.list.items.maximum`);
  rejects({ type: "object", properties: { x: { anyOf: [{ type: "string" }, { type: "number", multipleOf: 2 }] } } }, `${base}.properties.x.anyOf[1].multipleOf`);
  rejects({ type: "object", properties: { x: { not: { type: "string" } } } }, `${base}.properties.x.not`);
  rejects({ type: "array", uniqueItems: true }, `${base}.uniqueItems`);
  rejects({ type: "object", properties: { "odd key": { type: "string", pattern: "a" } } }, `${base}.properties["odd key"].pattern`);
});

test("integer bounds no tighter than the grammar's 15 digits (zod int(): ±(2^53 − 1)) are accepted; tighter ones are not", () => {
  const safe = Number.MAX_SAFE_INTEGER;
  assert.deepEqual(toGbnfJsonSchema({ type: "integer", minimum: -safe, maximum: safe }, base), { type: "integer" });
  rejects({ type: "integer", minimum: -safe, maximum: 999_999_999_999_998 }, `${base}.maximum`);
  rejects({ type: "number", minimum: -safe }, `${base}.minimum`);
});

test("§4.2 rule 1 schemas whose structure cannot be honoured are rejected, not weakened", () => {
  rejects({ type: "object", properties: { a: { type: "string" } }, required: ["a", "b"] }, `${base}.required[1]`);
  rejects({ type: "object", properties: { a: { $ref: "#/properties/b" } } }, `${base}.properties.a.$ref`);
  rejects({ type: "object", properties: { a: { $ref: "https://example.com/s.json" } } }, `${base}.properties.a.$ref`);
  rejects({ type: "object", properties: { a: { $ref: "#/$defs/Missing" } } }, `${base}.properties.a.$ref`);
  rejects({ type: "object", properties: { a: false } }, `${base}.properties.a`);
  rejects({ allOf: [{ type: "object", properties: { a: { type: "string" } } }, { type: "object", properties: { a: { type: "number" } } }] }, `${base}.allOf[1].properties.a`);
  rejects({ allOf: [{ type: "object", properties: { a: { type: "string" } }, additionalProperties: false }, { properties: { b: { type: "string" } } }] }, `${base}.allOf[0].additionalProperties`);
  rejects({ allOf: [{ type: "string" }, { minLength: 2 }] }, `${base}.allOf[0].type`);
  rejects({ type: "object", properties: { a: { type: "string" }, b: { type: "string" } }, maxProperties: 1 }, `${base}.maxProperties`);
  rejects({ type: "object", properties: { t: { type: "array", prefixItems: [{ type: "string" }, { type: "string" }], maxItems: 1 } } }, `${base}.properties.t.maxItems`);
  rejects({ type: "object", properties: { o: { type: "object", properties: { v: { const: { a: 1 } } } } } }, `${base}.properties.o.properties.v.const`);
  rejects({ $defs: { D: { type: "string", pattern: "x" } }, type: "object", properties: { d: { $ref: "#/$defs/D" } } }, `${base}.$defs.D.pattern`);
  rejects({ type: "object", properties: { a: { type: "string" } }, anyOf: [{ required: ["a"] }] }, `${base}.type`);
});

test("annotations, unknown keywords and non-asserted formats are dropped; date formats are kept", () => {
  assert.deepEqual(
    toGbnfJsonSchema({ $schema: "https://json-schema.org/draft/2020-12/schema", title: "T", type: "object", "x-vendor": 1, properties: { when: { type: "string", format: "date" }, mail: { type: "string", format: "email" } } }, base),
    { type: "object", properties: { when: { type: "string", format: "date" }, mail: { type: "string" } } },
  );
  // no type: only the implied type is generated (a subset of what the schema allows)
  assert.deepEqual(toGbnfJsonSchema({ properties: { a: { enum: ["x", "yy"], maxLength: 1 } } }, base), { type: "object", properties: { a: { enum: ["x"] } } });
  assert.deepEqual(toGbnfJsonSchema({ type: "object" }, base), { type: "object" });
  assert.deepEqual(toGbnfJsonSchema({ type: "object", properties: {}, additionalProperties: { type: "number" } }, base), {
    type: "object",
    additionalProperties: { type: "number" },
  });
});

test("grammar-constrained output of the converted schema validates against the original schema", async () => {
  const original = {
    type: "object",
    properties: {
      unit: { type: "string", enum: ["celsius", "fahrenheit"] },
      note: { anyOf: [{ type: "string", maxLength: 5 }, { type: "null" }] },
      count: { type: "integer" },
      flags: { type: "array", items: { type: "boolean" }, minItems: 1, maxItems: 2 },
      color: { $ref: "#/definitions/Color" },
    },
    required: ["unit", "count"],
    definitions: { Color: { type: "string", enum: ["red", "green"] } },
  };
  const validate = new Ajv({ strict: false }).compile(original);
  const llama = await getLlamaRuntime();
  const model = await llama.loadModel({ modelPath: path.resolve(import.meta.dirname, "../../shared/models/stories260K.gguf") });
  const context = await model.createContext({ contextSize: 512, threads: 1 });
  try {
    const grammar = await llama.createGrammarForJsonSchema(toGbnfJsonSchema(original, base) as never);
    let completed = 0;
    for (let seed = 1; seed <= 4; seed++) {
      const sequence = context.getSequence();
      const completion = new LlamaCompletion({ contextSequence: sequence });
      const { response, metadata } = await completion.generateCompletionWithMeta("Once upon a time", { grammar, temperature: 1.2, seed, maxTokens: 300 });
      sequence.dispose();
      if (metadata.stopReason === "maxTokens") continue;
      completed++;
      const value = JSON.parse(response);
      assert.ok(validate(value), `${response}: ${JSON.stringify(validate.errors)}`);
    }
    assert.ok(completed >= 2, `only ${completed} of 4 generations completed`);
  } finally {
    await context.dispose();
    await model.dispose();
  }
});

test("issue 44 a loose (non-strict) tool schema: an allOf that cannot be merged and a bound past the grammar's are left out, the rest enforced; strict still refuses them", () => {
  // The shape Claude Code 2.1.332's full request sends in one of its tools (a string property with an allOf).
  const schema = { type: "object", properties: { to: { type: "string", allOf: [{ type: "string" }, { maxLength: 64 }] } }, required: ["to"] };
  rejects(schema, `${base}.properties.to.type`);
  assert.deepEqual(toGbnfJsonSchema(schema, base, { loose: true }), toGbnfJsonSchema({ type: "object", properties: { to: { type: "string" } }, required: ["to"] }, base));
  // A bound past what the grammar spells out (Claude Code's script: maxLength 524288) is left out the same way.
  const long = { type: "object", properties: { script: { type: "string", maxLength: 524288 } } };
  rejects(long, `${base}.properties.script.maxLength`);
  assert.deepEqual(toGbnfJsonSchema(long, base, { loose: true }), toGbnfJsonSchema({ type: "object", properties: { script: { type: "string" } } }, base));
});
