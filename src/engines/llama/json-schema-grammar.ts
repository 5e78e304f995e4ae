import type { GbnfJsonSchema } from "node-llama-cpp";
import { AppError } from "../../errors/app-error.ts";
import { GRAMMAR_MAX_INTEGER } from "./grammar-fixes.ts";

/**
 * Converts an OpenAI-style JSON schema (a tool's `parameters`, a `json_schema` response format) into the subset
 * node-llama-cpp's grammar generator really enforces, so that every output the grammar allows validates against
 * the original schema. What the grammar cannot enforce is rejected with 400 invalid_parameter whose `param` is the
 * path of the offending keyword (`tools[0].function.parameters.properties.age.minimum`), never dropped silently.
 *
 * What the library's generator does, and how it is handled here:
 * - every listed property is always generated (`required` is ignored): sound, since an object with all its
 *   properties satisfies any `required` subset; a `required` name with no property schema is rejected;
 * - `anyOf` would become null: it is rewritten as `oneOf` (the grammar emits one alternative, which satisfies anyOf);
 * - `allOf` is ignored: one-element allOf is inlined, several object schemas with disjoint properties are merged,
 *   anything else is rejected;
 * - `$ref` resolves only `#/$defs/...`: root `$defs` and `definitions` are hoisted to the root `$defs` under the
 *   same name (`definitions` entries that clash get a `definitions.` prefix); any other pointer is rejected;
 * - `pattern`, `minimum`/`maximum`/`exclusive*` (except integer bounds the grammar holds anyway), `multipleOf`, `uniqueItems`, `not`, conditionals, `contains`,
 *   `patternProperties`, `propertyNames`, `dependent*` are rejected;
 * - `format` is enforced for `date-time`, `time` and `date`; other formats are annotations in JSON Schema
 *   (validators do not assert them by default) and are dropped;
 * - `{}` / `true` (any value) become an explicit any-JSON alternative; `false` is rejected;
 * - OpenAPI's `nullable: true` adds a null alternative.
 */
export function toGbnfJsonSchema(schema: unknown, basePath: string, options: { loose?: boolean } = {}): GbnfJsonSchema {
  const converter = new SchemaConverter(schema, options.loose === true);
  const root = converter.convert(schema, basePath);
  const defs = converter.finishDefs(basePath);
  if (Object.keys(defs).length === 0) return root;
  converter.assertTerminates(root, defs, basePath);
  // The library reads $defs from ref, oneOf, object and array schemas; a root that can hold a ref is one of those.
  return { ...(root as object), $defs: defs } as GbnfJsonSchema;
}

type Json = Record<string, unknown>;

/**
 * Bounds on what a schema may ask of the grammar, so one request cannot make grammar generation (or generation
 * itself) blow up: nesting depth, schema nodes, and length/count keywords (the grammar spells repetitions out).
 */
export const schemaLimits = { maxDepth: 32, maxNodes: 2000, maxRepetition: 1000 } as const;
const REPETITION_KEYWORDS = ["minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"];

/** Keywords the grammar cannot enforce; value predicates say when a value is a no-op and may pass. */
const UNSUPPORTED: Record<string, (value: unknown) => boolean> = {
  pattern: () => false,
  minimum: () => false,
  maximum: () => false,
  exclusiveMinimum: (v) => v === false,
  exclusiveMaximum: (v) => v === false,
  multipleOf: () => false,
  uniqueItems: (v) => v === false,
  not: () => false,
  if: () => false,
  then: () => false,
  else: () => false,
  contains: () => false,
  minContains: () => false,
  maxContains: () => false,
  patternProperties: (v) => isObject(v) && Object.keys(v).length === 0,
  propertyNames: () => false,
  dependencies: (v) => isObject(v) && Object.keys(v).length === 0,
  dependentRequired: (v) => isObject(v) && Object.keys(v).length === 0,
  dependentSchemas: (v) => isObject(v) && Object.keys(v).length === 0,
  unevaluatedItems: (v) => v === true,
  $dynamicRef: () => false,
  $recursiveRef: () => false,
};

const FORMATS = new Set(["date-time", "time", "date"]);
const BASIC_TYPES = new Set(["string", "number", "integer", "boolean", "null"]);
const ALL_TYPES = new Set([...BASIC_TYPES, "object", "array"]);

const OBJECT_KEYWORDS = ["properties", "additionalProperties", "required", "minProperties", "maxProperties", "unevaluatedProperties"];
const ARRAY_KEYWORDS = ["items", "prefixItems", "additionalItems", "minItems", "maxItems"];
const STRING_KEYWORDS = ["minLength", "maxLength", "format"];
/** Keywords that constrain values and that this converter reads; any other unknown keyword is an annotation. */
const VALIDATION_KEYWORDS = new Set([
  "type",
  "enum",
  "const",
  "anyOf",
  "oneOf",
  "allOf",
  "$ref",
  "nullable",
  ...OBJECT_KEYWORDS,
  ...ARRAY_KEYWORDS,
  ...STRING_KEYWORDS,
]);

const ANY_JSON: GbnfJsonSchema = {
  oneOf: [
    { type: ["string", "number", "boolean", "null"] },
    { type: "object", additionalProperties: true },
    { type: "array" },
  ],
};

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isPrimitive(value: unknown): value is string | number | boolean | null {
  return value === null || ["string", "number", "boolean"].includes(typeof value);
}

function child(path: string, key: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$-]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

function reject(path: string, message: string): never {
  throw new AppError("invalid_parameter", { param: path, message: `${message} (at ${path})` });
}

/** Whether a const/enum value also satisfies the schema's type and string-length keywords. */
function primitiveAllowed(value: unknown, types: string[] | null, rest: Json): boolean {
  if (types && !types.some((t) => matchesType(value, t))) return false;
  if (typeof value === "string") {
    const length = [...value].length;
    if (typeof rest.minLength === "number" && length < rest.minLength) return false;
    if (typeof rest.maxLength === "number" && length > rest.maxLength) return false;
  }
  return true;
}

/**
 * `minimum`/`maximum` on an integer-only schema hold when they are no tighter than what the grammar can generate
 * (grammar-fixes.ts: at most 15 digits); zod's `int()` puts ±(2^53 − 1) there.
 */
function integerBoundHeld(schema: Json, keyword: string): boolean {
  if (schema.type !== "integer") return false;
  const value = schema[keyword];
  if (typeof value !== "number") return false;
  if (keyword === "minimum" || keyword === "exclusiveMinimum") return value < -GRAMMAR_MAX_INTEGER;
  if (keyword === "maximum" || keyword === "exclusiveMaximum") return value > GRAMMAR_MAX_INTEGER;
  return false;
}

function matchesType(value: unknown, type: string): boolean {
  switch (type) {
    case "null":
      return value === null;
    case "integer":
      return typeof value === "number" && Number.isInteger(value);
    case "number":
      return typeof value === "number";
    case "string":
      return typeof value === "string";
    case "boolean":
      return typeof value === "boolean";
    default:
      return false;
  }
}

class SchemaConverter {
  /** Root definitions by their `#/$defs/<name>` name, with the keyword and name they were found under. */
  private readonly sources = new Map<string, { schema: unknown; keyword: string; name: string }>();
  private readonly pointerToName = new Map<string, string>();
  private readonly converted = new Map<string, GbnfJsonSchema>();
  private readonly pending: string[] = [];
  private depth = 0;
  private nodes = 0;

  /** `loose`: keywords the grammar cannot enforce are left out of it instead of refused (the schema is a hint). */
  constructor(
    root: unknown,
    private readonly loose = false,
  ) {
    if (!isObject(root)) return;
    for (const keyword of ["$defs", "definitions"]) {
      const defs = root[keyword];
      if (!isObject(defs)) continue;
      for (const [name, def] of Object.entries(defs)) {
        const target = this.sources.has(name) ? `definitions.${name}` : name;
        this.sources.set(target, { schema: def, keyword, name });
        this.pointerToName.set(`#/${keyword}/${escapePointer(name)}`, target);
      }
    }
  }

  /** Converts the definitions the schema referenced (and those they reference in turn). */
  finishDefs(basePath: string): Record<string, GbnfJsonSchema> {
    while (this.pending.length > 0) {
      const name = this.pending.shift()!;
      const { schema, keyword, name: original } = this.sources.get(name)!;
      this.converted.set(name, this.convert(schema, child(child(basePath, keyword), original)));
    }
    return Object.fromEntries(this.converted);
  }

  /**
   * Every property of an object is always generated, so a `$ref` cycle with no way out (no array that may be
   * empty, no alternative that avoids it) describes no finite value: the grammar could never end. Such cycles are
   * refused, naming the definition.
   */
  assertTerminates(root: GbnfJsonSchema, defs: Record<string, GbnfJsonSchema>, basePath: string): void {
    const ends = new Map<string, boolean>(Object.keys(defs).map((name) => [name, false]));
    const terminates = (schema: unknown): boolean => {
      if (!isObject(schema)) return true;
      if (typeof schema.$ref === "string") return ends.get(schema.$ref.slice("#/$defs/".length)) ?? true;
      if (Array.isArray(schema.oneOf)) return schema.oneOf.some(terminates);
      if (isObject(schema.properties) && !Object.values(schema.properties).every(terminates)) return false;
      if (Array.isArray(schema.prefixItems) && !schema.prefixItems.every(terminates)) return false;
      if (schema.items !== undefined && typeof schema.minItems === "number" && schema.minItems > 0) return terminates(schema.items);
      return true;
    };
    // Least fixed point: a definition ends once it can be shown to end from definitions already known to end.
    for (let changed = true; changed; ) {
      changed = false;
      for (const [name, schema] of Object.entries(defs)) {
        if (!ends.get(name) && terminates(schema)) {
          ends.set(name, true);
          changed = true;
        }
      }
    }
    if (terminates(root)) return;
    const stuck = [...ends].find(([, ok]) => !ok)![0];
    const { keyword, name } = this.sources.get(stuck)!;
    reject(child(child(basePath, keyword), name), `The $ref cycle through '${name}' has no way out (every property is always generated), so no finite value matches it`);
  }

  private refName(ref: string, path: string): string {
    const name = this.pointerToName.get(ref);
    if (name === undefined) {
      reject(path, `The $ref '${ref}' cannot be resolved; only '#/$defs/<name>' and '#/definitions/<name>' of the root schema are supported`);
    }
    if (!this.converted.has(name) && !this.pending.includes(name)) {
      this.converted.set(name, {} as GbnfJsonSchema); // placeholder keeps recursion finite
      this.pending.push(name);
    }
    return name;
  }

  private resolveRef(ref: string, path: string): Json {
    const name = this.pointerToName.get(ref);
    const target = name === undefined ? undefined : this.sources.get(name)!.schema;
    if (!isObject(target)) reject(path, `The $ref '${ref}' cannot be resolved`);
    return target;
  }

  convert(schema: unknown, path: string): GbnfJsonSchema {
    if (++this.nodes > schemaLimits.maxNodes) reject(path, `The schema has more than ${schemaLimits.maxNodes} subschemas`);
    if (this.depth >= schemaLimits.maxDepth) reject(path, `The schema is nested more than ${schemaLimits.maxDepth} levels deep`);
    this.depth++;
    try {
      return this.convertNode(schema, path);
    } finally {
      this.depth--;
    }
  }

  private convertNode(schema: unknown, path: string): GbnfJsonSchema {
    if (schema === true) return ANY_JSON;
    if (schema === false) reject(path, "A `false` schema allows no value and cannot be generated");
    if (!isObject(schema)) reject(path, "A JSON schema must be an object or a boolean");

    for (const [keyword, isNoop] of Object.entries(UNSUPPORTED)) {
      if (!this.loose && keyword in schema && !isNoop(schema[keyword]) && !integerBoundHeld(schema, keyword)) {
        reject(child(path, keyword), `The JSON schema keyword '${keyword}' cannot be enforced by the grammar; remove it`);
      }
    }
    for (const keyword of REPETITION_KEYWORDS) {
      const value = schema[keyword];
      if (typeof value === "number" && value > schemaLimits.maxRepetition) {
        // A loose schema's bound past what the grammar spells out is a hint: the value is left unbounded.
        if (this.loose) {
          const { [keyword]: _, ...bounded } = schema;
          return this.convertNode(bounded, path);
        }
        reject(child(path, keyword), `${keyword} may be at most ${schemaLimits.maxRepetition} here (the grammar spells repetitions out)`);
      }
    }

    const description = typeof schema.description === "string" ? { description: schema.description } : {};
    const rest: Json = {};
    for (const [key, value] of Object.entries(schema)) {
      if (VALIDATION_KEYWORDS.has(key)) rest[key] = value;
    }

    if (rest.nullable === true) {
      const { nullable: _, ...withoutNullable } = schema;
      const inner = this.convert(withoutNullable, path);
      return { oneOf: [inner, { type: "null" }], ...description } as GbnfJsonSchema;
    }
    delete rest.nullable;

    if ("allOf" in rest) return { ...(this.convert(this.allOfOrHint(schema, rest, path), path) as object), ...description } as GbnfJsonSchema;

    if ("$ref" in rest) {
      const ref = rest.$ref;
      if (typeof ref !== "string") reject(child(path, "$ref"), "$ref must be a string");
      const others = Object.keys(rest).filter((k) => k !== "$ref");
      if (others.length > 0) reject(child(path, others[0]), `Keywords next to $ref cannot be enforced by the grammar ('${others[0]}')`);
      return { $ref: `#/$defs/${this.refName(ref, child(path, "$ref"))}`, ...description } as GbnfJsonSchema;
    }

    if ("anyOf" in rest || "oneOf" in rest) {
      if ("anyOf" in rest && "oneOf" in rest) reject(child(path, "oneOf"), "A schema with both anyOf and oneOf cannot be enforced");
      const keyword = "anyOf" in rest ? "anyOf" : "oneOf";
      const alternatives = rest[keyword];
      if (!Array.isArray(alternatives) || alternatives.length === 0) reject(child(path, keyword), `${keyword} must be a non-empty array`);
      const others = Object.keys(rest).filter((k) => k !== keyword);
      if (others.length > 0) {
        reject(child(path, others[0]), `Keywords next to ${keyword} cannot be enforced by the grammar ('${others[0]}'); move them into each alternative`);
      }
      const converted = alternatives.map((alt, i) => this.convert(alt, `${child(path, keyword)}[${i}]`));
      return converted.length === 1 ? ({ ...(converted[0] as object), ...description } as GbnfJsonSchema) : ({ oneOf: converted, ...description } as GbnfJsonSchema);
    }

    const types = this.typesOf(rest, path);

    if ("const" in rest) {
      const value = rest.const;
      if (!isPrimitive(value)) reject(child(path, "const"), "Only string, number, boolean or null constants can be enforced");
      if (!primitiveAllowed(value, types, rest)) reject(child(path, "const"), "The const value does not satisfy the rest of the schema");
      return { const: value, ...description } as GbnfJsonSchema;
    }

    if ("enum" in rest) {
      const values = rest.enum;
      if (!Array.isArray(values) || values.length === 0) reject(child(path, "enum"), "enum must be a non-empty array");
      values.forEach((value, i) => {
        if (!isPrimitive(value)) reject(`${child(path, "enum")}[${i}]`, "Only string, number, boolean or null enum values can be enforced");
      });
      const allowed = values.filter((v) => primitiveAllowed(v, types, rest));
      if (allowed.length === 0) reject(child(path, "enum"), "No enum value satisfies the rest of the schema");
      return { enum: allowed, ...description } as GbnfJsonSchema;
    }

    if (types === null) return { ...(ANY_JSON as object), ...description } as GbnfJsonSchema;

    const basic: string[] = [];
    const alternatives: GbnfJsonSchema[] = [];
    for (const type of types) {
      if (type === "object") alternatives.push(this.objectSchema(rest, path));
      else if (type === "array") alternatives.push(this.arraySchema(rest, path));
      else if (type === "string" && STRING_KEYWORDS.some((k) => k in rest)) {
        const string = this.stringSchema(rest, path);
        if ("format" in string || "minLength" in string || "maxLength" in string) alternatives.push(string);
        else basic.push(type);
      } else basic.push(type);
    }
    if (basic.length > 0) alternatives.unshift({ type: basic.length === 1 ? basic[0] : basic } as GbnfJsonSchema);
    if (alternatives.length === 1) return { ...(alternatives[0] as object), ...description } as GbnfJsonSchema;
    return { oneOf: alternatives, ...description } as GbnfJsonSchema;
  }

  /** The schema's types: explicit, or inferred from type-specific keywords; null means any JSON value. */
  private typesOf(rest: Json, path: string): string[] | null {
    const type = rest.type;
    if (type !== undefined) {
      const list = Array.isArray(type) ? type : [type];
      if (list.length === 0) reject(child(path, "type"), "type must not be empty");
      for (const t of list) {
        if (typeof t !== "string" || !ALL_TYPES.has(t)) reject(child(path, "type"), `Unknown type ${JSON.stringify(t)}`);
      }
      return [...new Set(list as string[])];
    }
    const inferred: string[] = [];
    if (OBJECT_KEYWORDS.some((k) => k in rest)) inferred.push("object");
    if (ARRAY_KEYWORDS.some((k) => k in rest)) inferred.push("array");
    if (STRING_KEYWORDS.some((k) => k in rest)) inferred.push("string");
    // Without `type`, other types would be allowed too; generating only the implied ones is a sound subset.
    return inferred.length === 0 ? null : inferred;
  }

  private stringSchema(rest: Json, path: string): GbnfJsonSchema {
    const format = typeof rest.format === "string" && FORMATS.has(rest.format) ? rest.format : null;
    if (format) {
      for (const k of ["minLength", "maxLength"]) {
        if (k in rest) reject(child(path, k), `'${k}' cannot be combined with format '${format}' in the grammar`);
      }
      return { type: "string", format } as GbnfJsonSchema;
    }
    const out: Json = { type: "string" };
    for (const k of ["minLength", "maxLength"]) {
      if (k in rest) {
        if (!Number.isInteger(rest[k]) || (rest[k] as number) < 0) reject(child(path, k), `${k} must be a non-negative integer`);
        out[k] = rest[k];
      }
    }
    if (typeof out.minLength === "number" && typeof out.maxLength === "number" && out.maxLength < out.minLength) {
      reject(child(path, "maxLength"), "maxLength is below minLength");
    }
    return out as GbnfJsonSchema;
  }

  private objectSchema(rest: Json, path: string): GbnfJsonSchema {
    const propsPath = child(path, "properties");
    const properties = rest.properties ?? {};
    if (!isObject(properties)) reject(propsPath, "properties must be an object");
    const out: Json = { type: "object" };
    const names = Object.keys(properties);
    if (names.length > 0) {
      out.properties = Object.fromEntries(names.map((name) => [name, this.convert(properties[name], child(propsPath, name))]));
    }
    if ("required" in rest) {
      const required = rest.required;
      if (!Array.isArray(required)) reject(child(path, "required"), "required must be an array");
      required.forEach((name, i) => {
        if (typeof name !== "string" || !(name in properties)) {
          reject(`${child(path, "required")}[${i}]`, `The required property ${JSON.stringify(name)} has no schema in properties, so the grammar cannot generate it`);
        }
      });
    }
    let additional = rest.additionalProperties;
    if (additional === undefined && rest.unevaluatedProperties !== undefined && rest.unevaluatedProperties !== true) {
      additional = rest.unevaluatedProperties;
    }
    if (additional === true) out.additionalProperties = true;
    else if (isObject(additional)) {
      const key = rest.additionalProperties === undefined ? "unevaluatedProperties" : "additionalProperties";
      out.additionalProperties = Object.keys(additional).length === 0 ? true : this.convert(additional, child(path, key));
    } else if (additional !== undefined && additional !== false) {
      reject(child(path, "additionalProperties"), "additionalProperties must be a boolean or a schema");
    }
    const extrasAllowed = out.additionalProperties !== undefined;
    if ("maxProperties" in rest) {
      const max = rest.maxProperties;
      if (!Number.isInteger(max) || (max as number) < names.length) {
        reject(child(path, "maxProperties"), "The grammar always generates every listed property, so maxProperties must be at least their number");
      }
      if (extrasAllowed) out.maxProperties = max;
    }
    if ("minProperties" in rest) {
      const min = rest.minProperties;
      if (!Number.isInteger(min)) reject(child(path, "minProperties"), "minProperties must be an integer");
      if ((min as number) > names.length) {
        if (!extrasAllowed) reject(child(path, "minProperties"), "minProperties exceeds the properties the schema allows");
        out.minProperties = min;
      }
    }
    return out as GbnfJsonSchema;
  }

  private arraySchema(rest: Json, path: string): GbnfJsonSchema {
    const out: Json = { type: "array" };
    let prefix: unknown[] | null = null;
    let prefixKey = "prefixItems";
    let items: unknown = undefined;
    let itemsKey = "items";
    if (Array.isArray(rest.items)) {
      // draft-04 tuple form: items is the prefix, additionalItems the rest
      prefix = rest.items;
      prefixKey = "items";
      items = rest.additionalItems;
      itemsKey = "additionalItems";
      if ("prefixItems" in rest) reject(child(path, "prefixItems"), "prefixItems cannot be combined with an items array");
    } else {
      if ("prefixItems" in rest) {
        if (!Array.isArray(rest.prefixItems)) reject(child(path, "prefixItems"), "prefixItems must be an array");
        prefix = rest.prefixItems;
      }
      items = rest.items;
      if ("additionalItems" in rest && !(rest.additionalItems === true || isObject(rest.additionalItems) && Object.keys(rest.additionalItems).length === 0)) {
        reject(child(path, "additionalItems"), "additionalItems only applies to an items array");
      }
    }
    let maxItems = rest.maxItems as number | undefined;
    if (prefix) out.prefixItems = prefix.map((item, i) => this.convert(item, `${child(path, prefixKey)}[${i}]`));
    if (items === false) {
      if (!prefix) {
        maxItems = 0;
      } else {
        maxItems = Math.min(maxItems ?? prefix.length, prefix.length);
      }
    } else if (items !== undefined && items !== true) {
      if (isObject(items) && Object.keys(items).length === 0) {
        // any item: the library's default
      } else {
        out.items = this.convert(items, child(path, itemsKey));
      }
    }
    if ("minItems" in rest) {
      if (!Number.isInteger(rest.minItems) || (rest.minItems as number) < 0) reject(child(path, "minItems"), "minItems must be a non-negative integer");
      out.minItems = rest.minItems;
    }
    if (maxItems !== undefined) {
      if (!Number.isInteger(maxItems) || maxItems < 0) reject(child(path, "maxItems"), "maxItems must be a non-negative integer");
      if (prefix && maxItems < prefix.length) {
        reject(child(path, "maxItems"), "The grammar always generates every prefix item, so maxItems must be at least their number");
      }
      if (typeof out.minItems === "number" && maxItems < out.minItems) reject(child(path, "maxItems"), "maxItems is below minItems");
      out.maxItems = maxItems;
    }
    return out as GbnfJsonSchema;
  }

  /** In a loose schema an allOf that cannot be merged is a hint: the rest of the schema is enforced without it. */
  private allOfOrHint(schema: Json, rest: Json, path: string): Json {
    try {
      return this.flattenAllOf(schema, rest, path);
    } catch (err) {
      if (!this.loose || !(err instanceof AppError)) throw err;
      const { allOf: _, ...siblings } = schema;
      return siblings;
    }
  }

  /**
   * allOf: one element is merged into its parent; several are merged when they are object schemas (after resolving
   * root $refs) whose properties do not overlap. Anything else cannot be enforced.
   */
  private flattenAllOf(schema: Json, rest: Json, path: string): Json {
    const allOfPath = child(path, "allOf");
    const parts = rest.allOf;
    if (!Array.isArray(parts) || parts.length === 0) reject(allOfPath, "allOf must be a non-empty array");
    const { allOf: _, ...siblings } = schema;
    const siblingKeys = Object.keys(siblings).filter((k) => VALIDATION_KEYWORDS.has(k));
    if (parts.length === 1 && siblingKeys.length === 0) {
      const only = parts[0];
      if (only === true) return {};
      if (!isObject(only)) reject(`${allOfPath}[0]`, "allOf items must be schemas");
      return { ...only, ...(typeof schema.description === "string" ? { description: schema.description } : {}) };
    }
    const objects: { schema: Json; path: string }[] = [];
    if (siblingKeys.length > 0) objects.push({ schema: Object.fromEntries(siblingKeys.map((k) => [k, siblings[k]])), path });
    parts.forEach((part, i) => {
      const partPath = `${allOfPath}[${i}]`;
      if (!isObject(part)) reject(partPath, "allOf items must be schemas");
      const resolved = typeof part.$ref === "string" ? this.resolveRef(part.$ref, child(partPath, "$ref")) : part;
      objects.push({ schema: resolved, path: partPath });
    });
    const merged: Json = { type: "object", properties: {} as Json };
    const required: string[] = [];
    const closed: { props: Json; path: string }[] = [];
    for (const { schema: part, path: partPath } of objects) {
      const keys = Object.keys(part).filter((k) => VALIDATION_KEYWORDS.has(k));
      for (const key of keys) {
        if (!["type", "properties", "required", "additionalProperties"].includes(key)) {
          reject(child(partPath, key), `allOf can only be enforced by merging plain object schemas; '${key}' prevents it`);
        }
      }
      if ("type" in part && part.type !== "object") reject(child(partPath, "type"), "allOf can only be enforced by merging object schemas");
      const props = part.properties ?? {};
      if (!isObject(props)) reject(child(partPath, "properties"), "properties must be an object");
      for (const [name, propSchema] of Object.entries(props)) {
        if (name in (merged.properties as Json)) reject(child(child(partPath, "properties"), name), `allOf parts both define '${name}'; they cannot be merged`);
        (merged.properties as Json)[name] = propSchema;
      }
      if (Array.isArray(part.required)) required.push(...(part.required as string[]));
      if (part.additionalProperties !== undefined && part.additionalProperties !== true) {
        closed.push({ props, path: child(partPath, "additionalProperties") });
      }
    }
    // The merged object carries every part's properties; a part that limits extra properties must list them all.
    for (const { props, path: closedPath } of closed) {
      const foreign = Object.keys(merged.properties as Json).find((name) => !(name in props));
      if (foreign !== undefined) reject(closedPath, `This allOf part forbids the property '${foreign}' that another part defines`);
    }
    if (required.length > 0) merged.required = [...new Set(required)];
    if (typeof schema.description === "string") merged.description = schema.description;
    return merged;
  }
}

function escapePointer(name: string): string {
  return name.replace(/~/g, "~0").replace(/\//g, "~1");
}
