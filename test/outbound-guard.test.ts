import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { OutboundGuard } from '../src/outbound/guard.ts';

const fixed = (map: Record<string, string[]>) => async (host: string) => {
  const list = map[host];
  if (!list) throw Object.assign(new Error('nx'), { code: 'ENOTFOUND' });
  return list.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
};

describe('outbound address checks', () => {
  const guard = new OutboundGuard([], fixed({ 'public.example': ['93.184.216.34'], 'mixed.example': ['93.184.216.34', '10.0.0.5'], 'v6.example': ['2606:2800:220:1:248:1893:25c8:1946'] }));

  test('public unicast addresses pass', () => {
    for (const ip of ['93.184.216.34', '8.8.8.8', '2606:2800:220:1:248:1893:25c8:1946']) assert.equal(guard.isAllowedAddress(ip), true, ip);
  });

  test('loopback, private, link-local, metadata, CGNAT, multicast, ULA and mapped forms are refused', () => {
    for (const ip of [
      '127.0.0.1', '127.1.2.3', '0.0.0.0', '10.0.0.1', '10.255.255.255', '172.16.0.1', '172.31.255.254', '192.168.1.1',
      '169.254.169.254', '100.64.0.1', '224.0.0.1', '255.255.255.255', '::1', '::', 'fc00::1', 'fd12:3456::1', 'fe80::1',
      '::ffff:127.0.0.1', '::ffff:10.0.0.1', '::ffff:169.254.169.254', 'not-an-ip',
    ]) {
      assert.equal(guard.isAllowedAddress(ip), false, ip);
    }
    assert.equal(guard.isAllowedAddress('172.32.0.1'), true, 'just outside 172.16/12');
  });

  test('URLs: literal addresses, names resolving anywhere private, localhost and non-http schemes are refused', async () => {
    await guard.checkUrl('https://public.example/x');
    await guard.checkUrl('http://v6.example/');
    for (const url of ['http://127.0.0.1/', 'http://[::1]:8080/', 'http://mixed.example/', 'http://localhost/', 'http://a.localhost/', 'file:///etc/passwd', 'gopher://x', 'http://169.254.169.254/latest/meta-data/', 'http://[::ffff:7f00:1]/']) {
      await assert.rejects(guard.checkUrl(url), /not public|only http|not a valid/, url);
    }
    await assert.rejects(guard.checkUrl('http://unknown.example/'), /cannot resolve/);
  });

  test('the operator allow list exempts CIDRs and host names, nothing more', async () => {
    const g = new OutboundGuard(['127.0.0.0/8', 'intranet.local', '10.1.2.3'], fixed({ 'intranet.local': ['192.168.5.5'], 'other.local': ['192.168.5.5'] }));
    await g.checkUrl('http://127.0.0.1:9000/');
    await g.checkUrl('http://intranet.local/');
    assert.equal(g.isAllowedAddress('10.1.2.3'), true);
    assert.equal(g.isAllowedAddress('10.1.2.4'), false);
    await assert.rejects(g.checkUrl('http://other.local/'), /not public/);
    await assert.rejects(g.checkUrl('http://[::1]/'), /not public/);
  });

  test('the connect-time lookup applies the same checks (no rebinding between check and connect)', async () => {
    let calls = 0;
    const g = new OutboundGuard([], async () => (++calls === 1 ? [{ address: '93.184.216.34', family: 4 }] : [{ address: '127.0.0.1', family: 4 }]));
    await g.checkUrl('http://rebind.example/');
    const err = await new Promise<Error | null>((resolve) => g.lookup('rebind.example', { all: true }, (e) => resolve(e)));
    assert.match(String(err), /not public/);
  });
});
