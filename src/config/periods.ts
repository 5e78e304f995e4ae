/** A UTC calendar period of a quota or budget (issue 32): its id, its first and last day, and when it ends. */
export interface CalendarPeriod {
  /** "2026-11-26" for a day, "2026-11" for a month: part of the counter's name. */
  id: string;
  /** First and last day (YYYY-MM-DD, inclusive), as the usage table's `day`. */
  firstDay: string;
  lastDay: string;
  /** Epoch ms of the next period's start (00:00 UTC). */
  endsAt: number;
}

let cachedDay = "";
let cachedDayStart = 0;
let cachedDayEnd = 0;

/** The UTC day (YYYY-MM-DD) of `now`; a Date and its ISO string per request cost about 1% of CPU, so it is cached. */
export function utcDay(now: number = Date.now()): string {
  if (now < cachedDayStart || now >= cachedDayEnd) {
    cachedDay = new Date(now).toISOString().slice(0, 10);
    cachedDayStart = Date.parse(`${cachedDay}T00:00:00.000Z`);
    cachedDayEnd = cachedDayStart + 86_400_000;
  }
  return cachedDay;
}

export function calendarPeriod(period: "day" | "month", now: number = Date.now()): CalendarPeriod {
  const d = new Date(now);
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth();
  if (period === "day") {
    const id = d.toISOString().slice(0, 10);
    return { id, firstDay: id, lastDay: id, endsAt: Date.UTC(y, m, d.getUTCDate() + 1) };
  }
  const endsAt = Date.UTC(y, m + 1, 1);
  const first = new Date(Date.UTC(y, m, 1)).toISOString().slice(0, 10);
  const last = new Date(endsAt - 86_400_000).toISOString().slice(0, 10);
  return { id: first.slice(0, 7), firstDay: first, lastDay: last, endsAt };
}
