import SerializerSelector from "@fastify/fast-json-stringify-compiler";

/**
 * Fastify's response serializers (fast-json-stringify), compiled once per distinct schema instead of once per route,
 * status code and encapsulated scope. Routes share the error envelope and many bodies, and every scope gets a factory
 * of its own with the same shared schemas: of about 600 compiles at start only about 50 differ, and compiling every
 * copy blocked the event loop for 3 s at each start on a 2-core machine (a restarted node then missed its database
 * pool's 1 s timeouts). A serializer depends only on its schema's JSON (TypeBox's symbol keys are not read), the
 * shared schemas and the options, so one per distinct text of the three is the same function.
 */
export function sharedSerializers(): SerializerSelector.SerializerFactory {
  const build = SerializerSelector();
  // Scopes with the same shared schemas and options get the same compiler.
  const byContext = new Map<string, SerializerSelector.SerializerCompiler>();
  return (externalSchemas, options) => {
    const context = JSON.stringify([externalSchemas ?? null, options ?? null]);
    let compiler = byContext.get(context);
    if (!compiler) byContext.set(context, (compiler = oncePerSchema(build(externalSchemas, options))));
    return compiler;
  };
}

function oncePerSchema(compile: SerializerSelector.SerializerCompiler): SerializerSelector.SerializerCompiler {
  const compiled = new Map<string, SerializerSelector.Serializer>();
  return (route) => {
    const key = JSON.stringify(route.schema);
    let serializer = compiled.get(key);
    if (!serializer) compiled.set(key, (serializer = compile(route)));
    return serializer;
  };
}
