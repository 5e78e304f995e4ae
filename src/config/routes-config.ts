import type { Capability, RouteConfig } from "./config.schema.ts";
import type { FallbackReason, ModelEntry, RouteEntry } from "./app-config.ts";
import { ConfigError } from "./config-error.ts";
import { resolveModelCache } from "./cache-config.ts";

/** The capabilities a request is routed by: a route must share at least one of them. */
const endpointCapabilities: readonly Capability[] = ["chat", "embeddings", "rerank", "transcriptions"];

/** The config's names of the fallback triggers, and the reason each stands for. */
const triggers = { unavailable: "unavailable", overloaded: "overloaded", upstreamError: "upstream_error", contextWindow: "context_window" } as const satisfies Record<
  keyof NonNullable<RouteConfig["fallbackOn"]>,
  FallbackReason
>;

/**
 * The routes with their defaults, checked against the resolved models (issue 45): a route has an id of its own,
 * names only models (routes never name routes, so there are no cycles), lists each at most once per list, gives at
 * least one target a weight, and its targets and fallbacks share an endpoint capability. Each error names the route.
 */
export function resolveRoutes(input: readonly RouteConfig[], models: readonly ModelEntry[], file: string): RouteEntry[] {
  const byId = new Map(models.map((m) => [m.id, m]));
  const routeIds = new Set(input.map((r) => r.id));
  const seen = new Set<string>();
  return input.map((route, i) => {
    const at = `${file}: routes[${i}]`;
    if (seen.has(route.id)) throw new ConfigError(`${at}.id: duplicate route id "${route.id}"`);
    seen.add(route.id);
    if (byId.has(route.id)) throw new ConfigError(`${at}.id: "${route.id}" is also a model id; a route needs a name of its own`);
    const entryAt = (model: string, where: string): ModelEntry => {
      const entry = byId.get(model);
      if (entry) return entry;
      if (routeIds.has(model)) throw new ConfigError(`${at}.${where}: "${model}" is a route; a route's targets and fallbacks are models (routes do not name routes)`);
      throw new ConfigError(`${at}.${where}: unknown model "${model}" in route "${route.id}"`);
    };
    const unique = (models: string[], list: string) =>
      models.forEach((model, j) => {
        if (models.indexOf(model) !== j) throw new ConfigError(`${at}.${list}[${j}]: "${model}" is listed twice in route "${route.id}"`);
      });
    const targets = route.targets.map((t, j) => ({ entry: entryAt(t.model, `targets[${j}].model`), weight: t.weight ?? 1 }));
    const fallbacks = (route.fallbacks ?? []).map((model, j) => entryAt(model, `fallbacks[${j}]`));
    unique(route.targets.map((t) => t.model), "targets");
    unique(fallbacks.map((f) => f.id), "fallbacks");
    if (targets.every((t) => t.weight === 0)) throw new ConfigError(`${at}.targets: every weight of route "${route.id}" is 0; at least one target must take requests`);
    const all = [...targets.map((t) => t.entry), ...fallbacks];
    const capabilities = all.reduce<Capability[]>((shared, entry) => shared.filter((c) => entry.capabilities.includes(c)), [...all[0].capabilities]);
    if (!capabilities.some((c) => endpointCapabilities.includes(c))) {
      const each = all.map((e) => `${e.id}: ${e.capabilities.join(", ")}`).join("; ");
      throw new ConfigError(`${at}: the targets of route "${route.id}" share no capability (${each})`);
    }
    const windows = all.flatMap((e) => (e.contextSize === null ? [] : [e.contextSize]));
    const fallbackOn = new Set<FallbackReason>();
    for (const [name, reason] of Object.entries(triggers)) if (route.fallbackOn?.[name as keyof typeof triggers] !== false) fallbackOn.add(reason);
    return {
      id: route.id,
      targets: targets.map((t) => ({ model: t.entry.id, weight: t.weight })),
      fallbacks: fallbacks.map((f) => f.id),
      fallbackOn,
      capabilities,
      contextSize: windows.length > 0 ? Math.max(...windows) : null,
      cache: resolveModelCache(route.cache),
    };
  });
}
