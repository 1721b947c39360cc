// Every request the service makes on a caller's behalf (source tests, origin fetches, remote
// uploads, webhooks) goes through this guard: only public unicast addresses are reachable,
// unless the operator allows a CIDR or host name (STOWAGE_OUTBOUND_ALLOW). Names are resolved
// once and the connection goes to the address that was checked, so DNS rebinding cannot
// slip a private address in between check and connect.
//
// An IPv6 address that carries an IPv4 address (IPv4-mapped, IPv4-compatible, SIIT, NAT64, 6to4,
// Teredo) is public only when every IPv4 it carries is. Addresses are never parsed by ipaddr.js
// from text with a dotted tail (it reads `::127.0.0.1` as `::ffff:127.0.0.1`): text goes
// through the WHATWG URL host parser first, the same one `new URL()` applies to request URLs.
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP, isIPv4, isIPv6, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';

export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Resolves a host name to all its addresses (injectable, so tests need no real DNS). */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export const systemResolver: Resolver = (hostname) => dns.promises.lookup(hostname, { all: true, verbatim: true });

export class OutboundBlockedError extends Error {
  readonly code = 'EOUTBOUNDBLOCKED';
  constructor(
    public readonly host: string,
    reason: string,
  ) {
    super(`${host}: ${reason}`);
    this.name = 'OutboundBlockedError';
  }
}

type Ip = ipaddr.IPv4 | ipaddr.IPv6;
type Cidr = [Ip, number];

export class OutboundGuard {
  private readonly cidrs: Cidr[] = [];
  private readonly hosts = new Set<string>();
  readonly httpAgent: http.Agent;
  readonly httpsAgent: https.Agent;

  constructor(
    allow: string[] = [],
    private readonly resolver: Resolver = systemResolver,
  ) {
    for (const entry of allow) {
      const value = entry.trim().toLowerCase();
      if (!value) continue;
      if (value.includes('/')) this.cidrs.push(parseCidr(value));
      else {
        const ip = parseIp(value);
        if (ip) this.cidrs.push(unmapCidr([ip, ip.kind() === 'ipv4' ? 32 : 128]));
        else this.hosts.add(value);
      }
    }
    const lookup = this.lookup;
    this.httpAgent = new http.Agent({ keepAlive: true, lookup } as http.AgentOptions);
    this.httpsAgent = new https.Agent({ keepAlive: true, lookup } as https.AgentOptions);
  }

  /**
   * True when the address is public (see `isPublicIp`), or inside an allowed CIDR. An
   * IPv4 CIDR also covers the IPv4-mapped spelling `::ffff:a.b.c.d` (a dual-stack socket given
   * that address connects to a.b.c.d itself), but not an IPv4 carried by a tunnel or
   * translator (compatible, SIIT, NAT64, 6to4, Teredo): those go to another machine first,
   * so only an IPv6 CIDR naming them allows them.
   */
  isAllowedAddress(address: string): boolean {
    const ip = parseIp(address);
    if (!ip) return false;
    const candidates: Ip[] = [ip];
    const mapped = ip.kind() === 'ipv6' ? mappedIPv4(ip as ipaddr.IPv6) : null;
    if (mapped) candidates.push(mapped);
    for (const [net, bits] of this.cidrs) {
      if (candidates.some((c) => c.kind() === net.kind() && c.match(net, bits))) return true;
    }
    return isPublicIp(ip);
  }

  isAllowedHostName(hostname: string): boolean {
    return this.hosts.has(stripBrackets(hostname).toLowerCase());
  }

  /**
   * Resolves `hostname` and checks every address it has. Returns the checked addresses, the
   * only ones a connection may then use.
   */
  async resolve(hostname: string): Promise<ResolvedAddress[]> {
    const host = stripBrackets(hostname);
    // A literal in any spelling, including the IPv4 forms URL parsing would have rewritten
    // (`0x7f.1`, `2130706433`, `127.1`, `0177.0.0.1`) when a caller hands over a bare host.
    const literal = parseIp(host);
    if (literal) {
      if (!this.isAllowedHostName(host) && !this.isAllowedAddress(host)) {
        throw new OutboundBlockedError(host, 'address is not public');
      }
      if (isIP(host)) return [{ address: host, family: isIP(host) }];
      return [{ address: literal.toString(), family: literal.kind() === 'ipv4' ? 4 : 6 }];
    }
    const name = host.toLowerCase().replace(/\.$/, '');
    if (name === 'localhost' || name.endsWith('.localhost')) {
      if (!this.isAllowedHostName(host)) throw new OutboundBlockedError(host, 'address is not public');
    }
    let addresses: ResolvedAddress[];
    try {
      addresses = await this.resolver(host);
    } catch (err) {
      const e = new Error(`${host}: cannot resolve host name (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
      (e as NodeJS.ErrnoException).code = 'ENOTFOUND';
      throw e;
    }
    if (addresses.length === 0) throw Object.assign(new Error(`${host}: no addresses`), { code: 'ENOTFOUND' });
    if (!this.isAllowedHostName(host)) {
      const bad = addresses.find((a) => !this.isAllowedAddress(a.address));
      if (bad) throw new OutboundBlockedError(host, 'resolves to an address that is not public');
    }
    return addresses;
  }

  /** Throws unless `url` is http(s) and its host passes the checks. */
  async checkUrl(url: string | URL): Promise<URL> {
    let u: URL;
    try {
      u = typeof url === 'string' ? new URL(url) : url;
    } catch {
      throw new OutboundBlockedError(String(url), 'not a valid URL');
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:')
      throw new OutboundBlockedError(u.protocol, 'only http and https are allowed');
    await this.resolve(u.hostname);
    return u;
  }

  /** A `lookup` for net.connect: the same checks, on the addresses actually connected to. */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    const all = typeof options === 'object' && options.all === true;
    // With an error, the address is empty (net reads only the error).
    const fail = (err: NodeJS.ErrnoException) => callback(err, all ? [] : '');
    this.resolve(hostname).then((addresses) => {
      const family = typeof options === 'object' ? options.family : undefined;
      const usable = family === 4 || family === 6 ? addresses.filter((a) => a.family === family) : addresses;
      if (usable.length === 0)
        return fail(Object.assign(new Error(`${hostname}: no usable address`), { code: 'ENOTFOUND' }));
      if (all) return callback(null, usable);
      callback(null, usable[0].address, usable[0].family);
    }, fail);
  };

  /** The guarded agent for a URL's scheme, for SDKs that take one (AWS, Azure). */
  agentFor(url: string | URL): http.Agent {
    return new URL(url).protocol === 'https:' ? this.httpsAgent : this.httpAgent;
  }

  destroy(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }
}

/**
 * Parses an IP address in any spelling, or returns null for anything else (host names,
 * garbage). Strict dotted quads are read directly; everything else that could be numeric goes
 * through the WHATWG URL host parser, which writes IPv4 oddities as dotted quads and IPv6 in
 * canonical hex (no dotted tail), the only IPv6 text handed to ipaddr.js. A zone (`%eth0`)
 * is dropped: the address bits alone decide.
 */
function parseIp(text: string): Ip | null {
  let s = stripBrackets(text.trim());
  const zone = s.indexOf('%');
  if (zone >= 0 && isIPv6(s)) s = s.slice(0, zone);
  if (isIPv4(s)) return ipaddr.IPv4.parse(s);
  // Only what numeric IPv4 forms and IPv6 are made of: never a name, userinfo or path.
  if (!/^[0-9a-fx.:]+$/i.test(s)) return null;
  let host: string;
  try {
    host = stripBrackets(new URL(`http://${s.includes(':') ? `[${s}]` : s}/`).hostname);
  } catch {
    return null;
  }
  if (isIPv4(host)) return ipaddr.IPv4.parse(host);
  if (isIPv6(host) && !host.includes('.')) return ipaddr.IPv6.parse(host);
  return null;
}

function parseCidr(text: string): Cidr {
  const slash = text.lastIndexOf('/');
  const ip = parseIp(text.slice(0, slash));
  const bits = Number(text.slice(slash + 1));
  const max = ip?.kind() === 'ipv4' ? 32 : 128;
  if (!ip || !/^\d{1,3}$/.test(text.slice(slash + 1)) || bits > max)
    throw new Error(`outbound allow list: "${text}" is not a CIDR`);
  return unmapCidr([ip, bits]);
}

/** `::ffff:a.b.c.d/n` with n >= 96 is the IPv4 CIDR a.b.c.d/(n - 96), so it matches plain IPv4 too. */
function unmapCidr([ip, bits]: Cidr): Cidr {
  const mapped = ip.kind() === 'ipv6' && bits >= 96 ? mappedIPv4(ip as ipaddr.IPv6) : null;
  return mapped ? [mapped, bits - 96] : [ip, bits];
}

/** The IPv4 of `::ffff:a.b.c.d`, the one embedding that is the same destination as the IPv4. */
function mappedIPv4(ip: ipaddr.IPv6): ipaddr.IPv4 | null {
  const p = ip.parts;
  return p[0] === 0 && p[1] === 0 && p[2] === 0 && p[3] === 0 && p[4] === 0 && p[5] === 0xffff ? ipv4At(ip, 12) : null;
}

const ipv4At = (ip: ipaddr.IPv6, byte: number) => new ipaddr.IPv4(ip.toByteArray().slice(byte, byte + 4));

/**
 * The IPv4 addresses an IPv6 address stands for, or null when it carries none. Each is where
 * a packet to the IPv6 address ends up, or passes through, as IPv4.
 */
function embeddedIPv4(ip: ipaddr.IPv6): ipaddr.IPv4[] | null {
  const p = ip.parts;
  const zero = (from: number, to: number) => p.slice(from, to).every((x) => x === 0);
  // ::ffff:a.b.c.d, IPv4-mapped (RFC 4291 2.5.5.2)
  if (zero(0, 5) && p[5] === 0xffff) return [ipv4At(ip, 12)];
  // ::a.b.c.d, IPv4-compatible (RFC 4291 2.5.5.1, deprecated; still tunnelled by some stacks).
  // :: and ::1 land here too, as 0.0.0.0 and 0.0.0.1: never public.
  if (zero(0, 6)) return [ipv4At(ip, 12)];
  // ::ffff:0:a.b.c.d, IPv4-translated (RFC 2765, SIIT)
  if (zero(0, 4) && p[4] === 0xffff && p[5] === 0) return [ipv4At(ip, 12)];
  // 64:ff9b::/96, the NAT64 well-known prefix (RFC 6052)
  if (p[0] === 0x64 && p[1] === 0xff9b && zero(2, 6)) return [ipv4At(ip, 12)];
  // 2002::/16, 6to4 (RFC 3056): the site's IPv4 in bits 16..47
  if (p[0] === 0x2002) return [ipv4At(ip, 2)];
  // 2001:0::/32, Teredo (RFC 4380): the server's IPv4 in bits 32..63, the client's inverted in the last 32
  if (p[0] === 0x2001 && p[1] === 0) {
    const client = ip
      .toByteArray()
      .slice(12, 16)
      .map((b) => b ^ 0xff);
    return [ipv4At(ip, 4), new ipaddr.IPv4(client)];
  }
  return null;
}

const GLOBAL_UNICAST: Cidr = [ipaddr.IPv6.parse('2000::'), 3];

/**
 * Public: IPv4 in no special range (ipaddr.js `range() === 'unicast'`); IPv6 carrying IPv4
 * addresses when every one of them is public; other IPv6 inside the global unicast space
 * 2000::/3 and in no special range (documentation, ORCHID, benchmarking, and so on). The NAT64
 * local-use prefix 64:ff9b:1::/48 (RFC 8215) is never public: where its IPv4 sits depends on
 * a prefix length chosen locally, so what it carries cannot be read from the address.
 */
function isPublicIp(ip: Ip): boolean {
  if (ip.kind() === 'ipv4') return ip.range() === 'unicast';
  const v6 = ip as ipaddr.IPv6;
  const carried = embeddedIPv4(v6);
  if (carried) return carried.every((v4) => v4.range() === 'unicast');
  return v6.match(GLOBAL_UNICAST) && v6.range() === 'unicast';
}

const stripBrackets = (host: string) => (host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host);
