import { readFileSync } from "node:fs";
import { rootCertificates } from "node:tls";
import * as client from "openid-client";
import { Agent, fetch as undiciFetch } from "undici";
import type { OidcSettings } from "../config/app-config.ts";
import type { OperatorRole } from "../store/users.repo.ts";

/** What the browser carries between the redirect to the provider and the way back (in an HttpOnly cookie). */
export interface OidcTransaction {
  state: string;
  nonce: string;
  verifier: string;
  redirectUri: string;
}

export interface OidcIdentity {
  /** The ID token's `iss` and `sub`: who this is at the provider, whatever their email becomes. */
  issuer: string;
  subject: string;
  email: string;
  /** The provider says the email is the user's (`email_verified: true`); absent counts as not verified. */
  emailVerified: boolean;
  /** From the role claim, else the email lists (only for a verified email); null when neither gives one. */
  role: OperatorRole | null;
}

/** Why a sign-in through the provider was refused, in words for the operator (never a token or a claim value). */
export class OidcRefusal extends Error {}

/**
 * Operators' sign-in through OpenID Connect with openid-client: discovery of the issuer (its metadata must name the
 * same issuer), the authorization code flow with PKCE (S256), state and nonce; openid-client checks the ID token's
 * signature, issuer, audience, expiry and nonce. The provider's TLS is checked against the system's roots, plus
 * `caFile` when given (a private CA).
 */
export class OidcSignIn {
  private configuration: Promise<client.Configuration> | null = null;
  private readonly fetchImpl: client.CustomFetch | undefined;

  /** Whether the role claim or the email lists are configured: then they decide the role at every sign-in. */
  readonly decidesRoles: boolean;

  constructor(private readonly settings: OidcSettings) {
    this.decidesRoles = settings.roleClaim !== null || settings.adminEmails.length > 0 || settings.viewerEmails.length > 0;
    if (settings.caFile) {
      const agent = new Agent({ connect: { ca: [...rootCertificates, readFileSync(settings.caFile, "utf8")] } });
      this.fetchImpl = ((url: string, init: RequestInit) => undiciFetch(url, { ...(init as object), dispatcher: agent })) as unknown as client.CustomFetch;
    }
  }

  /** Discovered once and kept; a failed discovery is tried again at the next sign-in. */
  private config(): Promise<client.Configuration> {
    this.configuration ??= client
      .discovery(new URL(this.settings.issuer), this.settings.clientId, undefined, this.settings.clientSecret ? client.ClientSecretPost(this.settings.clientSecret) : client.None(), this.fetchImpl ? { [client.customFetch]: this.fetchImpl } : {})
      .then((config) => {
        if (this.fetchImpl) config[client.customFetch] = this.fetchImpl;
        return config;
      })
      .catch((err: unknown) => {
        this.configuration = null;
        throw err;
      });
    return this.configuration;
  }

  async start(redirectUri: string): Promise<{ url: string; transaction: OidcTransaction }> {
    const config = await this.config();
    const transaction: OidcTransaction = { state: client.randomState(), nonce: client.randomNonce(), verifier: client.randomPKCECodeVerifier(), redirectUri };
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope: "openid email profile",
      response_type: "code",
      code_challenge: await client.calculatePKCECodeChallenge(transaction.verifier),
      code_challenge_method: "S256",
      state: transaction.state,
      nonce: transaction.nonce,
    });
    return { url: url.href, transaction };
  }

  /** The provider's answer (`callbackUrl` with code and state), checked and exchanged for a verified ID token. */
  async finish(callbackUrl: URL, transaction: OidcTransaction): Promise<OidcIdentity> {
    const config = await this.config();
    let claims: Record<string, unknown> & { iss: string; sub: string; email?: unknown; email_verified?: unknown };
    try {
      const tokens = await client.authorizationCodeGrant(config, callbackUrl, {
        pkceCodeVerifier: transaction.verifier,
        expectedState: transaction.state,
        expectedNonce: transaction.nonce,
        idTokenExpected: true,
      }, { redirect_uri: transaction.redirectUri });
      const idToken = tokens.claims();
      if (!idToken) throw new OidcRefusal("The identity provider sent no ID token.");
      claims = idToken;
      // Many providers put the email and groups in the ID token; others (and the spec's default) only at the
      // UserInfo endpoint, whose answer must be about the same subject (openid-client checks it).
      const needed = ["email", "email_verified", ...(this.settings.roleClaim ? [this.settings.roleClaim] : [])];
      if (needed.some((name) => claims[name] === undefined)) {
        claims = { ...(await client.fetchUserInfo(config, tokens.access_token, idToken.sub)), ...idToken };
      }
    } catch (err) {
      if (err instanceof OidcRefusal) throw err;
      throw new OidcRefusal(`The identity provider's answer was refused: ${(err as Error).message}`);
    }
    const email = typeof claims.email === "string" ? claims.email.trim().toLowerCase() : "";
    if (!email) throw new OidcRefusal("The identity provider sent no email address (the email scope is needed).");
    // Some providers (Cognito) send the flag as a string.
    if (claims.email_verified === false || claims.email_verified === "false") throw new OidcRefusal("The identity provider says this email address is not verified.");
    const emailVerified = claims.email_verified === true || claims.email_verified === "true";
    return { issuer: claims.iss, subject: claims.sub, email, emailVerified, role: this.roleOf(claims, emailVerified ? email : null) };
  }

  private roleOf(claims: Record<string, unknown>, email: string | null): OperatorRole | null {
    const { roleClaim, adminValue, viewerValue, adminEmails, viewerEmails } = this.settings;
    if (roleClaim) {
      const value = claims[roleClaim];
      const values = Array.isArray(value) ? value.map(String) : typeof value === "string" ? value.split(/[\s,]+/) : [];
      if (values.includes(adminValue)) return "operator-admin";
      if (values.includes(viewerValue)) return "operator-viewer";
    }
    if (email === null) return null;
    if (adminEmails.includes(email)) return "operator-admin";
    if (viewerEmails.includes(email)) return "operator-viewer";
    return null;
  }
}
