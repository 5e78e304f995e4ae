import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

/**
 * node-llama-cpp 3.22.1's JSON-schema grammar lets an `integer` carry an exponent ("-4e-4"), so a
 * grammar-constrained tool call can produce a non-integer, which its own validator then rejects with an exception
 * mid-generation. Integers get an exponent-free grammar here, of at most 15 digits, so every integer generated is a
 * safe JavaScript integer (|n| < 2^53) and the bounds schema generators put on integers (zod's `int()` gives
 * ±(2^53 − 1)) hold (json-schema-grammar.ts accepts them). The module is the same instance the library uses
 * (same file URL), so patching its prototype once per process fixes every grammar built afterwards.
 */
/** The largest integer the patched grammar can generate (15 digits). */
export const GRAMMAR_MAX_INTEGER = 999_999_999_999_999;

export async function applyGrammarFixes(): Promise<void> {
  const entry = createRequire(import.meta.url).resolve("node-llama-cpp");
  const file = path.join(path.dirname(entry), "utils/gbnfJson/terminals/GbnfNumber.js");
  const mod = (await import(pathToFileURL(file).href)) as { GbnfNumber?: { prototype: { getGrammar(): string; allowFractional: boolean } } };
  const proto = mod.GbnfNumber?.prototype;
  if (!proto || (proto as { __modelgateFixed?: boolean }).__modelgateFixed) return;
  const original = proto.getGrammar;
  proto.getGrammar = function (this: { allowFractional: boolean }) {
    if (this.allowFractional) return original.call(this);
    return '"-"? ("0" | [1-9] [0-9]{0,14})';
  };
  (proto as { __modelgateFixed?: boolean }).__modelgateFixed = true;
}
