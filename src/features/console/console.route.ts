import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { AppError } from "../../errors/app-error.ts";
import { assetFiles, consolePage, findConsoleDir, vendorFiles, type ConsoleFile } from "./console-files.ts";

const pageHeaders = { "x-content-type-options": "nosniff", "referrer-policy": "no-referrer", "x-frame-options": "DENY" };

/** Whether the client's cached copy is this file (If-None-Match lists ETags, or says `*`). */
function isCached(request: FastifyRequest, file: ConsoleFile): boolean {
  const tags = request.headers["if-none-match"];
  if (typeof tags !== "string") return false;
  return tags.split(",").some((tag) => {
    const t = tag.trim();
    return t === "*" || t === file.etag || t === `W/${file.etag}`;
  });
}

/** A file by name, or the §7 404 an unknown path gets; revalidated on every load, so an upgrade is seen at once. */
function sendFile(request: FastifyRequest, reply: FastifyReply, file: ConsoleFile | undefined): FastifyReply {
  if (!file) throw new AppError("model_not_found", { param: null, message: "Unknown console file." });
  reply.headers({ ...pageHeaders, etag: file.etag, "cache-control": "no-cache" });
  if (isCached(request, file)) return reply.code(304).send();
  return reply.type(file.type).send(file.body);
}

/**
 * The web console's page (spec §2.9) and its files: static ES modules served as they are (console/), and the UI
 * libraries from node_modules, all read once at start. The page carries the CSP; the login is console-login.route.ts.
 */
export default async function consoleRoutes(app: FastifyInstance): Promise<void> {
  const dir = findConsoleDir();
  const page = consolePage(dir);
  const assets = assetFiles(dir);
  const vendor = vendorFiles();

  const sendPage = async (_request: FastifyRequest, reply: FastifyReply) =>
    reply.headers({ ...pageHeaders, "content-security-policy": page.csp, "cache-control": "no-store" }).type("text/html; charset=utf-8").send(page.html);
  app.get("/console", { schema: { hide: true } }, sendPage);
  app.get("/console/", { schema: { hide: true } }, sendPage);

  app.get<{ Params: { "*": string } }>("/console/assets/*", { schema: { hide: true } }, async (request, reply) =>
    sendFile(request, reply, assets.get(request.params["*"])),
  );
  app.get<{ Params: { name: string } }>("/console/vendor/:name", { schema: { hide: true } }, async (request, reply) =>
    sendFile(request, reply, vendor.get(request.params.name)),
  );
}
