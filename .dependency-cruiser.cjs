/**
 * Layer rules (STYLE.md "Layers are checked, not hoped for"), checked by `npm test` (test/layers.test.ts) and by
 * `npx depcruise src test bench harness console`. docs/architecture.md draws the folder graph they allow.
 *
 * Each folder of src/ has an allow-list: the folders it may import besides itself (npm packages and Node's own are
 * always allowed, and every layer above config/ may import config/ and errors/). An allow-list is written as a
 * `forbidden` rule whose `to.pathNot` names what is allowed, so a violation names the layer it breaks. Dependencies
 * point down (docs/architecture.md draws the graph):
 *
 *   cli/ → server.ts → scopes/ → features/ (endpoints → generation/, inference.ts, request-context.ts, response-cache.ts) and plugins/
 *   features/, plugins/ → auth/ → keys/ → store/
 *   features/ → app-context.ts → catalog/ → scheduler/ → engines/ → audio/ → workers/
 *   beside them: metrics/ (reads the scheduler's stats), http/ (building blocks), telemetry/, config/ → errors/
 */

/** `^src/(a|b)/` plus the root files named, for `pathNot`. */
function within(folders, files = []) {
  const parts = [`^src/(${folders.join("|")})/`];
  for (const file of files) parts.push(`^src/${file.replaceAll(".", "\\.")}$`);
  return parts.join("|");
}

/** A folder (or a root file) of src/ that may import only `allowed` (folders) and `files` (root files) of src/. */
function layer(name, from, allowed, files = [], comment) {
  return {
    name,
    comment: comment ?? `${from} may import only ${[...allowed, ...files].join(", ") || "nothing of src/"}.`,
    severity: "error",
    from: { path: from.endsWith(".ts") ? `^src/${from.replaceAll(".", "\\.")}$` : `^src/${from}/` },
    to: { path: "^src/", pathNot: within([from.replace(/\.ts$/, ""), ...allowed], files) },
  };
}

/** Every folder and root file of src/ that has a layer below. */
const layered = within(
  ["cli", "scopes", "features", "plugins", "auth", "keys", "store", "catalog", "scheduler", "engines", "audio", "workers", "http", "metrics", "telemetry", "config", "errors"],
  ["server.ts", "app-context.ts"],
);

/** Our own top-level folders outside src/ (npm packages and Node's modules are not among them). */
const repoFolders = "^(src|test|bench|harness|console|scripts|bin|deploy)/";

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      comment: "No import cycle between files: a module graph with cycles has no order to read or load it in.",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    {
      name: "no-folder-cycles",
      comment: "No import cycle between folders (a folder and its own subfolders aside): the layers point one way.",
      severity: "error",
      scope: "folder",
      from: {},
      to: { circular: true },
    },
    {
      name: "every-folder-has-a-layer",
      comment: "Each folder of src/ has an allow-list below; a new folder gets one before it imports or is imported.",
      severity: "error",
      from: { path: "^src/", pathNot: layered },
      to: { path: "^src/" },
    },
    layer("errors-imports-nothing", "errors", []),
    {
      name: "config-imports-only-errors",
      comment: "config/ depends on errors/ only; engine option schemas reach it through the registry (EngineKinds).",
      severity: "error",
      from: { path: "^src/config/" },
      to: { path: "^src/", pathNot: within(["config", "errors"]) },
    },
    layer("telemetry-imports-nothing", "telemetry", []),
    layer("workers-layer", "workers", ["errors"]),
    layer("audio-layer", "audio", ["workers", "errors"]),
    layer("engines-layer", "engines", ["audio", "workers", "telemetry", "config", "errors"]),
    {
      name: "engines-never-import-http",
      comment: "Engines know nothing of HTTP: no features/, http/, plugins/, scopes/ or cli/.",
      severity: "error",
      from: { path: "^src/engines/" },
      to: { path: "^src/(features|http|plugins|scopes|cli)/" },
    },
    layer("scheduler-layer", "scheduler", ["engines", "config", "errors"]),
    layer("catalog-layer", "catalog", ["scheduler", "engines", "config", "errors"]),
    layer("metrics-layer", "metrics", ["scheduler", "workers", "config", "errors"]),
    layer("store-layer", "store", ["config", "errors"]),
    layer("keys-layer", "keys", ["store", "config", "errors"]),
    layer("http-layer", "http", ["config", "errors"], [], "http/ holds building blocks (SSE, TLS, request signal and body): config/ and errors/ only."),
    layer("auth-layer", "auth", ["keys", "store", "config", "errors"]),
    layer("app-context-layer", "app-context.ts", ["catalog", "metrics", "store", "http", "config", "scheduler"]),
    layer("plugins-layer", "plugins", ["auth", "keys", "store", "metrics", "http", "config", "errors"], ["app-context.ts"]),
    {
      name: "generation-layer",
      comment: "features/generation/ (what chat and responses share) sits below the endpoints: it imports no feature.",
      severity: "error",
      from: { path: "^src/features/generation/" },
      to: {
        path: "^src/",
        pathNot: `^src/features/(generation/|inference\\.ts$|request-context\\.ts$|response-cache\\.ts$)|${within(["engines", "scheduler", "metrics", "http", "config", "errors"], ["app-context.ts"])}`,
      },
    },
    {
      name: "features-layer",
      comment: "features/ may import the layers below it (the store through keys/ or app decorations), never plugins/, scopes/, server.ts or cli/.",
      severity: "error",
      from: { path: "^src/features/", pathNot: "^src/features/(generation|batches)/" },
      to: {
        path: "^src/",
        pathNot: within(["features", "auth", "keys", "catalog", "scheduler", "engines", "http", "telemetry", "config", "errors"], ["app-context.ts"]),
      },
    },
    {
      name: "batches-layer",
      comment:
        "features/batches/ (the Batch API) is the features layer plus store/ (its files, batches, lines and leases are its own tables), " +
        "and it runs its lines through the chat and embeddings services, the same path as their routes.",
      severity: "error",
      from: { path: "^src/features/batches/" },
      to: {
        path: "^src/",
        pathNot:
          "^src/features/(batches|generation)/|^src/features/(inference|request-context)\\.ts$|^src/features/[^/]+/[^/]+\\.(schema|request)\\.ts$|^src/features/(chat|embeddings)/[^/]+\\.service\\.ts$|" +
          within(["auth", "keys", "store", "catalog", "scheduler", "engines", "http", "telemetry", "config", "errors"], ["app-context.ts"]),
      },
    },
    {
      name: "features-stay-apart",
      comment:
        "An endpoint's folder imports of another only its *.schema.ts (wire types) and *.request.ts (wire → engine request); " +
        "what they share is in features/generation/, inference.ts and request-context.ts.",
      severity: "error",
      from: { path: "^src/features/([^/]+)/", pathNot: "^src/features/(generation|batches)/" },
      to: {
        path: "^src/features/",
        pathNot: "^src/features/($1|generation)/|^src/features/(inference|request-context)\\.ts$|^src/features/[^/]+/[^/]+\\.(schema|request)\\.ts$",
      },
    },
    layer("scopes-layer", "scopes", ["features", "plugins", "auth", "http", "config", "errors"]),
    {
      name: "server-layer",
      comment: "server.ts builds the app from everything but cli/.",
      severity: "error",
      from: { path: "^src/server\\.ts$" },
      to: { path: "^src/cli/" },
    },
    {
      name: "only-cli-imports-cli",
      comment: "cli/ is the outermost layer: nothing outside it imports it.",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/cli/" },
      to: { path: "^src/cli/" },
    },
    {
      name: "src-is-self-contained",
      comment: "src/ ships alone: it imports nothing of test/, bench/, harness/, console/ or scripts/.",
      severity: "error",
      from: { path: "^src/" },
      to: { path: repoFolders, pathNot: "^src/" },
    },
    {
      name: "harness-imports-src-only",
      comment: "harness/ (what tests and benchmarks both start) imports src/ and itself, never test/ or bench/.",
      severity: "error",
      from: { path: "^harness/" },
      to: { path: repoFolders, pathNot: "^(src|harness)/" },
    },
    {
      name: "test-never-imports-bench",
      comment: "test/ imports src/, harness/, scripts/ (what it checks) and itself; what bench/ also needs is in harness/.",
      severity: "error",
      from: { path: "^test/" },
      to: { path: repoFolders, pathNot: "^(src|harness|scripts|test)/" },
    },
    {
      name: "bench-never-imports-test",
      comment: "bench/ imports src/, harness/ and itself; what test/ also needs is in harness/.",
      severity: "error",
      from: { path: "^bench/" },
      to: { path: repoFolders, pathNot: "^(src|harness|bench)/" },
    },
    {
      name: "console-is-static",
      comment: "console/ is served to the browser as it is: it imports itself and its libraries (preact, htm, uplot), never our code.",
      severity: "error",
      from: { path: "^console/" },
      to: { path: repoFolders, pathNot: "^console/" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "node_modules|^test/fixtures/" },
    tsPreCompilationDeps: true,
    combinedDependencies: false,
  },
};
