import { createHash } from "node:crypto";
import type { ChatMessage } from "../engine.ts";

/**
 * The affinity key of a chat: what identifies its conversation, not its turn. It hashes the messages up to and
 * including the first user message (the system prompt, if any, and the opening question or document), so every
 * later turn of the conversation, which only appends, has the same key, while conversations that share only a
 * system prompt do not. Only the OpenAI-level messages go in: nothing depends on the upstream's protocol, its
 * engine or its chat template, so every front replica and every kind of pool computes the same key.
 *
 * Returns a position on the 32-bit hash ring. `salt` (a route's sticky split puts the account there) gives the same
 * conversation of another caller an independent position.
 */
export function conversationKey(messages: readonly ChatMessage[], salt = ""): number {
  const hash = createHash("sha256");
  if (salt) hash.update(salt);
  for (const message of messages) {
    hash.update(`\u0000${message.role}\u0000`);
    if (typeof message.content === "string") hash.update(message.content);
    else if (message.content !== null) {
      for (const part of message.content) {
        if (part.type === "text") hash.update(`\u0001${part.text}`);
        else hash.update("\u0002").update(part.data);
      }
    }
    if (message.role === "user") break;
  }
  return hash.digest().readUInt32BE(0);
}
