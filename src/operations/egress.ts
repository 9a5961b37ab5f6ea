import { lookup } from 'node:dns/promises';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { rootCertificates } from 'node:tls';

/**
 * Outbound calls to operation endpoints. In production (SVC_ENV=production) an endpoint whose
 * host is, or resolves to, a loopback, link-local, private, shared, multicast or metadata
 * address is refused, and so is every redirect hop (re-checked per hop) unless
 * SVC_OPERATIONS_ALLOW_PRIVATE=1. Every hop, http or https, connects to the address that was
 * checked: the name is resolved once and node:http(s) gets a `lookup` that answers with that
 * address, so a second DNS answer (rebinding) cannot swap in a private one, while TLS still
 * sends the name as SNI and verifies the certificate against it. (fetch() offers no way to
 * pin the address of an https URL; connecting to the IP would verify the certificate against
 * the IP.) Without the policy, calls go through fetch().
 * Response bodies are read up to MAX_RESPONSE_BYTES; a longer one is cut and reported.
 */
export const MAX_RESPONSE_BYTES = 1024 * 1024;
const MAX_REDIRECTS = 5;

const blocked = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  blocked.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
  ['64:ff9b::', 96],
  ['2001:db8::', 32],
] as const) {
  blocked.addSubnet(net, bits, 'ipv6');
}
/** Cloud metadata names that must never be called, whatever they resolve to. */
const METADATA_HOSTS = new Set(['metadata.google.internal', 'metadata', 'instance-data', 'metadata.azure.com']);

/** Whether an IP address may be called when private addresses are refused. */
export function isPublicAddress(ip: string): boolean {
  const family = isIP(ip);
  if (family === 0) return false;
  if (family === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
    if (mapped) return isPublicAddress(mapped[1]!);
    return !blocked.check(ip, 'ipv6');
  }
  return !blocked.check(ip, 'ipv4');
}

export class EgressError extends Error {
  constructor(
    readonly reason: 'address_not_allowed' | 'bad_url' | 'too_many_redirects' | 'response_too_large' | 'unreachable',
    message: string,
  ) {
    super(message);
  }
}

export interface EgressPolicy {
  /** Refuse non-public addresses (production without SVC_OPERATIONS_ALLOW_PRIVATE=1). */
  publicOnly: boolean;
  /** Resolver (tests inject one); default node:dns lookup of every address. */
  resolve?: (host: string) => Promise<string[]>;
  /** Address check (tests narrow it); default isPublicAddress. */
  allowed?: (ip: string) => boolean;
}

const defaultResolve = async (host: string) =>
  (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);

/** Checks a hop; returns the address to connect to (null: connect as usual), or throws. */
async function checkHop(url: URL, policy: EgressPolicy): Promise<string | null> {
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new EgressError('bad_url', `endpoint ${url.protocol} URLs are not allowed`);
  if (!policy.publicOnly) return null;
  const hostname = url.hostname
    .replace(/^\[|\]$/g, '')
    .toLowerCase()
    .replace(/\.$/, '');
  if (METADATA_HOSTS.has(hostname))
    throw new EgressError('address_not_allowed', `endpoint host ${hostname} is a metadata address`);
  const ips = isIP(hostname)
    ? [hostname]
    : await (policy.resolve ?? defaultResolve)(hostname).catch(() => {
        throw new EgressError('unreachable', `endpoint host ${hostname} does not resolve`);
      });
  const allowed = policy.allowed ?? isPublicAddress;
  const bad = ips.find((ip) => !allowed(ip));
  if (bad || ips.length === 0)
    throw new EgressError(
      'address_not_allowed',
      `endpoint ${hostname} resolves to ${bad ?? 'nothing'}, which is not a public address`,
    );
  return ips[0]!;
}

/** What one hop answered, from fetch() or node:http(s). */
interface HopAnswer {
  status: number;
  header(name: string): string | null;
  chunks: AsyncIterable<Uint8Array>;
  discard(): void;
}

async function hopByFetch(url: URL, method: string, req: CappedRequest): Promise<HopAnswer> {
  const res = await fetch(url, {
    method,
    body: method === 'POST' ? req.body : undefined,
    headers: req.headers,
    redirect: 'manual',
    signal: req.signal,
    ...(req.ca ? { tls: { ca: [...rootCertificates, req.ca] } } : {}),
  } as RequestInit);
  const body = res.body;
  return {
    status: res.status,
    header: (n) => res.headers.get(n),
    chunks: body ?? (async function* () {})(),
    discard: () => void body?.cancel().catch(() => {}),
  };
}

/** One hop over node:http(s), connecting to `address` whatever DNS says now. */
function hopPinned(url: URL, address: string, method: string, req: CappedRequest): Promise<HopAnswer> {
  const family = isIP(address);
  const pinned: LookupFunction = (_host, opts, cb) => {
    if ((opts as { all?: boolean }).all)
      (cb as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address, family }]);
    else cb(null, address, family);
  };
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise<HopAnswer>((resolve, reject) => {
    if (req.signal.aborted) return reject(req.signal.reason);
    const r = send(url, {
      method,
      headers:
        method === 'POST' && req.body !== undefined
          ? { ...req.headers, 'content-length': String(Buffer.byteLength(req.body)) }
          : req.headers,
      lookup: pinned,
      ...(req.ca ? { ca: [...rootCertificates, req.ca] } : {}),
    });
    const abort = () => r.destroy(new Error('the call was aborted'));
    req.signal.addEventListener('abort', abort, { once: true });
    r.on('error', (err) => {
      req.signal.removeEventListener('abort', abort);
      // As fetch() does: an aborted call rejects with the signal's reason (TimeoutError…).
      reject(req.signal.aborted ? req.signal.reason : err);
    });
    r.on('response', (res: IncomingMessage) => {
      res.on('close', () => req.signal.removeEventListener('abort', abort));
      resolve({
        status: res.statusCode ?? 0,
        header: (n) => {
          const v = res.headers[n.toLowerCase()];
          return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
        },
        chunks: res,
        discard: () => res.destroy(),
      });
    });
    r.end(method === 'POST' ? req.body : undefined);
  });
}

export interface EgressResponse {
  status: number;
  contentType: string | null;
  body: string;
  /** The body was longer than MAX_RESPONSE_BYTES and was cut. */
  truncated: boolean;
}

/** POSTs `body` to `url` under the policy, following redirects by hand (each hop checked). */
export async function post(
  urlText: string,
  body: string,
  headers: Record<string, string>,
  signal: AbortSignal,
  policy: EgressPolicy,
): Promise<EgressResponse> {
  return fetchCapped(urlText, { method: 'POST', body, headers, signal, policy });
}

export interface CappedRequest {
  method: 'GET' | 'POST';
  body?: string;
  headers: Record<string, string>;
  signal: AbortSignal;
  policy: EgressPolicy;
  /** Bytes of the answer read at most (default MAX_RESPONSE_BYTES); more is cut and reported. */
  maxBytes?: number;
  /** Refuse any hop that is not https (app manifests). */
  httpsOnly?: boolean;
  /** Extra trusted CA certificates (PEM), added to the system's. */
  ca?: string;
}

/** One outbound call under the policy, following redirects by hand (each hop checked). */
export async function fetchCapped(urlText: string, req: CappedRequest): Promise<EgressResponse> {
  let url: URL;
  try {
    url = new URL(urlText);
  } catch {
    throw new EgressError('bad_url', 'endpoint is not a valid URL');
  }
  let method = req.method;
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    if (req.httpsOnly && url.protocol !== 'https:')
      throw new EgressError('bad_url', `a redirect to a ${url.protocol} URL is not allowed`);
    const address = await checkHop(url, req.policy);
    const res = address === null ? await hopByFetch(url, method, req) : await hopPinned(url, address, method, req);
    const location = res.header('location');
    if (res.status >= 300 && res.status < 400 && location) {
      res.discard();
      // 307/308 repeat the POST; 301/302/303 turn it into a GET, as browsers and fetch do.
      if (res.status !== 307 && res.status !== 308) method = 'GET';
      url = new URL(location, url);
      continue;
    }
    const read = await readCapped(res, req.maxBytes ?? MAX_RESPONSE_BYTES).catch((err) => {
      throw req.signal.aborted ? req.signal.reason : err;
    });
    return { status: res.status, contentType: res.header('content-type'), ...read };
  }
  throw new EgressError('too_many_redirects', `endpoint redirected more than ${MAX_REDIRECTS} times`);
}

async function readCapped(res: HopAnswer, max: number): Promise<{ body: string; truncated: boolean }> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const value of res.chunks) {
    size += value.byteLength;
    if (size > max) {
      res.discard();
      chunks.push(value.subarray(0, value.byteLength - (size - max)));
      return { body: new TextDecoder().decode(Buffer.concat(chunks)), truncated: true };
    }
    chunks.push(value);
  }
  return { body: new TextDecoder().decode(Buffer.concat(chunks)), truncated: false };
}
