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

export function resample(input: Float32Array, fromRate: number, toRate: number, options: ResampleOptions = {}): Float32Array {
  if (!Number.isFinite(fromRate) || !Number.isFinite(toRate) || fromRate <= 0 || toRate <= 0) {
    throw new RangeError(`invalid sample rates ${fromRate} -> ${toRate}`);
  }
  if (fromRate === toRate) return input.slice();
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

  // table[p][k]: weight of input sample (base - halfWidth + 1 + k) for fractional offset p / phases.
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

  const outLength = Math.floor((input.length * up) / down);
  const out = new Float32Array(outLength);
  const n = input.length;
  for (let o = 0; o < outLength; o++) {
    const pos = o * down; // position in units of 1/up input samples
    const base = Math.floor(pos / up);
    const rem = pos - base * up;
    const p = phases === up ? rem : Math.min(phases - 1, Math.round((rem / up) * phases));
    const row = p * taps;
    const first = base - halfWidth + 1;
    let acc = 0;
    if (first >= 0 && first + taps <= n) {
      for (let k = 0; k < taps; k++) acc += table[row + k] * input[first + k];
    } else {
      for (let k = 0; k < taps; k++) {
        const idx = first + k;
        if (idx >= 0 && idx < n) acc += table[row + k] * input[idx];
      }
    }
    out[o] = acc;
  }
  return out;
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
