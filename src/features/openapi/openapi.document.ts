import type { FastifyInstance } from "fastify";

/** Builds the OpenAPI 3.1 document from the same TypeBox schemas Fastify validates with. */
export function buildOpenApiDocument(app: FastifyInstance): unknown {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of app.routeTable.routes) {
    if (!route.url.startsWith("/v1/") || route.url === "/v1/openapi.json") continue;
    const openapiPath = route.url.replace(/:([A-Za-z_]+)/g, "{$1}").replace(/\*$/, "{model}");
    const schema = (route.schema ?? {}) as Record<string, any>;
    const responses: Record<string, unknown> = {};
    for (const [status, body] of Object.entries(schema.response ?? {})) {
      responses[status] = { description: status === "200" ? "OK" : "Error", content: { "application/json": { schema: body } } };
    }
    const operation: Record<string, unknown> = {
      responses: Object.keys(responses).length > 0 ? responses : { 200: { description: "OK" } },
      security: [{ bearerAuth: [] }],
    };
    if (schema.summary) operation.summary = schema.summary;
    const body = schema.body ?? schema.multipartBody;
    if (body) {
      const contentType = schema.consumes?.[0] ?? "application/json";
      operation.requestBody = { required: true, content: { [contentType]: { schema: body } } };
    }
    if (openapiPath.includes("{model}")) {
      operation.parameters = [{ name: "model", in: "path", required: true, schema: { type: "string" } }];
    }
    paths[openapiPath] ??= {};
    paths[openapiPath][route.method.toLowerCase()] = operation;
  }
  return {
    openapi: "3.1.0",
    info: { title: "Modelgate inference API", version: "1" },
    servers: [{ url: "/" }],
    components: { securitySchemes: { bearerAuth: { type: "http", scheme: "bearer" } } },
    paths,
  };
}
