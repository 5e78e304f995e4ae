import SerializerSelector from "@fastify/fast-json-stringify-compiler";

/**
 * Fastify's response serializers (fast-json-stringify), compiled once per distinct schema in the process instead of
 * once per route, status code, encapsulated scope and server. Routes share the error envelope and many bodies, and
 * every scope gets a factory of its own with the same shared schemas: of about 600 compiles at start only about 70
 * differ, and compiling every copy blocked the event loop for 3 s at each start on a 2-core machine (a restarted node
 * then missed its database pool's 1 s timeouts). A serializer depends only on its schema's JSON (TypeBox's symbol keys
 * are not read), the shared schemas it refers to and the options, so one per distinct text of the three is the same
 * function, for every server the process builds (the tests build hundreds).
 *
 * Each is compiled with only the shared schemas its schema refers to, directly or through another: fast-json-stringify
 * checks every shared schema it is given against the JSON Schema meta-schema on every compile, and the 56 shared
 * schemas (74 KB of JSON) checked for each of the 70 compiles were most of a server's start.
 */
const build = SerializerSelector();
// Scopes (and servers) with the same shared schemas and options get the same compiler.
const byContext = new Map<string, SerializerSelector.SerializerCompiler>();

export function sharedSerializers(): SerializerSelector.SerializerFactory {
  return (externalSchemas, options) => {
    const context = JSON.stringify([externalSchemas ?? null, options ?? null]);
    let compiler = byContext.get(context);
    if (!compiler) byContext.set(context, (compiler = oncePerSchema((externalSchemas ?? {}) as Record<string, unknown>, options)));
    return compiler;
  };
}

function oncePerSchema(shared: Record<string, unknown>, options: SerializerSelector.Options | undefined): SerializerSelector.SerializerCompiler {
  const owners = ownersOfIds(shared);
  const compiled = new Map<string, SerializerSelector.Serializer>();
  return (route) => {
    const key = JSON.stringify(route.schema);
    let serializer = compiled.get(key);
    if (!serializer) compiled.set(key, (serializer = build(referencedShared(route.schema, shared, owners), options)(route)));
    return serializer;
  };
}

/** Every `$id` inside the shared schemas (a shared schema may hold others), mapped to the shared schema holding it. */
function ownersOfIds(shared: Record<string, unknown>): Map<string, string> {
  const owners = new Map<string, string>();
  for (const [name, schema] of Object.entries(shared)) {
    owners.set(name, name);
    visit(schema, (node) => {
      if (typeof node.$id === "string") owners.set(node.$id, name);
    });
  }
  return owners;
}

/** The shared schemas `schema` refers to by `$ref`, and those they refer to, transitively. */
function referencedShared(schema: unknown, shared: Record<string, unknown>, owners: Map<string, string>): Record<string, unknown> {
  const picked: Record<string, unknown> = {};
  const pending = [schema];
  while (pending.length > 0) {
    visit(pending.pop(), (node) => {
      if (typeof node.$ref !== "string") return;
      const owner = owners.get(node.$ref.split("#")[0]);
      if (owner === undefined || owner in picked) return;
      picked[owner] = shared[owner];
      pending.push(shared[owner]);
    });
  }
  return picked;
}

function visit(value: unknown, each: (node: Record<string, unknown>) => void): void {
  if (typeof value !== "object" || value === null) return;
  if (Array.isArray(value)) {
    for (const item of value) visit(item, each);
    return;
  }
  each(value as Record<string, unknown>);
  for (const child of Object.values(value)) visit(child, each);
}
