export interface RouteRecord {
  method: string;
  url: string;
  pattern: RegExp;
  /** The route's schema as declared (its request parts are validated from it: http/lazy-validators.ts). */
  schema?: Record<string, unknown>;
}

/** Every route the app declares, so an unknown method on a known path answers 405 with `Allow` (not-found.ts). */
export class RouteTable {
  readonly routes: RouteRecord[] = [];

  add(method: string | string[], url: string, schema?: Record<string, unknown>): void {
    const source = url
      .split("/")
      .map((part) => (part === "*" ? ".*" : part.startsWith(":") ? "[^/]+" : part.replace(/[.+?^${}()|[\]\\]/g, "\\$&")))
      .join("/");
    for (const m of Array.isArray(method) ? method : [method]) {
      if (m === "HEAD") continue;
      this.routes.push({ method: m, url, pattern: new RegExp(`^${source}$`), ...(schema ? { schema } : {}) });
    }
  }

  /** The methods declared for a path, e.g. ["GET"] for /v1/models. */
  methodsFor(path: string): string[] {
    return [...new Set(this.routes.filter((r) => r.pattern.test(path)).map((r) => r.method))];
  }
}
