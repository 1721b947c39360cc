// Every request the service makes on a caller's behalf (source tests, origin fetches, remote
// uploads, webhooks) goes through this guard: only public unicast addresses are reachable,
// unless the operator allows a CIDR or host name (STOWAGE_OUTBOUND_ALLOW). Names are resolved
// once and the connection goes to the address that was checked, so DNS rebinding cannot
// slip a private address in between check and connect.
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
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

type Cidr = [ipaddr.IPv4 | ipaddr.IPv6, number];

export class OutboundGuard {
  private readonly cidrs: Cidr[] = [];
  private readonly hosts = new Set<string>();
  readonly httpAgent: http.Agent;
  readonly httpsAgent: https.Agent;

  constructor(allow: string[] = [], private readonly resolver: Resolver = systemResolver) {
    for (const entry of allow) {
      const value = entry.trim().toLowerCase();
      if (!value) continue;
      if (value.includes('/')) this.cidrs.push(ipaddr.parseCIDR(value));
      else if (ipaddr.isValid(value)) this.cidrs.push([normalise(ipaddr.parse(value)), ipaddr.parse(value).kind() === 'ipv4' ? 32 : 128]);
      else this.hosts.add(value);
    }
    const lookup = this.lookup;
    this.httpAgent = new http.Agent({ keepAlive: true, lookup } as http.AgentOptions);
    this.httpsAgent = new https.Agent({ keepAlive: true, lookup } as https.AgentOptions);
  }

  /** True when the address is public unicast, or inside an allowed CIDR. */
  isAllowedAddress(address: string): boolean {
    if (!ipaddr.isValid(address)) return false;
    const ip = normalise(ipaddr.parse(address));
    for (const [net, bits] of this.cidrs) {
      if (net.kind() === ip.kind() && ip.match(net as any, bits)) return true;
    }
    return ip.range() === 'unicast';
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
    if (isIP(host)) {
      if (!this.isAllowedHostName(host) && !this.isAllowedAddress(host)) {
        throw new OutboundBlockedError(host, 'address is not public');
      }
      return [{ address: host, family: isIP(host) }];
    }
    if (host.toLowerCase() === 'localhost' || host.toLowerCase().endsWith('.localhost')) {
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
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new OutboundBlockedError(u.protocol, 'only http and https are allowed');
    await this.resolve(u.hostname);
    return u;
  }

  /** A `lookup` for net.connect: the same checks, on the addresses actually connected to. */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    this.resolve(hostname).then(
      (addresses) => {
        const family = typeof options === 'object' ? options.family : undefined;
        const usable = family === 4 || family === 6 ? addresses.filter((a) => a.family === family) : addresses;
        if (usable.length === 0) return (callback as any)(Object.assign(new Error(`${hostname}: no usable address`), { code: 'ENOTFOUND' }));
        if (typeof options === 'object' && options.all) return (callback as any)(null, usable);
        (callback as any)(null, usable[0].address, usable[0].family);
      },
      (err) => (callback as any)(err),
    );
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

function normalise(ip: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | ipaddr.IPv6 {
  if (ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).isIPv4MappedAddress()) return (ip as ipaddr.IPv6).toIPv4Address();
  return ip;
}

const stripBrackets = (host: string) => (host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host);
