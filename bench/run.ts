import { execFileSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { loadavg } from "node:os";
import path from "node:path";
import { currentFiguresHead, currentFiguresRow, figure, medianCell, type Measurement } from "../harness/bench-table.ts";
import type { BenchRow } from "./bench-row.ts";

/**
 * `npm run bench`: runs every bench/*.bench.ts (or those named on the command line) one after another. Each file
 * measures the service against the raw engine in the same run, so the ratios hold on a noisy machine where absolute
 * numbers do not. It prints the rows twice: in the format of the current figures at the top of docs/benchmarks.md
 * (replace the rows of the same items there), then with both sides' figures, for the dated history below them.
 */
const only = process.argv.slice(2);
const files = readdirSync(import.meta.dirname)
  .filter((f) => f.endsWith(".bench.ts"))
  // A name that is a bench's whole name runs that bench only (`batch` is not also `batching`).
  .filter((f, _, all) => only.length === 0 || only.some((o) => (all.includes(`${o}.bench.ts`) ? f === `${o}.bench.ts` : f.includes(o))))
  .sort();

/** The commit measured, marked when the tree has changes beyond it. */
function commit(): string {
  const git = (...args: string[]) => execFileSync("git", args, { cwd: import.meta.dirname, encoding: "utf8" }).trim();
  try {
    return `${git("rev-parse", "--short=7", "HEAD")}${git("status", "--porcelain", "--untracked-files=no") ? "+" : ""}`;
  } catch {
    return "unknown";
  }
}

const load = () => loadavg()[0]!.toFixed(1);
const loadAtStart = load();
const measured: { row: BenchRow; at: Measurement }[] = [];
for (const file of files) {
  process.stderr.write(`running ${file}\n`);
  const started = Date.now();
  try {
    const mod = (await import(path.join(import.meta.dirname, file))) as { default: () => Promise<BenchRow[]> };
    const rows = await mod.default();
    const at = { date: new Date().toISOString().slice(0, 10), commit: commit(), bench: file.slice(0, -".bench.ts".length) };
    measured.push(...rows.map((row) => ({ row, at })));
  } catch (err) {
    process.stderr.write(`${file} failed: ${(err as Error).stack}\n`);
    process.exitCode = 1;
  }
  process.stderr.write(`${file} took ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
}

console.log(`Current figures (docs/benchmarks.md), load average ${loadAtStart} → ${load()}:\n`);
for (const line of currentFiguresHead()) console.log(line);
for (const { row, at } of measured) console.log(currentFiguresRow(row, at));

console.log("\nBoth sides (for the history):\n");
const header = ["item", "service", "raw", "unit", "ratio (min–max)", "target"];
const table = [header, ...measured.map(({ row: r }) => [r.item, figure(r.service), figure(r.raw), r.unit, medianCell(r), r.target])];
const widths = header.map((_, i) => Math.max(...table.map((row) => row[i]!.length)));
const line = (row: string[]) => `| ${row.map((cell, i) => cell.padEnd(widths[i]!)).join(" | ")} |`;
console.log(line(header));
console.log(`|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`);
for (const row of table.slice(1)) console.log(line(row));
process.exit(process.exitCode ?? 0);
