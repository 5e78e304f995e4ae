const bearerPattern = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/** The token of an `Authorization: Bearer <token>` header, or null. */
export function bearerToken(header: string | string[] | undefined): string | null {
  return typeof header === "string" ? (bearerPattern.exec(header)?.[1] ?? null) : null;
}
