import { readdirSync } from "node:fs";
import path from "node:path";
import type { BenchRow } from "./bench-row.ts";

/**
 * `npm run bench`: runs every bench/*.bench.ts (or those named on the command line) one after another and prints
 * one table. Each file measures the service against the raw engine in the same run, so the ratios hold on a noisy
 * machine where absolute numbers do not.
 */
const only = process.argv.slice(2);
const files = readdirSync(import.meta.dirname)
  .filter((f) => f.endsWith(".bench.ts"))
  // A name that is a bench's whole name runs that bench only (`batch` is not also `batching`).
  .filter((f, _, all) => only.length === 0 || only.some((o) => (all.includes(`${o}.bench.ts`) ? f === `${o}.bench.ts` : f.includes(o))))
  .sort();

const rows: BenchRow[] = [];
for (const file of files) {
  process.stderr.write(`running ${file}\n`);
  const started = Date.now();
  try {
    const mod = (await import(path.join(import.meta.dirname, file))) as { default: () => Promise<BenchRow[]> };
    rows.push(...(await mod.default()));
  } catch (err) {
    process.stderr.write(`${file} failed: ${(err as Error).stack}\n`);
    process.exitCode = 1;
  }
  process.stderr.write(`${file} took ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
}

const fmt = (n: number) => (Math.abs(n) >= 100 ? n.toFixed(0) : Math.abs(n) >= 1 ? n.toFixed(2) : n.toFixed(3));
const header = ["item", "service", "raw", "unit", "ratio (min–max)", "target"];
const ratioCell = (r: BenchRow) => (r.range ? `${fmt(r.ratio)} (${fmt(r.range[0])}–${fmt(r.range[1])})` : fmt(r.ratio));
const table = [header, ...rows.map((r) => [r.item, fmt(r.service), fmt(r.raw), r.unit, ratioCell(r), r.target])];
const widths = header.map((_, i) => Math.max(...table.map((row) => row[i].length)));
const line = (row: string[]) => `| ${row.map((cell, i) => cell.padEnd(widths[i])).join(" | ")} |`;
console.log(line(header));
console.log(`|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`);
for (const row of table.slice(1)) console.log(line(row));
process.exit(process.exitCode ?? 0);
