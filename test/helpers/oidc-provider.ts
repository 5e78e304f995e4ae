import { generateKeyPairSync } from "node:crypto";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { decodeJwt, importJWK, SignJWT, type JWK } from "jose";
import Provider from "oidc-provider";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { generate } from "selfsigned";
import { tempDir } from "../../harness/server.ts";

/** Who the next sign-in at the provider is: the user picks nothing, the test does (its interaction is automatic). */
export interface ProviderUser {
  email: string;
  /** Sent as `email_verified`; null leaves the claim out. Default true. */
  emailVerified?: boolean | null;
  groups?: string[];
  /** The `sub` (default `user-<email>`). */
  subject?: string;
}

export interface TestOidcProvider {
  issuer: string;
  /** The PEM file of the provider's self-signed certificate (console.oidc.caFile). */
  caFile: string;
  ca: string;
  nextUser(user: ProviderUser): void;
  /** Rewrites the claims of the next ID tokens before they leave the token endpoint, signed again with the provider's own key. */
  tamper(change: ((claims: Record<string, unknown>) => Record<string, unknown>) | null): void;
  close(): Promise<void>;
}

/**
 * A real OpenID provider (the `oidc-provider` package) over HTTPS on 127.0.0.1, with one confidential client. Its
 * login and consent interactions finish at once as the user given to `nextUser`, so a test drives the whole
 * authorization code flow over HTTP. Its signing key is the test's, so `tamper` can issue an ID token that is
 * correctly signed but names another audience, issuer or nonce.
 */
export async function startOidcProvider(client: { clientId: string; clientSecret: string; redirectUri: string }): Promise<TestOidcProvider> {
  const dir = tempDir("modelgate-oidc-");
  // Its own subject name: a client trusting this and the console's self-signed certificate picks each by its name.
  const pems = await generate([{ name: "commonName", value: "test OpenID provider" }], {
    keyType: "ec",
    curve: "P-256",
    algorithm: "sha256",
    extensions: [{ name: "subjectAltName", altNames: [{ type: 7, ip: "127.0.0.1" }] }],
  });
  const tls = { cert: pems.cert, key: pems.private, certPath: path.join(dir, "provider-ca.pem") };
  writeFileSync(tls.certPath, tls.cert);
  const jwk = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ format: "jwk" }) as JWK;
  const signingJwk = { ...jwk, kid: "test-key", alg: "RS256", use: "sig" };
  let user: ProviderUser = { email: "nobody@example.com" };
  let change: ((claims: Record<string, unknown>) => Record<string, unknown>) | null = null;

  let handler: (req: import("node:http").IncomingMessage, res: import("node:http").ServerResponse) => void = () => {};
  const server: Server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const issuer = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const provider = new Provider(issuer, {
    clients: [{ client_id: client.clientId, client_secret: client.clientSecret, redirect_uris: [client.redirectUri], grant_types: ["authorization_code"], response_types: ["code"], token_endpoint_auth_method: "client_secret_post" }],
    jwks: { keys: [signingJwk as never] },
    cookies: { keys: ["test-cookie-key-0123456789abcdef"] },
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["groups"] },
    findAccount: async (_ctx, id) => ({
      accountId: id,
      claims: async () => ({ sub: id, email: user.email, ...(user.emailVerified === null ? {} : { email_verified: user.emailVerified ?? true }), groups: user.groups ?? [] }),
    }),
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    features: { devInteractions: { enabled: false } },
    // Every client must use PKCE (the provider refuses a code request without a challenge).
    pkce: { required: () => true },
  });
  provider.use(async (ctx, next) => {
    await next();
    if (ctx.path === "/token" && change && ctx.body && typeof (ctx.body as { id_token?: string }).id_token === "string") {
      const body = ctx.body as { id_token: string };
      const claims = change(decodeJwt(body.id_token) as Record<string, unknown>);
      body.id_token = await new SignJWT(claims).setProtectedHeader({ alg: "RS256", kid: "test-key" }).sign(await importJWK(signingJwk, "RS256"));
    }
  });
  const callback = provider.callback();
  handler = async (req, res) => {
    const match = /^\/interaction\/([\w-]+)/.exec(req.url ?? "");
    if (!match) return void callback(req, res);
    try {
      const details = await provider.interactionDetails(req, res);
      if (details.prompt.name === "login") {
        await provider.interactionFinished(req, res, { login: { accountId: user.subject ?? `user-${user.email}` } }, { mergeWithLastSubmission: false });
        return;
      }
      const grant = new provider.Grant({ accountId: details.session!.accountId, clientId: details.params.client_id as string });
      grant.addOIDCScope(String(details.params.scope));
      await provider.interactionFinished(req, res, { consent: { grantId: await grant.save() } }, { mergeWithLastSubmission: true });
    } catch (err) {
      res.statusCode = 500;
      res.end(String(err));
    }
  };

  return {
    issuer,
    caFile: tls.certPath,
    ca: tls.cert,
    nextUser: (u) => (user = u),
    tamper: (c) => (change = c),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
