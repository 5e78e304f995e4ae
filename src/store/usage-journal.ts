import { randomUUID } from "node:crypto";
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, unlinkSync, writeSync } from "node:fs";
import path from "node:path";
import type { UsageEvent } from "./usage-sink.ts";

/** A recorded event and the UTC day it counts on. */
export type JournalEvent = UsageEvent & { day: string };

/** Journal files a server of this process has open (tests run several servers, some on one data dir, in one process). */
const openHere = new Set<string>();

const segmentName = /^(open|batch)-(\d+)-([\w-]+)\.jsonl$/;

function alive(pid: number): boolean {
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

function readEvents(file: string): JournalEvent[] {
  const events: JournalEvent[] = [];
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (!line) continue;
    try {
      events.push(JSON.parse(line) as JournalEvent);
    } catch {
      // A line cut by the kill itself: that one request's usage is the loss (one write of about 200 bytes).
    }
  }
  return events;
}

/**
 * Issue 47: usage is appended to a file in the data dir as it is recorded, before the usage recorder's next flush
 * writes it to the database, so a replica killed with -9 loses none of it. Each process appends to its own open
 * segment; a flush turns that segment into its batch's file (`batch-PID-ID.jsonl`, ID the batch's id in the
 * database) and opens the next; the file is removed once the database has the batch. At start, a server claims the
 * segments of processes that are gone (renamed to its own pid: one claimant wins) and writes them under their
 * batch's id, which the database counts once (usage.repo.ts), so a batch written just before the kill is not
 * counted twice. The append is a plain write (page cache): it survives the process, not the machine.
 */
export class UsageJournal {
  private fd = -1;
  private file = "";

  private constructor(private readonly dir: string) {}

  /** Opens this process's journal in `dir`; returns it with the batches left by processes that are gone. */
  static open(dir: string): { journal: UsageJournal; recovered: { id: string; events: JournalEvent[] }[] } {
    mkdirSync(dir, { recursive: true });
    const journal = new UsageJournal(dir);
    const recovered = journal.claimOrphans();
    journal.openSegment();
    return { journal, recovered };
  }

  append(event: JournalEvent): void {
    writeSync(this.fd, JSON.stringify(event) + "\n");
  }

  /** The events appended since the last seal become batch `id`'s file; appends go to a new segment. */
  seal(id: string): void {
    closeSync(this.fd);
    openHere.delete(this.file);
    renameSync(this.file, this.batchFile(id));
    openHere.add(this.batchFile(id));
    this.openSegment();
  }

  /** Batch `id` is in the database: its file goes. */
  written(id: string): void {
    const file = this.batchFile(id);
    openHere.delete(file);
    try {
      unlinkSync(file);
    } catch {
      // Already gone.
    }
  }

  /** After the last flush: the open segment holds nothing the database lacks. */
  close(): void {
    closeSync(this.fd);
    openHere.delete(this.file);
    if (readEvents(this.file).length === 0) unlinkSync(this.file);
  }

  private batchFile(id: string): string {
    return path.join(this.dir, `batch-${process.pid}-${id}.jsonl`);
  }

  private openSegment(): void {
    this.file = path.join(this.dir, `open-${process.pid}-${randomUUID()}.jsonl`);
    this.fd = openSync(this.file, "a");
    openHere.add(this.file);
  }

  private claimOrphans(): { id: string; events: JournalEvent[] }[] {
    const recovered: { id: string; events: JournalEvent[] }[] = [];
    for (const name of readdirSync(this.dir)) {
      const match = segmentName.exec(name);
      const from = path.join(this.dir, name);
      if (!match || openHere.has(from) || alive(Number(match[2]))) continue;
      // An open segment was never sent: it gets a batch id now. A batch's file keeps its id (it may be written already).
      const id = match[1] === "batch" ? match[3]! : randomUUID();
      const to = this.batchFile(id);
      try {
        renameSync(from, to);
      } catch {
        continue; // Another server claimed it first.
      }
      openHere.add(to);
      recovered.push({ id, events: readEvents(to) });
    }
    return recovered;
  }
}
