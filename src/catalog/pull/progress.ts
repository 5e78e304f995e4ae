import type { DownloadEvents } from "./download-file.ts";

export function formatBytes(bytes: number): string {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit++;
  }
  return `${unit === 0 ? value : value.toFixed(value >= 100 ? 0 : 1)} ${units[unit]}`;
}

function formatEta(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "--:--";
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const pad = (n: number) => String(n).padStart(2, "0");
  return h > 0 ? `${h}:${pad(m)}:${pad(s % 60)}` : `${pad(m)}:${pad(s % 60)}`;
}

export interface ProgressOutput {
  /** A full line (newline added by the writer). */
  line(text: string): void;
  /** Rewrites the current terminal line (TTY only). */
  redraw?(text: string): void;
}

/**
 * Progress for one file at a time: on a TTY a redrawn bar with bytes, rate and ETA; otherwise a plain line at
 * start, every ~10% (at most every 2 s), and at the end, so logs stay readable.
 */
export function progressReporter(out: ProgressOutput, now: () => number = Date.now): DownloadEvents {
  let label = "";
  let total: number | null = null;
  let done = 0;
  let resumed = 0;
  let started = 0;
  let lastDraw = 0;
  let lastPercentLine = -1;
  let lastLineAt = 0;

  const rate = () => {
    const seconds = (now() - started) / 1000;
    return seconds > 0 ? (done - resumed) / seconds : 0;
  };
  const summary = () => {
    const r = rate();
    const eta = total !== null && r > 0 ? (total - done) / r : NaN;
    const size = total !== null ? `${formatBytes(done)} / ${formatBytes(total)}` : formatBytes(done);
    return { size, rate: `${formatBytes(r)}/s`, eta: formatEta(eta) };
  };

  return {
    start(name, size, resumedFrom) {
      label = name;
      total = size;
      done = resumedFrom;
      resumed = resumedFrom;
      started = now();
      lastDraw = 0;
      lastPercentLine = -1;
      lastLineAt = 0;
      const from = resumedFrom > 0 ? ` (resuming at ${formatBytes(resumedFrom)})` : "";
      if (!out.redraw) out.line(`pulling ${label}: ${total !== null ? formatBytes(total) : "unknown size"}${from}`);
    },
    bytes(count) {
      done += count;
      const t = now();
      if (out.redraw) {
        if (t - lastDraw < 100) return;
        lastDraw = t;
        const s = summary();
        const width = 24;
        const fraction = total ? Math.min(1, done / total) : 0;
        const filled = Math.round(fraction * width);
        const bar = total ? `[${"#".repeat(filled)}${"-".repeat(width - filled)}] ${String(Math.floor(fraction * 100)).padStart(3)}%` : "";
        out.redraw(`${label} ${bar} ${s.size}  ${s.rate}  ETA ${s.eta}`);
        return;
      }
      if (total === null || total === 0) return;
      const percent = Math.floor((done / total) * 10) * 10;
      if (percent > lastPercentLine && percent < 100 && t - lastLineAt >= 2000) {
        lastPercentLine = percent;
        lastLineAt = t;
        const s = summary();
        out.line(`pulling ${label}: ${percent}% ${s.size} ${s.rate} eta ${s.eta}`);
      }
    },
    done(name) {
      const s = summary();
      const seconds = ((now() - started) / 1000).toFixed(1);
      if (out.redraw) {
        out.redraw(`${name} ${s.size} in ${seconds}s`);
        out.line("");
      } else out.line(`pulled ${name}: ${s.size} in ${seconds}s (${s.rate})`);
    },
  };
}
