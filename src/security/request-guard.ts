// What every local HTTP server here (the emulator, its console, the daemon's port) checks before it lets a
// request in: a Host it serves (DNS rebinding), no browser sending it from another site (Origin, Sec-Fetch-Site),
// and JSON where JSON is expected (a form can post urlencoded, multipart and text/plain without a preflight).
// One module for every server, so a hole fixed here is fixed everywhere.
import type { IncomingHttpHeaders } from 'node:http';
import { isIP } from 'node:net';
import type { ErrorCode } from '../errors/catalogue.ts';

export type RefusalReason = 'foreign-host' | 'cross-site' | 'not-json';

/** Why a request was refused: the status to answer (421, 403, 415), the reason, and a sentence for the caller. */
export class RequestRefusedError extends Error {
  override name = 'RequestRefusedError';
  readonly code: ErrorCode = 'DFW_HTTP_REFUSED';
  readonly status: number;
  readonly reason: RefusalReason;

  constructor(status: number, reason: RefusalReason, message: string) {
    super(message);
    this.status = status;
    this.reason = reason;
  }

  /** The JSON body servers answer with: the code, the reason and the message. */
  toJSON(): { code: string; reason: RefusalReason; message: string } {
    return { code: this.code, reason: this.reason, message: this.message };
  }
}

export interface HostPolicy {
  /** Names (lower case, without port) accepted besides loopback names; IP literals are accepted when true. */
  names?: readonly string[];
  /**
   * Whether any IP literal is accepted (`10.1.2.3:9464`): a rebinding page always sends its own DNS name, so a
   * literal address cannot come from one. Default false: loopback names only.
   */
  ipLiterals?: boolean;
}

/** Methods a browser may send cross-site without a preflight that change nothing on a well-behaved server. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The host name of a Host header, lower case, without its port or IPv6 brackets; undefined when malformed. */
export function hostName(host: string): string | undefined {
  const text = host.trim().toLowerCase();
  const bracketed = /^\[([0-9a-f:.]+)\](?::\d{1,5})?$/.exec(text);
  if (bracketed) return bracketed[1];
  const plain = /^([a-z0-9.-]+)(?::\d{1,5})?$/.exec(text);
  return plain?.[1]?.replace(/\.$/, '');
}

/** True for `localhost` (and `*.localhost`), 127.0.0.0/8 and ::1, with or without a port. */
export function isLoopbackHost(host: string): boolean {
  const name = hostName(host);
  if (name === undefined) return false;
  return (
    name === 'localhost' || name.endsWith('.localhost') || name === '::1' || /^127(\.\d{1,3}){3}$/.test(name)
  );
}

/**
 * Refuses a Host the server does not serve. A request with no Host (HTTP/1.0, the in-process emulator) is let
 * in: a browser always sends one.
 */
export function checkHost(
  host: string | undefined,
  policy: HostPolicy = {},
): RequestRefusedError | undefined {
  if (host === undefined) return undefined;
  if (isLoopbackHost(host)) return undefined;
  const name = hostName(host);
  if (name !== undefined && policy.ipLiterals && isIP(name) !== 0) return undefined;
  if (name !== undefined && policy.names?.includes(name)) return undefined;
  return new RequestRefusedError(
    421,
    'foreign-host',
    `This server does not answer for Host "${host}": use 127.0.0.1 or localhost (a page of another site ` +
      'that resolves its own name to this address is refused).',
  );
}

/**
 * Refuses a request a browser sends from another site: `Sec-Fetch-Site` cross-site or same-site, or an
 * `Origin` (other than the server's own, as Host names it) where there is no Sec-Fetch-Site. Clients that are
 * not browsers (the daemon, curl, a probe) send neither and are let in. `allMethods`: reads too, for servers
 * where a GET changes state (the emulator's poll claims an execution).
 */
export function checkCrossSite(
  method: string,
  headers: IncomingHttpHeaders,
  options: { allMethods?: boolean } = {},
): RequestRefusedError | undefined {
  if (!options.allMethods && SAFE_METHODS.has(method.toUpperCase())) return undefined;
  const site = single(headers['sec-fetch-site'])?.toLowerCase();
  const origin = single(headers.origin);
  const sameOrigin =
    site === undefined
      ? originMatchesHost(origin, single(headers.host))
      : site === 'same-origin' || site === 'none';
  if (sameOrigin) return undefined;
  return new RequestRefusedError(
    403,
    'cross-site',
    'This server refuses requests a browser sends from another site ' +
      `(Origin ${origin ?? 'none'}, Sec-Fetch-Site ${site ?? 'none'}); use its own pages, or a client that is not a browser.`,
  );
}

/**
 * Refuses a body that is not JSON where JSON is expected: a page can post a form (urlencoded, multipart,
 * text/plain) anywhere without asking, but not `application/json`. An empty body, or none, passes.
 */
export function checkJsonBody(
  contentType: string | undefined,
  bodyBytes: number,
): RequestRefusedError | undefined {
  if (bodyBytes === 0) return undefined;
  const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  if (type === 'application/json' || /^application\/[a-z0-9.+-]+\+json$/.test(type)) return undefined;
  return new RequestRefusedError(
    415,
    'not-json',
    `The body must be sent as Content-Type: application/json, not "${contentType ?? 'none'}".`,
  );
}

function originMatchesHost(origin: string | undefined, host: string | undefined): boolean {
  if (origin === undefined) return true;
  if (host === undefined || origin === 'null') return false;
  try {
    return new URL(origin).host === new URL(`http://${host}`).host;
  } catch {
    return false;
  }
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
