// Hostile names and JSON (issue 15, items 4 and 7). Every path that takes a name, a folder, tags
// or a custom id gets the same table of hostile strings and must answer a 400 in the documented
// shape with nothing written: no row, no stored object, no byte fetched. Metadata is bounded in
// depth (32), keys (1,000) and size (16 KiB) on every path that takes it, and no JSON body, however
// deeply nested, makes any JSON endpoint answer 5xx.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { ResolvedAddress } from '../src/outbound/guard.ts';
import { DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';
import { call, type Reply } from './helpers/http.ts';
import { localServer } from './helpers/servers.ts';

/** Strings no file name, folder name or folder path segment may be. */
const HOSTILE_NAMES: [string, string][] = [
  ['a lone high surrogate', 'x\ud800y.bin'],
  ['a lone low surrogate', 'x\udc00y.bin'],
  ['a surrogate pair cut off at the end', 'photo\ud83d'],
  ['a surrogate pair in the wrong order', '\ude00\ud83d.bin'],
  ['NUL', 'nul\u0000.bin'],
  ['a tab', 'tab\t.bin'],
  ['a line feed', 'line\nbreak.bin'],
  ['CR LF and a header', 'crlf\r\nX-Evil: 1.bin'],
  ['an ANSI escape', 'esc\u001b[31m.bin'],
  ['DEL', 'del\u007f.bin'],
  ['NEL (C1)', 'nel\u0085.bin'],
  ['CSI (C1)', 'csi\u009b.bin'],
  ['a line separator', 'ls\u2028.bin'],
  ['a paragraph separator', 'ps\u2029.bin'],
  ['a slash', 'a/b.bin'],
  ['a backslash', 'a\\b.bin'],
  ['a right-to-left override', 'evil\u202egnp.exe'],
  ['a left-to-right embedding', 'lre\u202a.bin'],
  ['a pop directional formatting', 'pdf\u202c.bin'],
  ['a right-to-left isolate', 'rli\u2067x\u2069.bin'],
  ['a first strong isolate', 'fsi\u2068.bin'],
  ['"."', '.'],
  ['".."', '..'],
  ['256 bytes of ASCII', `${'x'.repeat(252)}.bin`],
  ['256 bytes in 130 characters', `${'é'.repeat(126)}.bin`],
  ['a leading space', ' lead.bin'],
];

/** Names that look odd but are names: accepted everywhere, stored NFC. */
const GOOD_NAMES: [string, string, string][] = [
  ['two dots inside', 'a..b.txt', 'a..b.txt'],
  ['three dots', '...', '...'],
  ['a leading double dot', '..hidden', '..hidden'],
  ['NFD, stored as NFC', 'cafe\u0301.txt', 'caf\u00e9.txt'],
  ['255 bytes of ASCII', `${'x'.repeat(251)}.bin`, `${'x'.repeat(251)}.bin`],
  ['300 bytes as NFD, 200 as NFC', 'e\u0301'.repeat(100), '\u00e9'.repeat(100)],
  [
    'an emoji family (ZWJ sequence)',
    '\u{1F468}\u200d\u{1F469}\u200d\u{1F467}.png',
    '\u{1F468}\u200d\u{1F469}\u200d\u{1F467}.png',
  ],
  ['fullwidth solidus', 'a\uff0fb.txt', 'a\uff0fb.txt'],
];

/** Lone surrogates cannot travel in a form body or a percent-encoded header (UTF-8 has no encoding for them). */
const hasLoneSurrogate = (s: string) => !(s as string & { isWellFormed(): boolean }).isWellFormed();

const HOSTILE_TAGS: [string, string][] = [
  ['a lone surrogate', 'x\ud800'],
  ['NUL', 'nul\u0000'],
  ['a line feed', 'a\nb'],
  ['an ANSI escape', '\u001b[2J'],
  ['DEL', 'del\u007f'],
  ['NEL (C1)', 'nel\u0085'],
  ['a right-to-left override', 'evil\u202etxt'],
  ['a left-to-right isolate', 'lri\u2066x'],
  ['101 characters', 't'.repeat(101)],
];

const HOSTILE_CUSTOM_IDS: [string, string][] = [
  ['a lone surrogate', 'order-\udfff'],
  ['NUL', 'order\u0000'],
  ['CR LF', 'order\r\nX-Evil: 1'],
  ['DEL', 'order\u007f'],
  ['CSI (C1)', 'order\u009b'],
  ['a right-to-left override', 'order\u202e1'],
  ['a pop directional isolate', 'order\u2069'],
  ['256 characters', 'c'.repeat(256)],
];

/** `{"a":{"a":…1…}}`, n objects deep, as text: JSON.stringify itself overflows the stack on it. */
const deepObject = (n: number, leaf = '1') => '{"a":'.repeat(n) + leaf + '}'.repeat(n);
const deepArray = (n: number) => '['.repeat(n) + ']'.repeat(n);
const manyKeys = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 0]));

/** Every row that matters and every file under storage: a refusal must leave all of it as it was. */
async function snapshot(h: Harness): Promise<string> {
  const db = h.services.db.kysely;
  const tables = [
    'files',
    'folders',
    'blobs',
    'storage_intents',
    'multipart_sessions',
    'upload_tokens',
    'webhook_deliveries',
    'sources',
  ] as const;
  const rows: Record<string, unknown> = {};
  for (const t of tables) rows[t] = await db.selectFrom(t).selectAll().execute();
  for (const t of tables)
    (rows[t] as Record<string, unknown>[]).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
  const walk = (dir: string): string[] => {
    try {
      return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)],
      );
    } catch {
      return [];
    }
  };
  rows.stored = walk(join(h.config.dataDir, 'storage')).sort();
  return JSON.stringify(rows);
}

function assertRefused(res: Reply, label: string, messageLike?: RegExp) {
  assert.equal(res.status, 400, `${label}: ${res.status} ${res.raw.slice(0, 300)}`);
  assert.equal(res.body?.success, false, label);
  assert.equal(res.body.error, 'Validation failed', label);
  assert.equal(res.body.errorCode, 'VALIDATION_FAILED', label);
  assert.equal(typeof res.body.message, 'string', label);
  if (messageLike) assert.match(res.body.message, messageLike, label);
}

/** DNS for the remote-upload origin: one allowed name on loopback. */
const resolver = async (host: string): Promise<ResolvedAddress[]> => {
  if (host === 'files.test') return [{ address: '127.0.0.1', family: 4 }];
  throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
};

for (const dialect of DIALECTS) {
  describe(`hostile names and JSON on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let origin: Awaited<ReturnType<typeof localServer>>;
    let fetched = 0;
    let fileNo: string;
    let folderNo: string;
    let n = 0;
    const unique = (prefix: string) => `${prefix}-${++n}`;
    const remoteUrl = (name = 'remote.bin') => `http://files.test:${origin.port}/${name}`;

    const json = (method: string, url: string, body: unknown) => call(h.app, method, url, { body, headers: h.auth });
    const rawJson = (method: string, url: string, text: string) =>
      call(h.app, method, url, { rawBody: text, headers: { ...h.auth, 'content-type': 'application/json' } });
    async function form(fields: Record<string, string>): Promise<Reply> {
      const f = new FormData();
      f.append('file', new Blob([`bytes of ${fields.file_name ?? 'nothing'}`]), 'upload.bin');
      for (const [k, v] of Object.entries(fields)) f.append(k, v);
      const request = new Request('http://x/', { method: 'POST', body: f });
      const res = await h.app.inject({
        method: 'POST',
        url: '/api/v1/uploads',
        headers: { ...h.auth, 'content-type': request.headers.get('content-type')! },
        payload: Buffer.from(await request.arrayBuffer()),
      });
      let body: any;
      try {
        body = JSON.parse(res.body);
      } catch {}
      return { status: res.statusCode, headers: res.headers, body, raw: res.body };
    }
    const multipartStart = (fields: Record<string, unknown>) =>
      json('POST', '/api/v1/multipart/start', { size: 10, format: 'application/octet-stream', ...fields });
    const mint = (fields: Record<string, unknown>) => json('POST', '/api/v1/generate-token', fields);
    async function tokenUpload(token: string, fileName: string): Promise<Reply> {
      const res = await h.app.inject({
        method: 'POST',
        url: `/api/v1/uploads/${token}`,
        headers: { 'content-type': 'application/octet-stream', 'x-file-name': encodeURIComponent(fileName) },
        payload: Buffer.from('token bytes'),
      });
      let body: any;
      try {
        body = JSON.parse(res.body);
      } catch {}
      return { status: res.statusCode, headers: res.headers, body, raw: res.body };
    }

    /** Sends it, expects the documented 400, and checks that nothing anywhere changed. */
    async function refusedAndNothingWritten(label: string, send: () => Promise<Reply>, messageLike?: RegExp) {
      const before = await snapshot(h);
      const fetchedBefore = fetched;
      const res = await send();
      assertRefused(res, label, messageLike);
      assert.equal(await snapshot(h), before, `${label}: a refusal wrote nothing`);
      assert.equal(fetched, fetchedBefore, `${label}: nothing was fetched`);
    }

    before(async () => {
      origin = await localServer((_req, res) => {
        fetched++;
        res.writeHead(200, { 'content-type': 'application/octet-stream' }).end('remote bytes');
      });
      h = await makeHarness(dialect.name, { config: { outboundAllow: ['files.test'] }, services: { resolver } });
      const up = await form({ file_name: 'anchor.txt', folder: 'anchor' });
      assert.equal(up.status, 201, up.raw);
      fileNo = up.body.file_no;
      const folder = await json('POST', '/api/v1/folders', { name: 'rename-me' });
      assert.equal(folder.status, 201, folder.raw);
      folderNo = folder.body.data.folder_no;
    });
    after(async () => {
      await h?.close();
      await origin?.close();
    });

    describe('file names', () => {
      test('direct upload (form field file_name)', async () => {
        for (const [label, name] of HOSTILE_NAMES) {
          if (hasLoneSurrogate(name)) continue; // a form body is UTF-8: the browser sends U+FFFD instead
          await refusedAndNothingWritten(`form file_name with ${label}`, () => form({ file_name: name }), /file_name/);
        }
      });

      test('remote upload (JSON file_name): refused before anything is fetched', async () => {
        for (const [label, name] of HOSTILE_NAMES) {
          await refusedAndNothingWritten(
            `remote file_name with ${label}`,
            () => json('POST', '/api/v1/uploads/remote', { remote_url: remoteUrl(), file_name: name }),
            /file_name/,
          );
        }
      });

      test('multipart start (JSON file_name)', async () => {
        for (const [label, name] of HOSTILE_NAMES) {
          await refusedAndNothingWritten(
            `multipart start file_name with ${label}`,
            () => multipartStart({ file_name: name }),
            /file_name/,
          );
        }
      });

      test('upload token: minted with a hostile file_name, or uploaded with a hostile X-File-Name', async () => {
        for (const [label, name] of HOSTILE_NAMES) {
          await refusedAndNothingWritten(
            `generate-token file_name with ${label}`,
            () => mint({ file_name: name }),
            /file_name/,
          );
        }
        const minted = await mint({ file_name: 'token.bin' });
        assert.equal(minted.status, 201, minted.raw);
        for (const [label, name] of HOSTILE_NAMES) {
          if (hasLoneSurrogate(name)) continue; // encodeURIComponent cannot write one; a raw header is Latin-1
          await refusedAndNothingWritten(
            `X-File-Name with ${label}`,
            () => tokenUpload(minted.body.token, name),
            /file_name/,
          );
        }
        // Every refusal left the token usable.
        const ok = await tokenUpload(minted.body.token, 'a..b-token.bin');
        assert.equal(ok.status, 201, ok.raw);
        assert.equal(ok.body.name, 'a..b-token.bin');
      });

      test('file rename', async () => {
        // A rename keeps the file's extension ("." on x.txt is "..txt", a valid name): those two are not hostile here.
        for (const [label, name] of HOSTILE_NAMES.filter(([, n]) => n !== '.' && n !== '..')) {
          await refusedAndNothingWritten(
            `rename to ${label}`,
            () => json('PATCH', `/api/v1/files/${fileNo}/rename`, { name }),
            /name/,
          );
        }
      });

      test('names that only look odd are accepted on every path, stored NFC', async () => {
        for (const [label, name, stored] of GOOD_NAMES) {
          const direct = await form({ file_name: name, folder: unique('good-direct') });
          assert.equal(direct.status, 201, `form ${label}: ${direct.raw.slice(0, 300)}`);
          assert.equal(direct.body.name, stored, `form ${label}`);
          const remote = await json('POST', '/api/v1/uploads/remote', {
            remote_url: remoteUrl(),
            file_name: name,
            folder: unique('good-remote'),
          });
          assert.equal(remote.status, 201, `remote ${label}: ${remote.raw.slice(0, 300)}`);
          assert.equal(remote.body.name, stored, `remote ${label}`);
          const start = await multipartStart({ file_name: name, folder: unique('good-multipart') });
          assert.equal(start.status, 201, `multipart ${label}: ${start.raw.slice(0, 300)}`);
          const minted = await mint({ file_name: name, folder: unique('good-token') });
          assert.equal(minted.status, 201, `token ${label}: ${minted.raw.slice(0, 300)}`);
          assert.equal(minted.body.policy.file_name, stored, `token ${label}`);
          const viaHeader = await tokenUpload(minted.body.token, name);
          assert.equal(viaHeader.status, 201, `X-File-Name ${label}: ${viaHeader.raw.slice(0, 300)}`);
          assert.equal(viaHeader.body.name, stored, `X-File-Name ${label}`);
          const plain = await form({ file_name: `plain-${n}.bin`, folder: unique('good-rename') });
          assert.equal(plain.status, 201, plain.raw);
          const renamed = await json('PATCH', `/api/v1/files/${plain.body.file_no}/rename`, { name });
          assert.equal(renamed.status, 200, `rename ${label}: ${renamed.raw.slice(0, 300)}`);
          // Renames keep the extension (.bin) unless the name already ends in it.
          assert.equal(renamed.body.data.name, stored.endsWith('.bin') ? stored : `${stored}.bin`, `rename ${label}`);
        }
      });
      test('random_prefix on a name at the 255-byte limit: the new name fits, keeps its extension and splits no character', async () => {
        const LONG: [string, string][] = [
          ['255 bytes of ASCII', `${'x'.repeat(251)}.bin`],
          ['254 bytes of two-byte characters', `${'é'.repeat(125)}.bin`],
          ['252 bytes of emoji (surrogate pairs)', `${'\u{1F600}'.repeat(62)}.bin`],
          ['no extension, ending in an emoji', '\u{1F600}'.repeat(63)],
        ];
        const fits = (label: string, stored: string, original: string) => {
          assert.ok(!hasLoneSurrogate(stored), `${label}: no split character in ${JSON.stringify(stored)}`);
          assert.ok(Buffer.byteLength(stored) <= 255, `${label}: ${Buffer.byteLength(stored)} bytes`);
          const ext = original.endsWith('.bin') ? '.bin' : '';
          assert.ok(stored.endsWith(ext) && stored !== original, `${label}: ${stored}`);
        };
        for (const [label, name] of LONG) {
          const direct = await form({ file_name: name, random_prefix: 'true', folder: unique('long') });
          assert.equal(direct.status, 201, `form ${label}: ${direct.raw.slice(0, 300)}`);
          fits(`form ${label}`, direct.body.name, name);
          const remote = await json('POST', '/api/v1/uploads/remote', {
            remote_url: remoteUrl(),
            file_name: name,
            random_prefix: true,
            folder: unique('long'),
          });
          assert.equal(remote.status, 201, `remote ${label}: ${remote.raw.slice(0, 300)}`);
          fits(`remote ${label}`, remote.body.name, name);
          const started = await multipartStart({ file_name: name, random_prefix: true, folder: unique('long') });
          assert.equal(started.status, 201, `multipart ${label}: ${started.raw.slice(0, 300)}`);
          const part = new URL(started.body.parts[0]);
          const put = await h.app.inject({
            method: 'PUT',
            url: `${part.pathname}${part.search}`,
            headers: { 'content-type': 'application/octet-stream' },
            payload: Buffer.from('0123456789'),
          });
          assert.equal(put.statusCode, 200, put.body);
          const done = await json('POST', '/api/v1/multipart/complete', { session_id: started.body.session_id });
          assert.equal(done.status, 200, `multipart complete ${label}: ${done.raw.slice(0, 300)}`);
          fits(`multipart ${label}`, done.body.name, name);
          assert.match(done.body.name, /^[A-Za-z0-9]{8}_/, 'a prefix for multipart');
        }
      });
    });

    describe('folder names', () => {
      test('folder create and rename', async () => {
        for (const [label, name] of HOSTILE_NAMES) {
          await refusedAndNothingWritten(
            `create folder ${label}`,
            () => json('POST', '/api/v1/folders', { name }),
            /name/,
          );
          await refusedAndNothingWritten(
            `rename folder to ${label}`,
            () => json('POST', `/api/v1/folders/rename/${folderNo}`, { name }),
            /name/,
          );
        }
        for (const [label, name, stored] of GOOD_NAMES) {
          const created = await json('POST', '/api/v1/folders', { name });
          assert.equal(created.status, 201, `create folder ${label}: ${created.raw.slice(0, 300)}`);
          assert.equal(created.body.data.name, stored, `create folder ${label}`);
        }
      });

      test('each segment of an upload folder path, on every upload path', async () => {
        for (const [label, segment] of HOSTILE_NAMES) {
          if (segment.includes('/')) continue; // a slash separates segments
          const folder = `ok/${segment}/below`;
          if (!hasLoneSurrogate(segment))
            await refusedAndNothingWritten(
              `form folder with ${label}`,
              () => form({ file_name: 'f.bin', folder }),
              /folder/,
            );
          await refusedAndNothingWritten(
            `remote folder with ${label}`,
            () => json('POST', '/api/v1/uploads/remote', { remote_url: remoteUrl(), folder }),
            /folder/,
          );
          await refusedAndNothingWritten(
            `multipart folder with ${label}`,
            () => multipartStart({ file_name: 'f.bin', folder }),
            /folder/,
          );
          await refusedAndNothingWritten(
            `token folder with ${label}`,
            () => mint({ file_name: 'f.bin', folder }),
            /folder/,
          );
        }
      });
    });

    describe('tags and custom_id', () => {
      test('file update (and multipart start): hostile tags and custom ids are refused and change nothing; "/" is fine in both', async () => {
        for (const [label, tag] of HOSTILE_TAGS) {
          await refusedAndNothingWritten(
            `add_tags with ${label}`,
            () => json('PATCH', `/api/v1/files/${fileNo}`, { add_tags: ['fine', tag] }),
            /tag/,
          );
          await refusedAndNothingWritten(
            `remove_tags with ${label}`,
            () => json('PATCH', `/api/v1/files/${fileNo}`, { remove_tags: [tag] }),
            /tag/,
          );
          await refusedAndNothingWritten(
            `multipart tags with ${label}`,
            () => multipartStart({ file_name: 'tagged.bin', tags: [tag] }),
            /tag/,
          );
        }
        for (const [label, id] of HOSTILE_CUSTOM_IDS) {
          await refusedAndNothingWritten(
            `custom_id with ${label}`,
            () => json('PATCH', `/api/v1/files/${fileNo}`, { custom_id: id }),
            /custom_id/,
          );
          await refusedAndNothingWritten(
            `multipart custom_id with ${label}`,
            () => multipartStart({ file_name: 'id.bin', custom_id: id }),
            /custom_id/,
          );
        }
        // What stays allowed: a tag may hold "/" and is stored NFC; a custom id is an opaque
        // reference, kept exactly as sent, and may hold "/" too.
        const res = await json('PATCH', `/api/v1/files/${fileNo}`, {
          add_tags: ['2026/summer', 'cafe\u0301', '\u{1F525}'],
          custom_id: 'orders/2026/7',
        });
        assert.equal(res.status, 200, res.raw);
        assert.deepEqual(res.body.data.tags, ['2026/summer', 'caf\u00e9', '\u{1F525}']);
        assert.equal(res.body.data.custom_id, 'orders/2026/7');
      });
    });

    describe('metadata: at most 32 levels deep, 1,000 keys and 16 KiB', () => {
      /** A file of its own for each accepted update: metadata merges, so keys would add up. */
      let metaFileNo = '';
      const freshFile = async () => {
        const up = await form({ file_name: `${unique('meta-target')}.bin` });
        assert.equal(up.status, 201, up.raw);
        metaFileNo = up.body.file_no;
      };
      /** Every path that takes metadata, with the metadata as JSON text. */
      const PATHS: [string, (metadataJson: string) => Promise<Reply>][] = [
        ['direct upload (form field)', (m) => form({ file_name: `${unique('meta')}.bin`, metadata: m })],
        [
          'remote upload (JSON)',
          (m) =>
            rawJson(
              'POST',
              '/api/v1/uploads/remote',
              `{"remote_url":${JSON.stringify(remoteUrl())},"file_name":"${unique('meta')}.bin","metadata":${m}}`,
            ),
        ],
        [
          'remote upload (JSON text in a string)',
          (m) =>
            json('POST', '/api/v1/uploads/remote', {
              remote_url: remoteUrl(),
              file_name: `${unique('meta')}.bin`,
              metadata: m,
            }),
        ],
        [
          'multipart start',
          (m) =>
            rawJson(
              'POST',
              '/api/v1/multipart/start',
              `{"file_name":"${unique('meta')}.bin","size":10,"format":"application/octet-stream","metadata":${m}}`,
            ),
        ],
        [
          'generate-token',
          (m) => rawJson('POST', '/api/v1/generate-token', `{"file_name":"${unique('meta')}.bin","metadata":${m}}`),
        ],
        ['file update', (m) => rawJson('PATCH', `/api/v1/files/${metaFileNo}`, `{"metadata":${m}}`)],
      ];

      for (const [path, send] of PATHS) {
        test(path, async () => {
          await freshFile();
          await refusedAndNothingWritten(`${path}: 5,000 levels`, () => send(deepObject(5000)), /32 levels/);
          await refusedAndNothingWritten(
            `${path}: 5,000 levels of arrays`,
            () => send(`{"a":${deepArray(5000)}}`),
            /32 levels/,
          );
          await refusedAndNothingWritten(`${path}: 33 levels`, () => send(deepObject(33)), /32 levels/);
          await refusedAndNothingWritten(
            `${path}: 1,001 keys`,
            () => send(JSON.stringify({ group: manyKeys(1000) })),
            /1000 keys/,
          );
          await refusedAndNothingWritten(
            `${path}: 17 KiB`,
            () => send(JSON.stringify({ s: 'x'.repeat(17 * 1024) })),
            /16 KiB/,
          );
          await refusedAndNothingWritten(
            `${path}: 16 KiB of two-byte characters`,
            () => send(JSON.stringify({ s: 'é'.repeat(8200) })),
            /16 KiB/,
          );
          for (const [what, m] of [
            ['32 levels', deepObject(32)],
            ['1,000 keys', JSON.stringify(manyKeys(1000))],
            ['31 levels of arrays', `{"a":${deepArray(30)}}`],
          ]) {
            await freshFile();
            const res = await send(m);
            assert.ok(
              res.status === 200 || res.status === 201,
              `${path}: ${what} is accepted: ${res.status} ${res.raw.slice(0, 300)}`,
            );
          }
        });
      }
    });

    test('a deeply nested JSON body on any JSON endpoint is a 4xx in the error shape, never a 5xx', async () => {
      const spec = h.app.swagger() as any;
      const source = await json('POST', '/api/v1/sources', {
        name: 'sweep-source',
        type: 'image_source',
        configuration: { base_url: 'https://x.example.com' },
      });
      assert.equal(source.status, 201, source.raw);
      const ids: Record<string, string> = {
        file_no: fileNo,
        folder_no: folderNo,
        sourceId: source.body.data.id,
        id: source.body.data.id,
      };
      /** A minimal body of the schema's required members, so the deep value reaches the handler. */
      const sample = (schema: any, name = ''): unknown => {
        if (!schema) return 'x';
        if (schema.anyOf) return sample(schema.anyOf[0], name);
        if (schema.enum) return schema.enum[0];
        if (schema.const !== undefined) return schema.const;
        switch (schema.type) {
          case 'object':
            return Object.fromEntries(
              (schema.required ?? []).map((k: string) => [k, sample(schema.properties?.[k], k)]),
            );
          case 'array':
            return [];
          case 'integer':
          case 'number':
            return Math.max(schema.minimum ?? 1, 1);
          case 'boolean':
            return false;
          default:
            return name.endsWith('_url')
              ? remoteUrl('sweep.bin')
              : name === 'type'
                ? 'image_source'
                : `sweep${++n}.bin`;
        }
      };
      const deepValues: [string, string][] = [
        ['5,000 nested objects', deepObject(5000)],
        ['5,000 nested arrays', deepArray(5000)],
        ['100,000 nested arrays', deepArray(100_000)],
        ['5,000 nested objects around a __proto__', deepObject(5000, '{"__proto__":{"polluted":1}}')],
      ];
      let endpoints = 0;
      for (const [path, item] of Object.entries<any>(spec.paths)) {
        for (const [method, op] of Object.entries<any>(item)) {
          const schema = op?.requestBody?.content?.['application/json']?.schema;
          if (!schema) continue;
          endpoints++;
          const url = path.replace(/\{(\w+)\}/g, (_m, p: string) => ids[p] ?? 'x');
          const base = sample(schema) as Record<string, unknown>;
          const members = [...Object.keys(schema.properties ?? {}), 'not_in_the_schema'];
          const bodies: [string, string][] = deepValues.map(([what, v]) => [`the whole body is ${what}`, v]);
          for (const m of members) {
            const rest = { ...base };
            delete rest[m];
            const prefix = JSON.stringify(rest).slice(0, -1);
            for (const [what, v] of deepValues)
              bodies.push([`${m} is ${what}`, `${prefix}${prefix.length > 1 ? ',' : ''}${JSON.stringify(m)}:${v}}`]);
          }
          if (path === '/api/v1/sources' && method === 'post') {
            for (const type of ['google_cloud', 'image_source', 's3', 'azure']) {
              for (const field of ['service_account_json', 'base_url', 'endpoint', 'connection_string']) {
                bodies.push([
                  `${type} ${field} is 5,000 nested objects`,
                  `{"name":"deep-${++n}","type":"${type}","configuration":{"${field}":${deepObject(5000)}}}`,
                ]);
              }
            }
          }
          for (const [what, text] of bodies) {
            const res = await call(h.app, method.toUpperCase(), url, {
              rawBody: text,
              headers: { ...h.auth, 'content-type': 'application/json' },
            });
            const label = `${method.toUpperCase()} ${path}: ${what}`;
            assert.ok(res.status < 500, `${label}: ${res.status} ${res.raw.slice(0, 300)}`);
            if (res.status >= 400) {
              assert.equal(res.body?.success, false, `${label}: error shape`);
              assert.equal(typeof res.body.error, 'string', label);
              assert.equal(typeof res.body.errorCode, 'string', label);
              assert.equal(typeof res.body.message, 'string', label);
            }
          }
        }
      }
      assert.ok(endpoints >= 10, `only ${endpoints} JSON endpoints found`);
      assert.equal(h.logs.filter((l) => l.includes('unhandled error')).length, 0, 'no unhandled error was logged');
    });
  });
}
