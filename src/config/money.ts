/**
 * Money as integer micro-units (1 = 0.000001 of the currency), never floats (issue 32). A price is given per
 * million tokens, so a price of `p` micro-units per million tokens costs `tokens × p / 1,000,000` micro-units: the
 * product is exact (BigInt), and only the final division rounds.
 */

/** Micro-units in one unit of the currency. */
export const microPerUnit = 1_000_000;

/**
 * Parses a config amount (a number or a decimal string, at most 6 decimals) into micro-units, exactly: the
 * number's shortest decimal form is read as text (0.15 → "0.15" → 150000), never multiplied as a float.
 */
export function parseMoney(value: number | string, where: string): number {
  const text = typeof value === "number" ? numberText(value) : value.trim();
  const match = /^([0-9]+)(?:\.([0-9]{1,6}))?$/.exec(text);
  if (!match) throw new Error(`${where}: "${text}" is not an amount with at most 6 decimals (e.g. 0.15, 12, "0.000150")`);
  const micro = BigInt(match[1]) * BigInt(microPerUnit) + BigInt((match[2] ?? "").padEnd(6, "0"));
  if (micro > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error(`${where}: ${text} is too large`);
  return Number(micro);
}

/** A float's shortest round-trip decimal form, without exponent notation (1e-7 has more than 6 decimals anyway). */
function numberText(value: number): string {
  const text = String(value);
  if (!/e/i.test(text)) return text;
  return value.toFixed(20).replace(/0+$/, "").replace(/\.$/, "");
}

/** Micro-units as a decimal string with all 6 decimals: 150 → "0.000150". */
export function formatMoney(micro: number): string {
  const sign = micro < 0 ? "-" : "";
  const abs = BigInt(Math.abs(Math.trunc(micro)));
  const unit = BigInt(microPerUnit);
  return `${sign}${abs / unit}.${String(abs % unit).padStart(6, "0")}`;
}

/** A model's prices, micro-units per million tokens. */
export interface Pricing {
  input: number;
  output: number;
}

/**
 * The exact cost of some tokens in micro-units, rounded once: half up (`round`, for reported spend), or up
 * (`ceil`, for a reservation, so it never under-reserves).
 */
export function costMicro(pricing: Pricing | null, promptTokens: number, completionTokens: number, rounding: "round" | "ceil" = "round"): number {
  if (!pricing) return 0;
  const scaled = BigInt(Math.max(0, Math.trunc(promptTokens))) * BigInt(pricing.input) + BigInt(Math.max(0, Math.trunc(completionTokens))) * BigInt(pricing.output);
  const million = 1_000_000n;
  const quotient = scaled / million;
  const remainder = scaled % million;
  if (remainder === 0n) return Number(quotient);
  if (rounding === "ceil") return Number(quotient + 1n);
  return Number(remainder * 2n >= million ? quotient + 1n : quotient);
}

/** A usage line's spend: exact micro-units (the line's tokens × its model's prices, rounded half up once), as a decimal too. */
export function spendOf(
  config: { models: readonly { id: string; pricing: Pricing | null }[]; currency: string },
  line: { model: string; promptTokens: number; completionTokens: number },
): { spendMicros: number; spend: string; currency: string } {
  const pricing = config.models.find((m) => m.id === line.model)?.pricing ?? null;
  const spendMicros = costMicro(pricing, line.promptTokens, line.completionTokens, "round");
  return { spendMicros, spend: formatMoney(spendMicros), currency: config.currency };
}
