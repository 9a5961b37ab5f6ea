import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { rootCertificates } from 'node:tls';

/**
 * Outbound calls to operation endpoints. In production (SVC_ENV=production) an endpoint whose
 * host is, or resolves to, a loopback, link-local, private, shared, multicast or metadata
 * address is refused, and so is every redirect hop (re-checked per hop) unless
 * SVC_OPERATIONS_ALLOW_PRIVATE=1. Plain-http hops are sent to the address that was checked
 * (with the original Host header), so a second DNS answer cannot swap in a private one.
 * Response bodies are read up to MAX_RESPONSE_BYTES; a longer one is cut and reported.
 */
export const MAX_RESPONSE_BYTES = 1024 * 1024;
const MAX_REDIRECTS = 5;

const blocked = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24],
  ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) blocked.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['64:ff9b::', 96], ['2001:db8::', 32]] as const) {
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
  constructor(readonly reason: 'address_not_allowed' | 'bad_url' | 'too_many_redirects' | 'response_too_large' | 'unreachable', message: string) {
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

const defaultResolve = async (host: string) => (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);

/** Returns the URL to connect to (an IP for plain http) and the Host header to send, or throws. */
async function checkHop(url: URL, policy: EgressPolicy): Promise<{ target: URL; host: string | null }> {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new EgressError('bad_url', `endpoint ${url.protocol} URLs are not allowed`);
  if (!policy.publicOnly) return { target: url, host: null };
  const hostname = url.hostname.replace(/^\[|\]$/g, '').toLowerCase().replace(/\.$/, '');
  if (METADATA_HOSTS.has(hostname)) throw new EgressError('address_not_allowed', `endpoint host ${hostname} is a metadata address`);
  const ips = isIP(hostname) ? [hostname] : await (policy.resolve ?? defaultResolve)(hostname).catch(() => {
    throw new EgressError('unreachable', `endpoint host ${hostname} does not resolve`);
  });
  const allowed = policy.allowed ?? isPublicAddress;
  const bad = ips.find((ip) => !allowed(ip));
  if (bad || ips.length === 0) throw new EgressError('address_not_allowed', `endpoint ${hostname} resolves to ${bad ?? 'nothing'}, which is not a public address`);
  if (url.protocol === 'https:' || isIP(hostname)) return { target: url, host: null };
  const pinned = new URL(url);
  pinned.hostname = isIP(ips[0]!) === 6 ? `[${ips[0]}]` : ips[0]!;
  return { target: pinned, host: url.host };
}

export interface EgressResponse {
  status: number;
  contentType: string | null;
  body: string;
  /** The body was longer than MAX_RESPONSE_BYTES and was cut. */
  truncated: boolean;
}

/** POSTs `body` to `url` under the policy, following redirects by hand (each hop checked). */
export async function post(urlText: string, body: string, headers: Record<string, string>, signal: AbortSignal, policy: EgressPolicy): Promise<EgressResponse> {
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
  const tls = req.ca ? { tls: { ca: [...rootCertificates, req.ca] } } : {};
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    if (req.httpsOnly && url.protocol !== 'https:') throw new EgressError('bad_url', `a redirect to a ${url.protocol} URL is not allowed`);
    const { target, host } = await checkHop(url, req.policy);
    const res = await fetch(target, {
      method,
      body: method === 'POST' ? req.body : undefined,
      headers: host ? { ...req.headers, host } : req.headers,
      redirect: 'manual',
      signal: req.signal,
      ...tls,
    } as RequestInit);
    const location = res.headers.get('location');
    if (res.status >= 300 && res.status < 400 && location) {
      await res.body?.cancel().catch(() => {});
      // 307/308 repeat the POST; 301/302/303 turn it into a GET, as browsers and fetch do.
      if (res.status !== 307 && res.status !== 308) method = 'GET';
      url = new URL(location, url);
      continue;
    }
    const read = await readCapped(res, req.maxBytes ?? MAX_RESPONSE_BYTES);
    return { status: res.status, contentType: res.headers.get('content-type'), ...read };
  }
  throw new EgressError('too_many_redirects', `endpoint redirected more than ${MAX_REDIRECTS} times`);
}

async function readCapped(res: Response, max: number): Promise<{ body: string; truncated: boolean }> {
  if (!res.body) return { body: '', truncated: false };
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => {});
      chunks.push(value.subarray(0, value.byteLength - (size - max)));
      return { body: new TextDecoder().decode(Buffer.concat(chunks)), truncated: true };
    }
    chunks.push(value);
  }
  return { body: new TextDecoder().decode(Buffer.concat(chunks)), truncated: false };
}
