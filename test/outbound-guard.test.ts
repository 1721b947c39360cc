import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { OutboundGuard } from '../src/outbound/guard.ts';

const fixed = (map: Record<string, string[]>) => async (host: string) => {
  const list = map[host];
  if (!list) throw Object.assign(new Error('nx'), { code: 'ENOTFOUND' });
  return list.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
};

describe('outbound address checks', () => {
  const guard = new OutboundGuard(
    [],
    fixed({
      'public.example': ['93.184.216.34'],
      'mixed.example': ['93.184.216.34', '10.0.0.5'],
      'v6.example': ['2606:2800:220:1:248:1893:25c8:1946'],
    }),
  );

  test('public unicast addresses pass', () => {
    for (const ip of ['93.184.216.34', '8.8.8.8', '2606:2800:220:1:248:1893:25c8:1946'])
      assert.equal(guard.isAllowedAddress(ip), true, ip);
  });

  test('loopback, private, link-local, metadata, CGNAT, multicast, ULA and mapped forms are refused', () => {
    for (const ip of [
      '127.0.0.1',
      '127.1.2.3',
      '0.0.0.0',
      '10.0.0.1',
      '10.255.255.255',
      '172.16.0.1',
      '172.31.255.254',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '224.0.0.1',
      '255.255.255.255',
      '::1',
      '::',
      'fc00::1',
      'fd12:3456::1',
      'fe80::1',
      '::ffff:127.0.0.1',
      '::ffff:10.0.0.1',
      '::ffff:169.254.169.254',
      'not-an-ip',
    ]) {
      assert.equal(guard.isAllowedAddress(ip), false, ip);
    }
    assert.equal(guard.isAllowedAddress('172.32.0.1'), true, 'just outside 172.16/12');
  });

  test('URLs: literal addresses, names resolving anywhere private, localhost and non-http schemes are refused', async () => {
    await guard.checkUrl('https://public.example/x');
    await guard.checkUrl('http://v6.example/');
    for (const url of [
      'http://127.0.0.1/',
      'http://[::1]:8080/',
      'http://mixed.example/',
      'http://localhost/',
      'http://a.localhost/',
      'file:///etc/passwd',
      'gopher://x',
      'http://169.254.169.254/latest/meta-data/',
      'http://[::ffff:7f00:1]/',
    ]) {
      await assert.rejects(guard.checkUrl(url), /not public|only http|not a valid/, url);
    }
    await assert.rejects(guard.checkUrl('http://unknown.example/'), /cannot resolve/);
  });

  test('the operator allow list exempts CIDRs and host names, nothing more', async () => {
    const g = new OutboundGuard(
      ['127.0.0.0/8', 'intranet.local', '10.1.2.3'],
      fixed({ 'intranet.local': ['192.168.5.5'], 'other.local': ['192.168.5.5'] }),
    );
    await g.checkUrl('http://127.0.0.1:9000/');
    await g.checkUrl('http://intranet.local/');
    assert.equal(g.isAllowedAddress('10.1.2.3'), true);
    assert.equal(g.isAllowedAddress('10.1.2.4'), false);
    await assert.rejects(g.checkUrl('http://other.local/'), /not public/);
    await assert.rejects(g.checkUrl('http://[::1]/'), /not public/);
  });

  test('the connect-time lookup applies the same checks (no rebinding between check and connect)', async () => {
    let calls = 0;
    const g = new OutboundGuard([], async () =>
      ++calls === 1 ? [{ address: '93.184.216.34', family: 4 }] : [{ address: '127.0.0.1', family: 4 }],
    );
    await g.checkUrl('http://rebind.example/');
    const err = await new Promise<Error | null>((resolve) =>
      g.lookup('rebind.example', { all: true }, (e) => resolve(e)),
    );
    assert.match(String(err), /not public/);
  });
});

// Issue 15, item 11: every IPv6 spelling of an IPv4 address is judged by the IPv4 it carries
// (mapped, compatible, SIIT-translated, NAT64, 6to4, Teredo), and every non-public IPv6 range is
// refused. The attack run found `[::127.0.0.1]` (which URL parsing writes `[::7f00:1]`) let through.

/** A Teredo address (RFC 4380): 2001:0::/32, server IPv4 in bits 32..63, client IPv4 inverted in the last 32 bits. */
const teredo = (server: string, client: string) => {
  const hex = (ip: string, invert = false) => {
    const b = ip.split('.').map((x) => (invert ? Number(x) ^ 0xff : Number(x)));
    return `${((b[0] << 8) | b[1]).toString(16)}:${((b[2] << 8) | b[3]).toString(16)}`;
  };
  return `2001:0:${hex(server)}:8000:63bf:${hex(client, true)}`;
};

describe('outbound address checks: IPv6 spellings of IPv4 addresses and non-public IPv6 ranges', () => {
  const embedded: Record<string, string[]> = {
    'IPv4-compatible ::a.b.c.d': [
      '::127.0.0.1',
      '::7f00:1',
      '0:0:0:0:0:0:127.0.0.1',
      '::0:7f00:1',
      '::10.0.0.1',
      '::a00:1',
      '::a9fe:a9fe',
      '::169.254.169.254',
      '::c0a8:101',
      '::6440:1',
      '::0.0.0.0',
      '::2',
    ],
    'IPv4-mapped ::ffff:a.b.c.d': [
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '0:0:0:0:0:ffff:7f00:1',
      '::FFFF:7F00:1',
      '::ffff:a00:1',
      '::ffff:a9fe:a9fe',
      '::ffff:0.0.0.0',
      '::ffff:ffff:ffff',
    ],
    'IPv4-translated ::ffff:0:a.b.c.d (SIIT)': ['::ffff:0:7f00:1', '::ffff:0:10.0.0.1', '::ffff:0:a9fe:a9fe'],
    'NAT64 well-known prefix 64:ff9b::/96': [
      '64:ff9b::7f00:1',
      '64:ff9b::127.0.0.1',
      '64:ff9b::a9fe:a9fe',
      '64:ff9b::169.254.169.254',
      '64:ff9b::a00:1',
      '64:ff9b::c0a8:101',
      '64:ff9b::6440:1',
      '64:ff9b::',
    ],
    'NAT64 local-use prefix 64:ff9b:1::/48 (refused whole: where its IPv4 sits depends on the local prefix length)': [
      '64:ff9b:1::7f00:1',
      '64:ff9b:1::a9fe:a9fe',
      '64:ff9b:1::808:808',
      '64:ff9b:1:ffff:ffff:ffff:808:808',
      '64:ff9b:1:7f00:1::',
    ],
    '6to4 2002::/16 (IPv4 in bits 16..47)': [
      '2002:7f00:1::',
      '2002:7f00:1::1',
      '2002:7f00:1:ffff:ffff:ffff:ffff:ffff',
      '2002:a00:1:1::1',
      '2002:a9fe:a9fe::1',
      '2002:c0a8:101::1',
      '2002:6440:1::1',
      '2002:c058:6301::1',
      '2002::1',
    ],
    'Teredo 2001:0::/32 (client IPv4 inverted in the last 32 bits, server IPv4 in bits 32..63)': [
      '2001:0:4136:e378:8000:63bf:80ff:fffe', // client 127.0.0.1 behind a public server
      teredo('65.54.227.120', '127.0.0.1'),
      teredo('65.54.227.120', '10.0.0.1'),
      teredo('65.54.227.120', '169.254.169.254'),
      teredo('65.54.227.120', '192.168.1.1'),
      teredo('127.0.0.1', '8.8.8.8'), // public client, loopback server
      teredo('10.0.0.1', '8.8.8.8'),
      '2001::1',
    ],
  };
  const otherNonPublic: Record<string, string[]> = {
    'loopback and unspecified': ['::1', '0:0:0:0:0:0:0:1', '::', '0:0:0:0:0:0:0:0'],
    'link-local fe80::/10': ['fe80::1', 'fe80::1%eth0', 'fe80::1%25eth0', 'febf:ffff::1'],
    'unique local fc00::/7': ['fc00::1', 'fd00::1', 'fdff:ffff:ffff::1'],
    'multicast ff00::/8': ['ff02::1', 'ff05::1:3', 'ff0e::1', 'ff01::1'],
    'documentation 2001:db8::/32 and 3fff::/20': ['2001:db8::1', '2001:db8:ffff::1', '3fff::1'],
    'discard 100::/64': ['100::1', '100::ffff:ffff:ffff:ffff'],
    'site-local fec0::/10': ['fec0::1', 'feff::1'],
    'ORCHID, ORCHIDv2, benchmarking, AMT, AS112, other IETF protocol assignments, SRv6 SIDs': [
      '2001:10::1',
      '2001:20::1',
      '2001:2::1',
      '2001:3::1',
      '2001:4:112::1',
      '2620:4f:8000::1',
      '2001:1::1',
      '5f00::1',
    ],
    'outside the global unicast space 2000::/3': [
      '::1:7f00:1',
      '::1:0:0:1',
      '1::1',
      '4000::1',
      'e000::1',
      '64:ff9b:2::7f00:1',
    ],
  };
  const guard = new OutboundGuard([]);

  for (const [label, list] of Object.entries({ ...embedded, ...otherNonPublic })) {
    test(`refused: ${label}`, () => {
      const passed = list.filter((ip) => guard.isAllowedAddress(ip));
      assert.deepEqual(passed, [], `allowed although not public: ${passed.join(', ')}`);
    });
  }

  test('public addresses pass, and so do IPv6 addresses whose every embedded IPv4 is public', () => {
    const publics = [
      '8.8.8.8',
      '1.1.1.1',
      '2606:4700::1111',
      '2606:4700:4700::1111',
      '2001:4860:4860::8888',
      '2a00:1450:4001:80b::200e',
      '::ffff:8.8.8.8',
      '::ffff:808:808', // the IPv4 itself on a dual-stack socket
      '64:ff9b::808:808',
      '64:ff9b::8.8.8.8', // what DNS64 hands an IPv6-only host for an IPv4-only site
      '2002:808:808::1',
      teredo('65.54.227.120', '8.8.8.8'),
    ];
    assert.deepEqual(
      publics.filter((ip) => !guard.isAllowedAddress(ip)),
      [],
    );
  });

  test('literal URLs in every spelling are refused before anything connects', async () => {
    const urls = [
      'http://[::127.0.0.1]/',
      'http://[::7f00:1]/',
      'http://[0:0:0:0:0:0:127.0.0.1]:8080/x',
      'http://[::a9fe:a9fe]/latest/meta-data/',
      'http://[::ffff:7f00:1]/',
      'http://[::ffff:127.0.0.1]/',
      'http://[::ffff:0:7f00:1]/',
      'http://[64:ff9b::a9fe:a9fe]/latest/meta-data/',
      'http://[64:ff9b::169.254.169.254]/',
      'http://[64:ff9b::7f00:1]/',
      'http://[64:ff9b:1::a00:1]/',
      'http://[2002:7f00:1::]/',
      'http://[2002:a9fe:a9fe::1]/',
      `http://[${teredo('65.54.227.120', '127.0.0.1')}]/`,
      'http://[2001:0:4136:e378:8000:63bf:80ff:fffe]:9000/',
      'http://[::]/',
      'http://[fe80::1]/',
      'http://[fec0::1]/',
      'http://[fd00::1]/',
      'http://[ff02::1]/',
      'http://[2001:db8::1]/',
      'http://[100::1]/',
      'http://[2001:10::1]/',
      'http://[4000::1]/',
      // IPv4 oddities: WHATWG URL parsing already writes these as dotted quads
      'http://0x7f.1/',
      'http://2130706433/',
      'http://127.1/',
      'http://0177.0.0.1/',
      'http://0x7f000001/',
      'http://017700000001/',
      'http://127.0.0.1./',
      'http://0xa9.0xfe.0xa9.0xfe/',
      'http://0/',
      'http://localhost./',
    ];
    const passed: string[] = [];
    for (const url of urls) {
      try {
        await guard.checkUrl(url);
        passed.push(url);
      } catch (err) {
        if (!/not public|not a valid/.test(String(err))) passed.push(`${url} (${err})`);
      }
    }
    assert.deepEqual(passed, []);
    for (const url of [
      'http://8.8.8.8/',
      'http://[2606:4700::1111]/',
      'https://[2606:4700:4700::1111]:443/x',
      'http://[64:ff9b::808:808]/',
      'http://[::ffff:808:808]/',
    ]) {
      assert.equal((await guard.checkUrl(url)).protocol.startsWith('http'), true, url); // classified only: nothing connects
    }
  });

  test('host names that are IPv4 oddities are judged as the address they spell, not sent to DNS', async () => {
    let asked = 0;
    const g = new OutboundGuard([], async () => {
      asked++;
      return [{ address: '93.184.216.34', family: 4 }];
    });
    for (const host of ['0x7f.1', '2130706433', '127.1', '0177.0.0.1', '0xa9.0xfe.0xa9fe', '[::7f00:1]', '::7f00:1']) {
      await assert.rejects(g.resolve(host), /not public/, host);
      const err = await new Promise<Error | null>((resolve) => g.lookup(host, { all: true }, (e) => resolve(e)));
      assert.match(String(err), /not public/, host);
    }
    assert.equal(asked, 0);
  });

  const dns = fixed({
    'compat.example': ['::7f00:1'],
    'compat-dotted.example': ['::127.0.0.1'],
    'mapped-hex.example': ['::ffff:7f00:1'],
    'translated.example': ['::ffff:0:a9fe:a9fe'],
    'nat64-meta.example': ['64:ff9b::a9fe:a9fe'],
    'nat64-local.example': ['64:ff9b:1::a00:1'],
    '6to4.example': ['2002:7f00:1::1'],
    'teredo.example': [teredo('65.54.227.120', '127.0.0.1')],
    'site-local.example': ['fec0::1'],
    'doc.example': ['2001:db8::1'],
    'discard.example': ['100::1'],
    'unassigned.example': ['::1:7f00:1'],
    'mixed6.example': ['2606:4700::1111', '64:ff9b::a00:1'],
    'nat64-public.example': ['64:ff9b::808:808'],
    'public6.example': ['2606:4700::1111', '2001:4860:4860::8888'],
  });

  test('DNS answers in any of these spellings are refused, at check time and at connect time', async () => {
    const g = new OutboundGuard([], dns);
    const names = [
      'compat.example',
      'compat-dotted.example',
      'mapped-hex.example',
      'translated.example',
      'nat64-meta.example',
      'nat64-local.example',
      '6to4.example',
      'teredo.example',
      'site-local.example',
      'doc.example',
      'discard.example',
      'unassigned.example',
      'mixed6.example',
    ];
    const passed: string[] = [];
    for (const name of names) {
      try {
        await g.checkUrl(`http://${name}/`);
        passed.push(`check ${name}`);
      } catch (err) {
        assert.match(String(err), /resolves to an address that is not public/, name);
      }
      const err = await new Promise<Error | null>((resolve) => g.lookup(name, { all: true }, (e) => resolve(e)));
      if (!/not public/.test(String(err))) passed.push(`lookup ${name}`);
    }
    assert.deepEqual(passed, []);
    await g.checkUrl('http://public6.example/');
    await g.checkUrl('http://nat64-public.example/');
  });

  test('allow list: an IPv4 CIDR covers that IPv4 and its ::ffff: spelling, never a tunnel or translator carrying it', async () => {
    const g = new OutboundGuard(
      ['127.0.0.0/8', '10.1.2.3', '::ffff:192.168.0.0/112', '64:ff9b::a00:0/104', 'files.internal'],
      fixed({ 'files.internal': ['::7f00:1', '64:ff9b::7f00:1'], 'other.internal': ['::7f00:1'] }),
    );
    // The same destination: a dual-stack socket connecting to ::ffff:a.b.c.d connects to a.b.c.d.
    for (const ip of [
      '127.0.0.1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '10.1.2.3',
      '::ffff:a01:203',
      '192.168.7.7',
      '::ffff:192.168.7.7',
    ])
      assert.equal(g.isAllowedAddress(ip), true, ip);
    // Another destination: a tunnel (6to4, Teredo, compatible) or a translator (NAT64, SIIT) reached at an IPv6 address.
    for (const ip of [
      '::127.0.0.1',
      '::7f00:1',
      '::ffff:0:7f00:1',
      '64:ff9b::7f00:1',
      '2002:7f00:1::1',
      teredo('65.54.227.120', '127.0.0.1'),
      '::a01:203',
      '64:ff9b::c0a8:707',
      '10.1.2.4',
      '::ffff:10.1.2.4',
    ]) {
      assert.equal(g.isAllowedAddress(ip), false, ip);
    }
    // An IPv6 CIDR is taken as written: here the operator allowed NAT64 to 10/8.
    assert.equal(g.isAllowedAddress('64:ff9b::a01:203'), true);
    assert.equal(g.isAllowedAddress('64:ff9b::10.200.0.1'), true);
    await g.checkUrl('http://[64:ff9b::a00:1]/');
    await g.checkUrl('http://[::ffff:7f00:1]:9000/');
    await assert.rejects(g.checkUrl('http://[::127.0.0.1]/'), /not public/);
    await assert.rejects(g.checkUrl('http://[2002:7f00:1::]/'), /not public/);
    // A name the operator allowed keeps working whatever it resolves to; another name does not.
    await g.checkUrl('http://files.internal/');
    await assert.rejects(g.checkUrl('http://other.internal/'), /not public/);
  });
});
