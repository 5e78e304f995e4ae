// Issue 30.9: README.md and docs/ stay navigable (every relative link and anchor resolves) and the folder graph in
// docs/architecture.md is the one dependency-cruiser draws from today's src/. Issue 43: the README fits in 16 KB and
// opens with the commands CI runs; docs/benchmarks.md opens with the current figures in the format `npm run bench`
// prints, and the README's headline figures are among them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import GithubSlugger from "github-slugger";
import { marked, type Token, type Tokens } from "marked";
import { architectureDoc, folderGraph, withGraph } from "../scripts/architecture-graph.ts";
import { currentFiguresHead, currentFiguresRow, parseCurrentFiguresRow } from "../harness/bench-table.ts";
import { repoRoot } from "../harness/server.ts";

/** Every Markdown file of docs/, sub-folders included, repo-relative. */
const docsFiles = (readdirSync(path.join(repoRoot, "docs"), { recursive: true }) as string[])
  .filter((f) => f.endsWith(".md"))
  .map((f) => `docs/${f.split(path.sep).join("/")}`)
  .sort();
const docs = ["README.md", "CONTRIBUTING.md", ...docsFiles];

/** Every token of a document, nested ones (list items, table cells, emphasis) included. */
function* walk(tokens: Token[]): Generator<Token> {
  for (const token of tokens) {
    yield token;
    const t = token as { tokens?: Token[]; items?: Token[]; header?: { tokens: Token[] }[]; rows?: { tokens: Token[] }[][] };
    if (t.tokens) yield* walk(t.tokens);
    if (t.items) yield* walk(t.items);
    for (const cell of [...(t.header ?? []), ...(t.rows ?? []).flat()]) yield* walk(cell.tokens);
  }
}

/** A heading's text as GitHub renders it (markup gone, code spans kept as text). */
const plain = (tokens: Token[]): string => tokens.map((t) => ("tokens" in t && t.tokens ? plain(t.tokens) : "text" in t ? String(t.text) : "")).join("");

function parse(markdown: string): { anchors: Set<string>; links: string[] } {
  const tokens = marked.lexer(markdown);
  const slugger = new GithubSlugger();
  const anchors = new Set<string>();
  const links: string[] = [];
  for (const token of walk(tokens)) {
    if (token.type === "heading") anchors.add(slugger.slug(plain(token.tokens ?? [])));
    if (token.type === "link" || token.type === "image") links.push(token.href);
  }
  return { anchors, links };
}

/** The relative links of `file` (repo-relative) that name no existing file, or no heading of the file they name. */
function brokenLinks(file: string, markdown: string, read: (file: string) => string | null): string[] {
  const broken: string[] = [];
  for (const href of parse(markdown).links) {
    if (/^[a-z][a-z0-9+.-]*:|^\/\//i.test(href)) continue;
    const [target, anchor] = href.split("#", 2) as [string, string | undefined];
    const resolved = target ? path.posix.normalize(path.posix.join(path.posix.dirname(file), decodeURI(target))) : file;
    const markdown = resolved.endsWith(".md");
    const text = markdown ? read(resolved) : null;
    const exists = markdown ? text !== null : existsSync(path.join(repoRoot, resolved));
    if (!exists) broken.push(`${file}: ${href} (no file ${resolved})`);
    else if (anchor && text !== null && !parse(text).anchors.has(anchor)) broken.push(`${file}: ${href} (no heading #${anchor} in ${resolved})`);
  }
  return broken;
}

const readRepoFile = (file: string) => (existsSync(path.join(repoRoot, file)) ? readFileSync(path.join(repoRoot, file), "utf8") : null);

test("issue 30.9 issue 43.1 every relative link and anchor in README.md, CONTRIBUTING.md and docs/ resolves", () => {
  const broken = docs.flatMap((file) => brokenLinks(file, readRepoFile(file)!, readRepoFile));
  assert.deepEqual(broken, []);
  // Each file is linked from its folder's map: docs/*.md and CONTRIBUTING.md from the README, a sub-folder's files
  // from that folder's README.md, which the README links.
  const linkedFrom = (file: string) => parse(readRepoFile(file)!).links.map((href) => path.posix.normalize(path.posix.join(path.posix.dirname(file), href.split("#")[0]!)));
  const unlinked = docs
    .filter((f) => f !== "README.md")
    .filter((f) => {
      const folder = path.posix.dirname(f);
      const map = folder === "." || folder === "docs" || f === `${folder}/README.md` ? "README.md" : `${folder}/README.md`;
      return !linkedFrom(map).includes(f);
    });
  assert.deepEqual(unlinked, [], "the README's documentation map links every file of docs/ (a sub-folder's files from its README.md)");
});

test("issue 43.1 README.md is at most 16 KB", () => {
  const bytes = Buffer.byteLength(readRepoFile("README.md")!);
  assert.ok(bytes <= 16 * 1024, `README.md is ${bytes} bytes`);
});

test("issue 43.1 the README opens with two commands, install and start on the embedded defaults, then the tests, which is the command .ci/run runs", () => {
  const tokens = marked.lexer(readRepoFile("README.md")!);
  const firstCode = tokens.find((t): t is Tokens.Code => t.type === "code");
  const beforeIt = tokens.slice(0, tokens.indexOf(firstCode!)).filter((t): t is Tokens.Heading => t.type === "heading");
  assert.deepEqual(beforeIt.map((t) => t.depth), [1], "the commands come before any section");
  const commands = firstCode!.text.split("\n").map((line) => line.replace(/\s+#.*$/, "").trim());
  assert.deepEqual(commands, ["npm ci && npm start", "npm test"]);
  const ci = readRepoFile(".ci/run")!.trim().split("\n");
  assert.equal(ci.at(-1), "npm test", ".ci/run ends with the README's test command");
});

/** The lines of the first table after a heading of `markdown`. */
function tableAfter(markdown: string, heading: string): string[] {
  const lines = markdown.split("\n");
  const start = lines.indexOf(heading);
  assert.ok(start >= 0, `no heading "${heading}"`);
  const first = lines.findIndex((line, i) => i > start && line.startsWith("|"));
  const end = lines.findIndex((line, i) => i > first && !line.startsWith("|"));
  return lines.slice(first, end < 0 ? undefined : end);
}

const benchmarks = () => readRepoFile("docs/benchmarks.md")!;

test("issue 43.3 docs/benchmarks.md opens with the current figures, every row in the format npm run bench prints, each item once", () => {
  const headings = marked.lexer(benchmarks()).filter((t): t is Tokens.Heading => t.type === "heading");
  assert.deepEqual(headings.slice(0, 2).map((t) => t.text), ["Benchmarks", "Current figures"]);
  const [header, separator, ...rows] = tableAfter(benchmarks(), "## Current figures");
  assert.deepEqual([header, separator], currentFiguresHead());
  assert.ok(rows.length >= 20, `${rows.length} rows`);
  const items = new Set<string>();
  for (const row of rows) {
    const parsed = parseCurrentFiguresRow(row);
    assert.ok("cells" in parsed, "error" in parsed ? parsed.error : "");
    assert.ok(existsSync(path.join(repoRoot, "bench", `${parsed.cells.bench}.bench.ts`)), `no bench/${parsed.cells.bench}.bench.ts: ${row}`);
    assert.ok(!items.has(parsed.cells.item), `${parsed.cells.item} twice`);
    items.add(parsed.cells.item);
  }
});

test("issue 43.3 a row as npm run bench prints it is a row of the current figures; a stale or hand-made one is not", () => {
  const at = { date: "2026-11-27", commit: "b7f7d15", bench: "embeddings" };
  const row = currentFiguresRow({ item: "llama embeddings", ratio: 0.91372, range: [0.7581, 1.1496], target: ">= 0.9" }, at);
  assert.equal(row, "| llama embeddings | 0.914 (0.758–1.15) | >= 0.9 | 2026-11-27 | b7f7d15 | embeddings |");
  assert.deepEqual(parseCurrentFiguresRow(row), { cells: { item: "llama embeddings", "median (min–max)": "0.914 (0.758–1.15)", target: ">= 0.9", date: "2026-11-27", commit: "b7f7d15", bench: "embeddings" } });
  assert.equal(currentFiguresRow({ item: "count", ratio: 0, target: "0" }, at), "| count | 0 | 0 | 2026-11-27 | b7f7d15 | embeddings |");
  for (const bad of [
    "| llama embeddings | +1.58 ms (1.08–2.52) | >= 0.9 | 2026-11-27 | b7f7d15 | embeddings |",
    "| llama embeddings | 0.914 | >= 0.9 | 11-27 | b7f7d15 | embeddings |",
    "| llama embeddings | 0.914 | >= 0.9 | 2026-11-27 | b7f7d15+ | embeddings |",
    "| llama embeddings | 0.914 | >= 0.9 | 2026-11-27 | b7f7d15 |",
  ]) {
    assert.ok("error" in parseCurrentFiguresRow(bad), bad);
  }
});

test("issue 43.1 the README's headline figures are current figures of docs/benchmarks.md, each with its bench command and date", () => {
  const current = tableAfter(benchmarks(), "## Current figures").slice(2).map((row) => (parseCurrentFiguresRow(row) as { cells: Record<string, string> }).cells);
  const [header, , ...rows] = tableAfter(readRepoFile("README.md")!, "## Headline figures");
  assert.equal(header, "| figure | median (min–max) | target | measured |");
  assert.ok(rows.length >= 1 && rows.length <= 5, `${rows.length} rows (one table, five at most)`);
  for (const row of rows) {
    const [, median, target, measured] = row.slice(2, -2).split(" | ");
    const match = current.find((c) => c["median (min–max)"] === median && c.target === target && measured === `\`npm run bench -- ${c.bench}\`, ${c.date}`);
    assert.ok(match, `${row}: no current figure with this median, target, bench and date`);
  }
});

test("issue 30.9 the link check finds a missing file, a missing anchor and a missing image", () => {
  const doc = "# Top\n\n## Two words\n\n[ok](#two-words) [here](#top) [gone](#three) [none](missing.md) [bad](../README.md#no-such-heading) ![x](nope.png)\n";
  assert.deepEqual(brokenLinks("docs/probe.md", doc, (f) => (f === "docs/probe.md" ? doc : readRepoFile(f))), [
    "docs/probe.md: #three (no heading #three in docs/probe.md)",
    "docs/probe.md: missing.md (no file docs/missing.md)",
    "docs/probe.md: ../README.md#no-such-heading (no heading #no-such-heading in README.md)",
    "docs/probe.md: nope.png (no file docs/nope.png)",
  ]);
});

test("issue 30 docs/architecture.md's folder graph is the one dependency-cruiser draws from src/ today", async () => {
  const committed = readFileSync(architectureDoc, "utf8");
  assert.equal(committed, withGraph(committed, await folderGraph()), "stale: run `npm run docs:graph`");
});
