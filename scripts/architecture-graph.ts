// The folder graph of src/ as a Mermaid diagram, from dependency-cruiser (the same options as the layer rules,
// type-only imports included), collapsed to one node per folder. docs/architecture.md holds the committed copy
// between its folder-graph markers; test/docs.test.ts fails when the two differ.
//
//   node --import tsx scripts/architecture-graph.ts           print the diagram
//   node --import tsx scripts/architecture-graph.ts --write   refresh docs/architecture.md
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { cruise, type ICruiseOptions } from "dependency-cruiser";

const repoRoot = path.resolve(import.meta.dirname, "..");
export const architectureDoc = path.join(repoRoot, "docs/architecture.md");
const start = "<!-- folder-graph:start -->";
const end = "<!-- folder-graph:end -->";

/** The Mermaid source of the folder graph (one node per folder of src/, and one per file at its root). */
export async function folderGraph(): Promise<string> {
  const { options } = createRequire(import.meta.url)(path.join(repoRoot, ".dependency-cruiser.cjs")) as { options: ICruiseOptions };
  const result = await cruise(["src"], { ...options, baseDir: repoRoot, includeOnly: "^src/", collapse: "^src/[^/]+", outputType: "mermaid" });
  return String(result.output).trim();
}

/** The doc's text with the diagram between the markers replaced. */
export function withGraph(doc: string, graph: string): string {
  const from = doc.indexOf(start);
  const to = doc.indexOf(end);
  if (from < 0 || to < from) throw new Error(`${architectureDoc} has no ${start} … ${end} block`);
  return `${doc.slice(0, from + start.length)}\n\`\`\`mermaid\n${graph}\n\`\`\`\n${doc.slice(to)}`;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const graph = await folderGraph();
  if (process.argv.includes("--write")) {
    writeFileSync(architectureDoc, withGraph(readFileSync(architectureDoc, "utf8"), graph));
    console.log(`updated ${path.relative(process.cwd(), architectureDoc)}`);
  } else {
    console.log(graph);
  }
}
