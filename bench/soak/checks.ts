import { floorSlopePerSecond, shuffledFloorSlopeBand } from "../../harness/floor-slope.ts";
import type { FaultWindow } from "./faults.ts";
import type { Sample } from "./sampler.ts";

/** One client request as its client recorded it (bench/soak/clients/soak-client.mjs). */
export interface RequestRecord {
  client: string;
  t: number;
  ms: number;
  route: string;
  keyId?: string;
  status: number | "network";
  prompt?: number;
  completion?: number | null;
  broken?: string;
  bound?: number;
  envelope?: boolean;
  code?: string;
  limit?: number;
  violation?: boolean;
  batch?: boolean;
  missing?: number;
  repeated?: number;
  batchStatus?: string;
}

export interface Check {
  name: string;
  pass: boolean;
  detail: string;
}

export interface UsageByKey {
  keyId: string;
  requests: number;
  prompt: number;
  completion: number;
}

const mb = 1024 * 1024;
/** Whether a request ran during a fault's window or its grace (a request in flight when the fault began counts). */
const during = (r: { t: number; ms: number }, w: FaultWindow, graceMs: number) => r.t + r.ms >= w.start && r.t <= w.end + graceMs;
const percentile = (xs: number[], p: number) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN;
};

/** Least-squares slope of y over t, per second. */
export function slopePerSecond(points: { t: number; y: number }[]): number {
  if (points.length < 3) return Number.NaN;
  const n = points.length;
  const mt = points.reduce((s, p) => s + p.t, 0) / n;
  const my = points.reduce((s, p) => s + p.y, 0) / n;
  const num = points.reduce((s, p) => s + (p.t - mt) * (p.y - my), 0);
  const den = points.reduce((s, p) => s + (p.t - mt) ** 2, 0);
  return den === 0 ? 0 : (num / den) * 1000;
}

/** A replica restarted mid-run loads its models on its first requests: its first minutes are not a trend. */
const warmUpMs = 120_000;
/** After a fault (or the batch) ends, memory is left to settle this long before it counts again. */
const settleMs = 60_000;
/** A stretch between two faults shorter than this gives no slope. */
const shortestStretchMs = 60_000;

/**
 * No leak: RSS and heap just after a full GC (forced by the sampler in the worker threads and then the main thread, so
 * that each reading is taken in the same state: decisions 0044, 0048), over the last `windowMs` of the traffic, rise
 * less than 1 MB per 10 minutes, for each replica process that lived through most of that window (after its
 * warm-up). One line is fitted to every reading of the window outside the faults (each fault, and the batch, from its
 * start until `settleMs` after its end): the issue's "fitted slope over the last 40 minutes". It is the slope of their
 * floor (harness/floor-slope.ts, the 10% quantile line; decision 0046): a reading holds what the requests in flight
 * hold at that moment, noise on one side only, while a leak raises the floor. Each figure comes with the band the same
 * fit gives the same readings shuffled (decision 0048): how much of it noise alone could make.
 */
export function leakChecks(samples: Sample[], trafficEnd: number, windowMs: number, windowLabel: string, transients: { start: number; end: number }[]): Check[] {
  const from = trafficEnd - windowMs;
  const checks: Check[] = [];
  const quiet = (t: number) => !transients.some((w) => t >= w.start && t <= w.end + settleMs);
  for (const pid of new Set(samples.map((s) => s.pid))) {
    const born = samples.find((s) => s.pid === pid)!.t;
    const warm = born < samples[0]!.t + 5_000 ? born : born + warmUpMs;
    const own = samples.filter((s) => s.pid === pid && s.t >= Math.max(from, warm) && s.t <= trafficEnd && Number.isFinite(s.heapAfterFullGc) && Number.isFinite(s.rssAfterFullGc));
    const replica = samples.find((s) => s.pid === pid)!.replica;
    const covered = own.length > 0 ? own.at(-1)!.t - own[0]!.t : 0;
    if (covered < windowMs / 2) continue;
    // Consecutive quiet samples, split wherever a fault (or its settling) intervenes.
    const stretches: Sample[][] = [];
    let current: Sample[] = [];
    for (const s of own) {
      if (quiet(s.t)) current.push(s);
      else if (current.length > 0) (stretches.push(current), (current = []));
    }
    if (current.length > 0) stretches.push(current);
    const usable = stretches.filter((st) => st.length >= 3 && st.at(-1)!.t - st[0]!.t >= shortestStretchMs);
    const span = usable.reduce((n, st) => n + (st.at(-1)!.t - st[0]!.t), 0);
    for (const field of ["heapAfterFullGc", "rssAfterFullGc"] as const) {
      const points = usable.flatMap((st) => st.map((x) => ({ t: x.t, y: x[field] })));
      const toPerTen = (perSecond: number) => (perSecond * 600) / mb;
      const perTen = span > 0 ? toPerTen(floorSlopePerSecond([points])) : Number.NaN;
      const noise = span > 0 ? shuffledFloorSlopeBand(points) : { low: Number.NaN, high: Number.NaN };
      // The least-squares figure the earlier hours judged by, for comparison: it follows the requests in flight too.
      const leastSquares = span > 0 ? toPerTen(slopePerSecond(points)) : Number.NaN;
      // 1 MB per 10 min cannot be told from a GC's noise in less than 10 minutes: a shorter span may rise 1 MB in all.
      const rise = (perTen * span) / 600_000;
      const pass = span >= 600_000 ? perTen < 1 : rise < 1;
      checks.push({
        name: `no leak: replica ${replica} (pid ${pid}) ${field === "heapAfterFullGc" ? "heap" : "RSS"} after a full GC, ${windowLabel}`,
        pass,
        detail: `${perTen.toFixed(2)} MB per 10 min (${rise.toFixed(2)} MB in all; least squares ${leastSquares.toFixed(2)}; shuffled, the same readings give ${toPerTen(noise.low).toFixed(2)} to ${toPerTen(noise.high).toFixed(2)}) over ${usable.length} fault-free stretches (${(span / 60_000).toFixed(1)} min, ${points.length} samples; limit < 1 MB per 10 min${span < 600_000 ? ", < 1 MB in all under 10 min" : ""})`,
      });
    }
  }
  return checks;
}

/**
 * Open descriptors once idle at the end no more than 5% above the idle start, per replica slot (fewer is no leak:
 * the start still holds the warm-up's keep-alive connections).
 */
export function fdChecks(start: Sample[], end: Sample[]): Check[] {
  return end.map((e) => {
    const s = start.find((x) => x.replica === e.replica);
    const ratio = s ? e.fds / s.fds : Number.NaN;
    return { name: `descriptors: replica ${e.replica} idle at the end vs the start`, pass: ratio - 1 <= 0.05, detail: `${s?.fds} → ${e.fds} (${((ratio - 1) * 100).toFixed(1)}%; limit +5%)${s && s.pid !== e.pid ? " (restarted: the start is its predecessor's)" : ""}` };
  });
}

const inProcess = (route: string) => /\b(stories|embeddings|rerank|transcription)\b/.test(route) || route.startsWith("flood");

/**
 * No 5xx (nor a connection failure) outside the fault windows, none from an in-process model except while the
 * database is away, and every non-2xx (and every error event) in the §7 envelope.
 */
export function errorChecks(records: RequestRecord[], windows: FaultWindow[], graceMs: number): Check[] {
  const failed = (r: RequestRecord) => r.status === "network" || (typeof r.status === "number" && r.status >= 500) || r.broken === "error-event" || r.broken === "cut" || r.broken === "network";
  const outside = records.filter((r) => r.route !== "batch" && failed(r) && !windows.some((w) => during(r, w, graceMs)));
  const localWrong = records.filter((r) => typeof r.status === "number" && r.status >= 500 && inProcess(r.route) && !windows.some((w) => w.kind === "database" && during(r, w, graceMs)));
  const badEnvelope = records.filter((r) => r.envelope === false);
  const describe = (rs: RequestRecord[]) => {
    const byKind = new Map<string, number>();
    for (const r of rs) {
      const kind = `${r.route} ${r.status}${r.broken ? ` ${r.broken}` : ""}${r.code ? ` ${r.code}` : ""}`;
      byKind.set(kind, (byKind.get(kind) ?? 0) + 1);
    }
    return [...byKind].map(([k, n]) => `${n} × ${k}`).slice(0, 8).join("; ") || "none";
  };
  return [
    { name: "no 5xx or failed request outside the fault windows", pass: outside.length === 0, detail: `${outside.length} of ${records.length} (grace ${graceMs / 1000} s after each fault): ${describe(outside)}` },
    { name: "in-process models never answer 5xx (but for new keys while the database is away)", pass: localWrong.length === 0, detail: describe(localWrong) },
    { name: "every non-2xx and every error event in the §7 envelope", pass: badEnvelope.length === 0, detail: `${records.filter((r) => r.envelope !== undefined).length} checked; wrong: ${describe(badEnvelope)}` },
  ];
}

/**
 * The usage table per key against the clients' own sums of the `usage` they received. A key all of whose requests
 * completed must match exactly; one with requests cut short (aborted, an error event, a connection lost) is charged
 * at least what completed and at most that plus each cut request's bound.
 */
export function usageChecks(records: RequestRecord[], table: UsageByKey[]): Check[] {
  const keys = new Map<string, { prompt: number; completion: number; completionKnown: boolean; cut: number; bound: number }>();
  for (const r of records) {
    if (!r.keyId) continue;
    const k = keys.get(r.keyId) ?? { prompt: 0, completion: 0, completionKnown: true, cut: 0, bound: 0 };
    keys.set(r.keyId, k);
    if (r.status === 200 && !r.broken && r.prompt !== undefined) {
      k.prompt += r.prompt;
      if (r.completion === null) k.completionKnown = false;
      else k.completion += r.completion ?? 0;
    } else if (r.broken || r.status === "network") {
      k.cut++;
      k.bound += r.bound ?? 0;
    }
  }
  const checks: Check[] = [];
  let exact = 0;
  const exactMismatch: string[] = [];
  for (const [keyId, k] of keys) {
    const row = table.find((u) => u.keyId === keyId) ?? { keyId, requests: 0, prompt: 0, completion: 0 };
    const charged = row.prompt + (k.completionKnown ? row.completion : 0);
    const received = k.prompt + k.completion;
    if (k.cut === 0) {
      exact++;
      if (charged !== received) exactMismatch.push(`${keyId}: table ${row.prompt}+${k.completionKnown ? row.completion : "?"}, clients ${k.prompt}+${k.completionKnown ? k.completion : "?"}`);
    } else {
      const ok = charged >= received && charged <= received + k.bound;
      checks.push({ name: `usage of ${keyId} (${k.cut} requests cut short)`, pass: ok, detail: `table ${charged} tokens, clients received ${received}, cut requests bound ${k.bound}` });
    }
  }
  checks.unshift({ name: "usage per key == the clients' own sums (keys whose every request completed)", pass: exactMismatch.length === 0, detail: `${exact} keys; mismatches: ${exactMismatch.slice(0, 5).join("; ") || "none"}` });
  return checks;
}

/** Spend equals tokens × the configured prices (per million tokens), per usage row, to the micro-unit. */
export function spendCheck(rows: { model: string; promptTokens: number; completionTokens: number; spendMicros: number }[], prices: Map<string, { input: number; output: number }>): Check {
  const wrong = rows.filter((r) => {
    const p = prices.get(r.model) ?? { input: 0, output: 0 };
    return Math.abs(r.spendMicros - (r.promptTokens * p.input + r.completionTokens * p.output)) > 1;
  });
  return { name: "spend == tokens × prices", pass: rows.length > 0 && wrong.length === 0, detail: `${rows.length} usage rows; wrong: ${wrong.map((r) => `${r.model} ${r.spendMicros}`).slice(0, 5).join(", ") || "none"}` };
}

export function batchCheck(records: RequestRecord[]): Check {
  const batch = records.find((r) => r.route === "batch");
  if (!batch) return { name: "the batch has every line exactly once", pass: false, detail: "the batch did not finish" };
  return { name: "the batch has every line exactly once", pass: batch.batchStatus === "completed" && batch.missing === 0 && batch.repeated === 0, detail: `${batch.batchStatus}; missing ${batch.missing}, twice or more ${batch.repeated}; ${Math.round(batch.ms / 1000)} s` };
}

/** After each fault ends, the p95 of the next window is within 1.5× that of the window before the fault began. */
export function recoveryChecks(records: RequestRecord[], windows: FaultWindow[], windowMs: number, label: string): Check[] {
  // Transcriptions (a few, ten times slower) would make the p95 theirs.
  const timed = records.filter((r) => r.status === 200 && !r.broken && !["batch", "transcription"].includes(r.route) && !r.route.startsWith("console") && !r.route.startsWith("flood"));
  return windows.map((w) => {
    const before = timed.filter((r) => r.t >= w.start - windowMs && r.t < w.start).map((r) => r.ms);
    const after = timed.filter((r) => r.t >= w.end && r.t < w.end + windowMs).map((r) => r.ms);
    const ratio = percentile(after, 0.95) / percentile(before, 0.95);
    return { name: `recovery after "${w.name}": p95 of the ${label} after within 1.5× the ${label} before`, pass: ratio <= 1.5, detail: `${percentile(before, 0.95)} ms (${before.length}) → ${percentile(after, 0.95)} ms (${after.length}): ${ratio.toFixed(2)}×` };
  });
}
