export interface JsonlLine {
  /** 1-based. */
  number: number;
  /** The line without its newline; null when it is longer than the bound (its bytes were not kept). */
  text: string | null;
}

const newline = 0x0a;

/**
 * The lines of a JSONL stream as its chunks arrive, numbered, holding at most `maxLineBytes` of one line in memory:
 * a longer line is reported without its text. A final newline ends the last line (it starts no empty one). Lines are
 * split on bytes and decoded whole, so a character cut between two chunks is decoded as one. (split2 has a line
 * bound too, but it drops or fails on an overlong line instead of reporting which one it was.)
 */
export async function* jsonlLines(chunks: AsyncIterable<Buffer>, maxLineBytes: number): AsyncGenerator<JsonlLine> {
  let number = 0;
  let parts: Buffer[] = [];
  let partBytes = 0;
  let overlong = false;
  const take = (piece: Buffer) => {
    if (overlong) return;
    if (partBytes + piece.length > maxLineBytes) {
      overlong = true;
      parts = [];
      return;
    }
    parts.push(piece);
    partBytes += piece.length;
  };
  const end = (): JsonlLine => {
    const text = overlong ? null : parts.length === 1 ? parts[0].toString("utf8") : Buffer.concat(parts, partBytes).toString("utf8");
    parts = [];
    partBytes = 0;
    overlong = false;
    return { number: ++number, text };
  };
  for await (const chunk of chunks) {
    let start = 0;
    for (let at = chunk.indexOf(newline, start); at !== -1; at = chunk.indexOf(newline, start)) {
      take(chunk.subarray(start, at));
      yield end();
      start = at + 1;
    }
    if (start < chunk.length) take(chunk.subarray(start));
  }
  if (partBytes > 0 || overlong) yield end();
}
