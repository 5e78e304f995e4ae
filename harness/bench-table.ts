/*
 * The format of the current figures at the top of docs/benchmarks.md. `npm run bench` prints its rows in it, so
 * updating the table is a copy, and test/docs.test.ts checks the table against it.
 */

/** What a row needs: the item, the median of its figure over the runs, their min–max, and the target. */
export interface MeasuredRow {
  item: string;
  ratio: number;
  range?: readonly [number, number];
  target: string;
}

/** Where a row was measured: the UTC date, the commit (short hash) and the bench (`npm run bench -- <bench>`). */
export interface Measurement {
  date: string;
  commit: string;
  bench: string;
}

export const currentFiguresHeader = ["item", "median (min–max)", "target", "date", "commit", "bench"] as const;

/** Three significant figures or so, as every table of docs/benchmarks.md writes them. */
export function figure(n: number): string {
  if (n === 0) return "0";
  const abs = Math.abs(n);
  return abs >= 100 ? n.toFixed(0) : abs >= 1 ? n.toFixed(2) : n.toFixed(3);
}

/** `0.914 (0.758–1.15)`, or the median alone for an item measured once. */
export function medianCell(row: Pick<MeasuredRow, "ratio" | "range">): string {
  return row.range ? `${figure(row.ratio)} (${figure(row.range[0])}–${figure(row.range[1])})` : figure(row.ratio);
}

const markdownRow = (cells: readonly string[]) => `| ${cells.join(" | ")} |`;

/** The header and the separator line of the table. */
export function currentFiguresHead(): string[] {
  return [markdownRow(currentFiguresHeader), `|${currentFiguresHeader.map(() => "---").join("|")}|`];
}

export function currentFiguresRow(row: MeasuredRow, at: Measurement): string {
  return markdownRow([row.item, medianCell(row), row.target, at.date, at.commit, at.bench]);
}

const number = String.raw`-?\d+(?:\.\d+)?`;
const cellPatterns: Record<(typeof currentFiguresHeader)[number], RegExp> = {
  item: /\S/,
  "median (min–max)": new RegExp(`^${number}(?: \\(${number}–${number}\\))?$`),
  target: /\S/,
  date: /^\d{4}-\d{2}-\d{2}$/,
  commit: /^[0-9a-f]{7,12}$/,
  bench: /^[a-z0-9-]+$/,
};

/** The cells of a line of the table, or why the line is not one `currentFiguresRow` prints. */
export function parseCurrentFiguresRow(line: string): { cells: Record<(typeof currentFiguresHeader)[number], string> } | { error: string } {
  if (!line.startsWith("| ") || !line.endsWith(" |")) return { error: `not a table row: ${line}` };
  const values = line.slice(2, -2).split(" | ");
  if (values.length !== currentFiguresHeader.length) return { error: `${values.length} cells, not ${currentFiguresHeader.length}: ${line}` };
  const cells = Object.fromEntries(currentFiguresHeader.map((name, i) => [name, values[i]!])) as Record<(typeof currentFiguresHeader)[number], string>;
  for (const name of currentFiguresHeader) {
    if (!cellPatterns[name].test(cells[name])) return { error: `${name} "${cells[name]}" is not in the printed format: ${line}` };
  }
  return { cells };
}
