// Issue 30.9: README.md and docs/ stay navigable (every relative link and anchor resolves) and the folder graph in
// docs/architecture.md is the one dependency-cruiser draws from today's src/.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import GithubSlugger from "github-slugger";
import { marked, type Token } from "marked";
import { architectureDoc, folderGraph, withGraph } from "../scripts/architecture-graph.ts";
import { repoRoot } from "../harness/server.ts";

const docs = ["README.md", ...readdirSync(path.join(repoRoot, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];

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

test("issue 30.9 every relative link and anchor in README.md and docs/*.md resolves", () => {
  const broken = docs.flatMap((file) => brokenLinks(file, readRepoFile(file)!, readRepoFile));
  assert.deepEqual(broken, []);
  const readmeLinks = parse(readRepoFile("README.md")!).links;
  const unlinked = docs.filter((f) => f !== "README.md" && !readmeLinks.some((href) => href.split("#")[0] === f));
  assert.deepEqual(unlinked, [], "the README's table of contents links every file of docs/");
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
