import { AjvCompiler } from "@fastify/ajv-compiler";

type Validate = ((data: unknown) => unknown) & { errors?: unknown };
/** One part of a route's request (body, querystring, params or headers), as Fastify hands it over. */
type RouteDefinition = { method: string; url: string; httpPart: string; schema: unknown };
/** What Fastify's `schemaController.compilersFactory.buildValidator` is, as Fastify calls it. */
export type ValidatorFactory = (externalSchemas: unknown, options: { customOptions?: object }) => (route: RouteDefinition) => Validate;

/**
 * Fastify's request validators (ajv), compiled at a route's first request instead of at start, from one pool of ajv
 * instances for the process. Fastify compiles every route's body, query, params and headers schema when a server
 * starts, about a third of a start's CPU, though a replica serves a handful of the ~100 routes and a test one or two.
 * A route's first request pays its own compile (milliseconds) instead. One pool: every scope and every server the
 * process builds (the tests build hundreds) gets the same ajv for the same shared schemas and options, and ajv
 * compiles a schema object once.
 */
const pool = AjvCompiler();

export function lazyValidators(): ValidatorFactory {
  return (externalSchemas, options) => {
    let compile: ((route: RouteDefinition) => Validate) | null = null;
    return (route) => {
      let validate: Validate | null = null;
      const lazy: Validate = (data) => {
        if (validate === null) {
          compile ??= pool(externalSchemas as never, options as never) as unknown as (route: RouteDefinition) => Validate;
          validate = compile(route) as Validate;
        }
        const result = validate(data);
        // Fastify reads a failed validation's errors off the function it was given.
        lazy.errors = validate.errors;
        return result;
      };
      return lazy;
    };
  };
}
