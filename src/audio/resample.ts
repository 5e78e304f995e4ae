/**
 * Band-limited sample-rate conversion: a polyphase windowed-sinc (Kaiser) filter. Linear interpolation or
 * sample dropping would alias everything above the new Nyquist frequency back into the speech band;
 * this filter puts the stop band at the output Nyquist so a 10 kHz tone at 44.1 kHz is removed, not folded to 6 kHz.
 */

export interface ResampleOptions {
  /** Zero crossings of the sinc on each side, at the lower of the two rates. More = steeper transition. */
  zeroCrossings?: number;
  /** Cut-off as a share of the lower Nyquist frequency. */
  rolloff?: number;
  /** Kaiser window beta; 8.6 gives about 80 dB of stop-band attenuation. */
  beta?: number;
}

/** Largest phase table; rate pairs with a larger reduced numerator use the nearest of this many phases. */
const maxPhases = 4096;

function gcd(a: number, b: number): number {
  while (b) [a, b] = [b, a % b];
  return a;
}

/** Zeroth-order modified Bessel function of the first kind, for the Kaiser window. */
function bessel0(x: number): number {
  let sum = 1;
  let term = 1;
  const half = x / 2;
  for (let k = 1; k < 50; k++) {
    term *= (half / k) * (half / k);
    sum += term;
    if (term < sum * 1e-12) break;
  }
  return sum;
}

interface Filter {
  up: number;
  down: number;
  phases: number;
  halfWidth: number;
  taps: number;
  /** table[p * taps + k]: weight of input sample (base - halfWidth + 1 + k) for fractional offset p / phases. */
  table: Float32Array;
}

function designFilter(fromRate: number, toRate: number, options: ResampleOptions): Filter {
  if (!Number.isFinite(fromRate) || !Number.isFinite(toRate) || fromRate <= 0 || toRate <= 0) {
    throw new RangeError(`invalid sample rates ${fromRate} -> ${toRate}`);
  }
  const zeroCrossings = options.zeroCrossings ?? 16;
  const rolloff = options.rolloff ?? 0.9;
  const beta = options.beta ?? 8.6;

  const g = gcd(Math.round(fromRate), Math.round(toRate));
  const up = Math.round(toRate) / g; // L
  const down = Math.round(fromRate) / g; // M
  const phases = Math.min(up, maxPhases);

  // Filter designed in units of input samples: cut-off at rolloff * min(1, L/M) * (input Nyquist).
  const scale = Math.min(1, up / down);
  const cutoff = 0.5 * scale * rolloff; // cycles per input sample
  const halfWidth = Math.ceil(zeroCrossings / scale); // input samples on each side
  const taps = 2 * halfWidth;
  const i0beta = bessel0(beta);

  const table = new Float32Array(phases * taps);
  for (let p = 0; p < phases; p++) {
    const frac = p / phases;
    let sum = 0;
    for (let k = 0; k < taps; k++) {
      const x = k - halfWidth + 1 - frac; // distance from the output instant, in input samples
      const r = x / halfWidth;
      const window = Math.abs(r) >= 1 ? 0 : bessel0(beta * Math.sqrt(1 - r * r)) / i0beta;
      const arg = 2 * cutoff * x;
      const sinc = x === 0 ? 1 : Math.sin(Math.PI * arg) / (Math.PI * arg);
      const w = 2 * cutoff * sinc * window;
      table[p * taps + k] = w;
      sum += w;
    }
    // Unity gain at DC for every phase, so no phase-dependent ripple.
    for (let k = 0; k < taps; k++) table[p * taps + k] /= sum;
  }
  return { up, down, phases, halfWidth, taps, table };
}

/**
 * Output sample `o` of the filter over `input`, whose first element is input sample `offset`; samples outside
 * [0, known) count as silence.
 */
function outputAt(f: Filter, o: number, input: Float32Array, offset: number, known: number): number {
  const pos = o * f.down; // position in units of 1/up input samples
  const base = Math.floor(pos / f.up);
  const rem = pos - base * f.up;
  const p = f.phases === f.up ? rem : Math.min(f.phases - 1, Math.round((rem / f.up) * f.phases));
  const row = p * f.taps;
  const first = base - f.halfWidth + 1;
  let acc = 0;
  if (first >= 0 && first + f.taps <= known) {
    for (let k = 0, i = first - offset; k < f.taps; k++, i++) acc += f.table[row + k] * input[i];
  } else {
    for (let k = 0; k < f.taps; k++) {
      const idx = first + k;
      if (idx >= 0 && idx < known) acc += f.table[row + k] * input[idx - offset];
    }
  }
  return acc;
}

export function resample(input: Float32Array, fromRate: number, toRate: number, options: ResampleOptions = {}): Float32Array {
  const f = designFilter(fromRate, toRate, options);
  if (fromRate === toRate) return input.slice();
  const out = new Float32Array(Math.floor((input.length * f.up) / f.down));
  for (let o = 0; o < out.length; o++) out[o] = outputAt(f, o, input, 0, input.length);
  return out;
}

/**
 * The same conversion as `resample`, fed piece by piece: it keeps only the input the filter still needs, so a long
 * recording never has to be held at its source rate. The pieces it returns, joined, equal `resample` of the whole.
 */
export class StreamingResampler {
  private readonly f: Filter | null;
  /** Input samples from absolute index `offset` on that later outputs still need. */
  private held = new Float32Array(0);
  private offset = 0;
  private received = 0;
  private nextOutput = 0;

  constructor(
    readonly fromRate: number,
    readonly toRate: number,
    options: ResampleOptions = {},
  ) {
    this.f = fromRate === toRate ? null : designFilter(fromRate, toRate, options);
  }

  push(input: Float32Array): Float32Array {
    if (!this.f) return input.slice();
    const joined = new Float32Array(this.held.length + input.length);
    joined.set(this.held);
    joined.set(input, this.held.length);
    this.received += input.length;
    const out = this.produce(joined, false);
    this.keepFrom(joined);
    return out;
  }

  /** The outputs that need input past the end (it counts as silence, as `resample` treats it). */
  end(): Float32Array {
    if (!this.f) return new Float32Array(0);
    return this.produce(this.held, true);
  }

  private produce(input: Float32Array, final: boolean): Float32Array {
    const f = this.f!;
    const total = Math.floor((this.received * f.up) / f.down);
    let last = total;
    if (!final) {
      // The last output whose window ends within what has arrived.
      while (last > this.nextOutput && Math.floor(((last - 1) * f.down) / f.up) + f.halfWidth >= this.received) last--;
    }
    const out = new Float32Array(Math.max(0, last - this.nextOutput));
    for (let i = 0; i < out.length; i++) out[i] = outputAt(f, this.nextOutput + i, input, this.offset, this.received);
    this.nextOutput += out.length;
    return out;
  }

  private keepFrom(joined: Float32Array): void {
    const f = this.f!;
    const firstNeeded = Math.max(0, Math.floor((this.nextOutput * f.down) / f.up) - f.halfWidth + 1);
    const drop = Math.min(joined.length, Math.max(0, firstNeeded - this.offset));
    this.held = joined.slice(drop);
    this.offset += drop;
  }
}

/** Averages all channels into one. */
export function mixdown(channels: Float32Array[]): Float32Array {
  if (channels.length === 0) return new Float32Array(0);
  if (channels.length === 1) return channels[0];
  const length = Math.min(...channels.map((c) => c.length));
  const out = new Float32Array(length);
  for (const channel of channels) for (let i = 0; i < length; i++) out[i] += channel[i];
  const inv = 1 / channels.length;
  for (let i = 0; i < length; i++) out[i] *= inv;
  return out;
}
