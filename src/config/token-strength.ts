import { commonWords } from "./common-words.ts";

/** The least a secret that opens the admin API (or /metrics) must carry. */
export const minTokenBits = 128;
export const generateTokenHint = "generate one with `openssl rand -base64 32`";

const longestWord = Math.max(...[...commonWords].map((w) => w.length));

/** How many characters a token's character classes let each position be. */
function poolSize(token: string): number {
  let pool = 0;
  if (/[a-z]/.test(token)) pool += 26;
  if (/[A-Z]/.test(token)) pool += 26;
  if (/[0-9]/.test(token)) pool += 10;
  if (/[^A-Za-z0-9]/.test(token)) pool += 33;
  return pool;
}

/** Length of the run of one repeated character, or of a +1/-1 sequence ("abcd", "4321"), starting at `from`. */
function patternLength(token: string, from: number): number {
  let repeat = 1;
  while (from + repeat < token.length && token[from + repeat] === token[from]) repeat++;
  let sequence = 1;
  const step = token.charCodeAt(from + 1) - token.charCodeAt(from);
  if (step === 1 || step === -1) {
    while (from + sequence < token.length && token.charCodeAt(from + sequence) - token.charCodeAt(from + sequence - 1) === step) sequence++;
  }
  return Math.max(repeat, sequence);
}

/**
 * An estimate of a token's entropy in bits, the cheapest way to produce it: each character drawn from the pool its
 * character classes give (length × log2(pool)), except that a common word costs only the choice of one word in
 * the list, a run of one character or a sequence costs its first character and its length, and a token that
 * repeats one unit ("abcabcabc") costs its unit and the count.
 */
export function estimateTokenBits(token: string): { bits: number; usedWords: boolean } {
  const period = (token + token).indexOf(token, 1);
  if (period > 0 && period < token.length) {
    const unit = estimateTokenBits(token.slice(0, period));
    return { bits: unit.bits + Math.log2(token.length / period), usedWords: unit.usedWords };
  }
  const perChar = Math.log2(Math.max(poolSize(token), 2));
  const perWord = Math.log2(commonWords.size) + 1;
  const best: { bits: number; usedWords: boolean }[] = [{ bits: 0, usedWords: false }];
  for (let i = 1; i <= token.length; i++) best[i] = { bits: Infinity, usedWords: false };
  const relax = (to: number, from: number, cost: number, word: boolean) => {
    const bits = best[from].bits + cost;
    if (bits < best[to].bits) best[to] = { bits, usedWords: word || best[from].usedWords };
  };
  const lower = token.toLowerCase();
  for (let i = 0; i < token.length; i++) {
    relax(i + 1, i, perChar, false);
    const run = patternLength(token, i);
    for (let len = 4; len <= run; len++) relax(i + len, i, perChar + Math.log2(len), false);
    for (let len = 4; len <= Math.min(longestWord, token.length - i); len++) {
      if (commonWords.has(lower.slice(i, i + len))) relax(i + len, i, perWord, true);
    }
  }
  return best[token.length];
}

/** Why `token` is too weak to guard the admin API, or null when it carries at least 128 bits. */
export function weakTokenReason(token: string): string | null {
  if (new Set(token).size === 1) return "it is one repeated character";
  const { bits, usedWords } = estimateTokenBits(token);
  if (bits >= minTokenBits) return null;
  const about = `about ${Math.floor(bits)} bits of entropy, at least ${minTokenBits} are needed`;
  if (usedWords) return `it is made of common words (${about})`;
  return `it has ${about} (${token.length} characters from a set of ${poolSize(token)})`;
}
