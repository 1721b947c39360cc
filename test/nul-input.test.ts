// A NUL (%00) in any path or query parameter, from the attacker's side. PostgreSQL's text cannot
// hold one and SQLite's FTS5 phrase ends at one: before the check in src/http/validation.ts, a
// search, a custom id, a folder number, a key id, a delivery id or a delivery path with %00 made
// a statement fail, and the client got 500. Now every such request is refused with 400, on both
// databases, and the same request without the NUL still answers.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';
import { call } from './helpers/http.ts';

for (const dialect of DIALECTS) {
  describe(`a NUL in the request's path or query on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await makeHarness(dialect.name);
    });
    after(() => h?.close());

    test('is refused with 400 wherever it is; without it, the same request answers as usual', async () => {
      const ws = h.ws.workspace_id;
      const cases: [string, string][] = [
        ['GET', '/api/v1/files?search=%00abc'],
        ['GET', '/api/v1/files?search=forest%00'],
        ['GET', '/api/v1/files?name=ab%00cd'],
        ['GET', '/api/v1/files?custom_id=%00'],
        ['GET', '/api/v1/files?folder_no=%00'],
        ['GET', '/api/v1/files?tags=a%00'],
        ['GET', '/api/v1/folders?search=%00abc'],
        ['GET', '/api/v1/folders?parent_folder_no=%00'],
        ['GET', '/api/v1/sources?search=%00abc'],
        ['DELETE', '/api/v1/keys/%00'],
        ['GET', '/api/v1/sources/%00'],
        ['POST', '/api/v1/webhooks/deliveries/%00/redeliver'],
        ['PATCH', '/api/v1/files/%00'],
        ['GET', `/${ws}/a%00.png`],
      ];
      for (const [method, url] of cases) {
        const r = await call(h.app, method, url, {
          headers: { 'x-api-key': h.ws.private_key },
          body: method === 'PATCH' ? {} : undefined,
        });
        assert.equal(r.status, 400, `${method} ${url}: ${r.raw.slice(0, 200)}`);
        assert.equal(r.body.errorCode, 'VALIDATION_FAILED', `${method} ${url}`);
        assert.match(r.body.message, /must not contain NUL/);
      }
      // Without the NUL: answers of the usual kinds (never 400 for the character, never 500).
      for (const [method, url] of cases) {
        const clean = url.replaceAll('%00', '');
        const r = await call(h.app, method, clean, {
          headers: { 'x-api-key': h.ws.private_key },
          body: method === 'PATCH' ? {} : undefined,
        });
        assert.ok(r.status < 500, `${method} ${clean}: ${r.status}`);
      }
      // "%2500" is a percent sign followed by 00, not a NUL: a search for it is an ordinary search.
      const literal = await call(h.app, 'GET', '/api/v1/files?search=%2500', {
        headers: { 'x-api-key': h.ws.private_key },
      });
      assert.equal(literal.status, 200);
    });
  });
}
