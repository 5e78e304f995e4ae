import type { Check } from "./checks.ts";
import type { FaultWindow } from "./faults.ts";
import type { Sample } from "./sampler.ts";

const width = 900;
const height = 180;
const colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"];
const escape = (s: string) => s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]!);

interface Series {
  label: string;
  points: { t: number; y: number }[];
}

/** One line chart as inline SVG, the fault windows shaded, time in minutes from `t0`. */
function chart(title: string, unit: string, series: Series[], windows: FaultWindow[], t0: number, t1: number): string {
  const all = series.flatMap((s) => s.points).filter((p) => Number.isFinite(p.y));
  const yMax = Math.max(1e-9, ...all.map((p) => p.y)) * 1.1;
  const x = (t: number) => 50 + ((t - t0) / Math.max(1, t1 - t0)) * (width - 60);
  const y = (v: number) => height - 20 - (v / yMax) * (height - 40);
  const shades = windows.map((w) => `<rect x="${x(w.start)}" y="10" width="${Math.max(2, x(w.end) - x(w.start))}" height="${height - 30}" fill="#f4c7c3" opacity="0.6"><title>${escape(w.name)}</title></rect>`).join("");
  const lines = series
    .map((s, i) => {
      const d = s.points.filter((p) => Number.isFinite(p.y)).map((p, j) => `${j === 0 ? "M" : "L"}${x(p.t).toFixed(1)},${y(p.y).toFixed(1)}`).join(" ");
      return `<path d="${d}" fill="none" stroke="${colors[i % colors.length]}" stroke-width="1.5"/><text x="${60 + i * 170}" y="${height - 4}" font-size="11" fill="${colors[i % colors.length]}">${escape(s.label)}</text>`;
    })
    .join("");
  const minutes = Math.ceil((t1 - t0) / 60_000);
  const step = Math.max(1, Math.ceil(minutes / 12));
  const ticks = Array.from({ length: Math.floor(minutes / step) + 1 }, (_, i) => i * step)
    .map((m) => `<text x="${x(t0 + m * 60_000)}" y="${height - 8 + 0}" font-size="9" fill="#666" text-anchor="middle" dy="-8">${m}′</text>`)
    .join("");
  return `<figure><figcaption>${escape(title)} (max ${yMax >= 100 ? (yMax / 1.1).toFixed(0) : (yMax / 1.1).toFixed(2)} ${escape(unit)})</figcaption><svg width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img"><rect width="${width}" height="${height}" fill="#fff" stroke="#ddd"/>${shades}<line x1="50" y1="${height - 20}" x2="${width - 10}" y2="${height - 20}" stroke="#999"/><text x="4" y="${y(yMax / 1.1)}" font-size="9" fill="#666">${yMax >= 100 ? (yMax / 1.1).toFixed(0) : (yMax / 1.1).toFixed(2)}</text>${ticks}${lines}</svg></figure>`;
}

const mb = 1024 * 1024;

export interface ReportInput {
  title: string;
  machine: string;
  startedAt: number;
  endedAt: number;
  samples: Sample[];
  windows: FaultWindow[];
  checks: Check[];
  notes: string[];
}

/** The self-contained report: the verdicts, the fault log, and one chart per sampled quantity per replica. */
export function renderReport(r: ReportInput): string {
  const replicas = [...new Set(r.samples.map((s) => s.replica))].sort();
  const per = (label: string, pick: (s: Sample) => number) => replicas.map((rep) => ({ label: `replica ${rep} ${label}`, points: r.samples.filter((s) => s.replica === rep).map((s) => ({ t: s.t, y: pick(s) })) }));
  const statuses = [...new Set(r.samples.flatMap((s) => Object.keys(s.rps)))].sort();
  const rpsSeries = statuses.map((status) => ({ label: `${status}/s (both)`, points: r.samples.filter((s) => s.replica === replicas[0]).map((s) => ({ t: s.t, y: r.samples.filter((o) => Math.abs(o.t - s.t) < 5000).reduce((sum, o) => sum + (o.rps[status] ?? 0), 0) })) }));
  const charts = [
    chart("RSS", "MB", [...per("RSS", (s) => s.rss / mb), ...per("anonymous", (s) => s.rssAnon / mb), ...per("file-backed", (s) => s.rssFile / mb)], r.windows, r.startedAt, r.endedAt),
    chart("Heap used", "MB", per("heap", (s) => s.heapUsed / mb), r.windows, r.startedAt, r.endedAt),
    // 0 until a process's first major GC: no point.
    chart("Heap and RSS just after a full GC the sampler forced (the leak readings)", "MB", [...per("heap after full GC", (s) => s.heapAfterFullGc / mb), ...per("RSS after full GC", (s) => s.rssAfterFullGc / mb)], r.windows, r.startedAt, r.endedAt),
    chart("Heap and RSS after the last major GC", "MB", [...per("heap after GC", (s) => s.heapAfterGc / mb || Number.NaN), ...per("RSS after GC", (s) => s.rssAfterGc / mb || Number.NaN)], r.windows, r.startedAt, r.endedAt),
    chart("V8 heap held, and compiled code", "MB", [...per("heap total", (s) => s.heapTotal / mb || Number.NaN), ...per("code", (s) => s.codeSpace / mb || Number.NaN), ...per("young", (s) => s.newSpaceTotal / mb || Number.NaN), ...per("old", (s) => s.oldSpaceTotal / mb || Number.NaN), ...per("workers' heaps", (s) => s.workerHeapTotal / mb || Number.NaN)], r.windows, r.startedAt, r.endedAt),
    chart("External memory", "MB", per("external", (s) => s.external / mb), r.windows, r.startedAt, r.endedAt),
    chart("Event-loop delay p99", "ms", per("p99", (s) => s.loopP99Ms), r.windows, r.startedAt, r.endedAt),
    chart("Open file descriptors (/proc/PID/fd)", "fds", per("fds", (s) => s.fds), r.windows, r.startedAt, r.endedAt),
    chart("Active handles", "handles", per("handles", (s) => s.handles), r.windows, r.startedAt, r.endedAt),
    chart("Requests per second by status", "req/s", rpsSeries, r.windows, r.startedAt, r.endedAt),
  ].join("\n");
  const rows = r.checks.map((c) => `<tr class="${c.pass ? "pass" : "fail"}"><td>${c.pass ? "PASS" : "FAIL"}</td><td>${escape(c.name)}</td><td>${escape(c.detail)}</td></tr>`).join("\n");
  const faults = r.windows.map((w) => `<tr><td>${new Date(w.start).toISOString()}</td><td>${((w.start - r.startedAt) / 60_000).toFixed(1)}′–${((w.end - r.startedAt) / 60_000).toFixed(1)}′</td><td>${escape(w.name)}</td></tr>`).join("\n");
  const failed = r.checks.filter((c) => !c.pass).length;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escape(r.title)}</title>
<style>body{font:14px system-ui,sans-serif;margin:2em;max-width:1000px}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}.pass td:first-child{color:#1a7f37;font-weight:bold}.fail td:first-child{color:#cf222e;font-weight:bold}figure{margin:1em 0}figcaption{font-weight:600}</style></head>
<body><h1>${escape(r.title)}</h1>
<p>${escape(r.machine)}<br>${new Date(r.startedAt).toISOString()} → ${new Date(r.endedAt).toISOString()}: <strong>${failed === 0 ? "every check passed" : `${failed} check(s) failed`}</strong></p>
<ul>${r.notes.map((n) => `<li>${escape(n)}</li>`).join("")}</ul>
<h2>Checks</h2><table><tr><th></th><th>check</th><th>measured</th></tr>${rows}</table>
<h2>Faults (shaded in the charts)</h2><table><tr><th>start (UTC)</th><th>window</th><th>fault</th></tr>${faults}</table>
<h2>Samples every 10 s, per replica</h2>${charts}
</body></html>
`;
}
