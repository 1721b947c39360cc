// Every endpoint x {no key, malformed key, revoked key, public key, another workspace's
// private key}: the documented status every time, and never another workspace's data.
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';
import { call } from './helpers/http.ts';

type Need = 'private' | 'any';
interface Endpoint {
  method: string;
  url: string;
  need: Need;
  body?: unknown;
  /** What another workspace's private key gets: 404 for a resource of A, else its own answer. */
  otherWorkspace: number | 'own';
}

for (const dialect of DIALECTS) {
  describe(`access matrix on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let endpoints: Endpoint[];
    let secrets: string[];
    let credentials: Record<string, Record<string, string>>;

    before(async () => {
      h = await makeHarness(dialect.name);
      const a = h.ws;
      const src = await h.services.sources.create(a.workspace_id, {
        name: 'a-source',
        type: 's3',
        configuration: {
          region: 'us-east-1',
          bucket: 'a-bucket',
          access_key: 'AKIA-A-SECRET',
          secret_key: 'a-secret-value',
        },
      });
      const staged = await h.services.uploads.stage(
        a.workspace_id,
        Readable.from([Buffer.from('workspace A private bytes')]),
      );
      const file = await h.services.uploads.finish(
        staged,
        {
          name: 'a-file.txt',
          folder: ['a-folder'],
          tags: ['a-tag'],
          metadata: {},
          custom_id: null,
          randomPrefix: false,
          transform: null,
          webhookUrl: null,
        },
        'direct',
      );
      const session = await h.services.multipart.start(a.workspace_id, a.public_key, {
        file_name: 'a-session.bin',
        size: 100,
        format: 'application/octet-stream',
      });
      await h.services.presets.put(a.workspace_id, 'a-preset', 'w_321,h_123');
      const revoked = await h.services.workspaces.createKey(a.workspace_id, 'private');
      await h.services.workspaces.revokeKey(revoked.id);
      const b = await h.services.workspaces.create('B');
      secrets = [
        'a-file.txt',
        'a-folder',
        'a-source',
        'a-bucket',
        'a-secret-value',
        'AKIA-A-SECRET',
        'a-session.bin',
        file.file_no,
        src.id,
        file.folder_no!,
        session.session_id,
        'w_321',
      ];
      credentials = {
        'no key': {},
        'malformed key': { authorization: 'Bearer not-a-key' },
        'revoked key': { authorization: `Bearer ${revoked.key}` },
        'public key': { 'x-api-key': a.public_key },
        "another workspace's private key": { 'x-api-key': b.private_key },
      };
      endpoints = [
        {
          method: 'POST',
          url: '/api/v1/sources',
          need: 'private',
          body: { name: 'x', type: 'image_source', configuration: { base_url: 'https://x.example.com' } },
          otherWorkspace: 'own',
        },
        { method: 'GET', url: '/api/v1/sources', need: 'private', otherWorkspace: 'own' },
        { method: 'GET', url: `/api/v1/sources/${src.id}`, need: 'private', otherWorkspace: 404 },
        {
          method: 'PATCH',
          url: `/api/v1/sources/${src.id}`,
          need: 'private',
          body: { name: 'stolen' },
          otherWorkspace: 404,
        },
        { method: 'POST', url: `/api/v1/sources/${src.id}/test`, need: 'private', otherWorkspace: 404 },
        { method: 'DELETE', url: `/api/v1/sources/${src.id}`, need: 'private', otherWorkspace: 404 },
        { method: 'GET', url: '/api/v1/files', need: 'private', otherWorkspace: 'own' },
        { method: 'GET', url: `/api/v1/files/${file.file_no}`, need: 'private', otherWorkspace: 404 },
        {
          method: 'PATCH',
          url: `/api/v1/files/${file.file_no}`,
          need: 'private',
          body: { is_private: false },
          otherWorkspace: 404,
        },
        {
          method: 'PATCH',
          url: `/api/v1/files/${file.file_no}/rename`,
          need: 'private',
          body: { name: 'stolen.txt' },
          otherWorkspace: 404,
        },
        {
          method: 'POST',
          url: `/api/v1/files/${file.file_no}/signed-url`,
          need: 'private',
          body: {},
          otherWorkspace: 404,
        },
        { method: 'DELETE', url: `/api/v1/files/${file.file_no}`, need: 'private', otherWorkspace: 404 },
        { method: 'GET', url: '/api/v1/folders', need: 'private', otherWorkspace: 'own' },
        { method: 'POST', url: '/api/v1/folders', need: 'private', body: { name: 'x-folder' }, otherWorkspace: 'own' },
        {
          method: 'POST',
          url: `/api/v1/folders/rename/${file.folder_no}`,
          need: 'private',
          body: { name: 'stolen' },
          otherWorkspace: 404,
        },
        {
          method: 'POST',
          url: `/api/v1/folders/move/${file.folder_no}`,
          need: 'private',
          body: { parent_folder_no: null },
          otherWorkspace: 404,
        },
        { method: 'DELETE', url: `/api/v1/folders/${file.folder_no}`, need: 'private', otherWorkspace: 404 },
        {
          method: 'POST',
          url: '/api/v1/multipart/start',
          need: 'any',
          body: { file_name: 'x.bin', size: 10, format: 'application/octet-stream' },
          otherWorkspace: 'own',
        },
        { method: 'GET', url: `/api/v1/multipart/${session.session_id}`, need: 'any', otherWorkspace: 404 },
        {
          method: 'POST',
          url: '/api/v1/multipart/complete',
          need: 'any',
          body: { session_id: session.session_id },
          otherWorkspace: 404,
        },
        { method: 'DELETE', url: `/api/v1/multipart/${session.session_id}`, need: 'any', otherWorkspace: 404 },
        {
          method: 'POST',
          url: '/api/v1/uploads/remote',
          need: 'any',
          body: { remote_url: 'http://127.0.0.1:9/x' },
          otherWorkspace: 'own',
        },
        { method: 'GET', url: '/api/v1/workspace', need: 'private', otherWorkspace: 'own' },
        {
          method: 'PATCH',
          url: '/api/v1/workspace',
          need: 'private',
          body: { webhook_origins: ['https://hooks.example.com'] },
          otherWorkspace: 'own',
        },
        { method: 'GET', url: '/api/v1/presets', need: 'private', otherWorkspace: 'own' },
        { method: 'GET', url: '/api/v1/presets/a-preset', need: 'private', otherWorkspace: 404 },
        {
          method: 'PUT',
          url: '/api/v1/presets/x-preset',
          need: 'private',
          body: { transformation: 'w_10' },
          otherWorkspace: 'own',
        },
        { method: 'DELETE', url: '/api/v1/presets/a-preset', need: 'private', otherWorkspace: 404 },
        {
          method: 'POST',
          url: '/api/v1/generate-token',
          need: 'private',
          body: { file_name: 'from-a-token.txt' },
          otherWorkspace: 'own',
        },
      ];
    });
    after(() => h?.close());

    test('each credential gets its documented answer on every endpoint, and no data of A', async () => {
      const seen: string[] = [];
      for (const [who, headers] of Object.entries(credentials)) {
        for (const e of endpoints) {
          const res = await call(h.app, e.method, e.url, { body: e.body, headers });
          const where = `${who}: ${e.method} ${e.url}`;
          seen.push(`${where} → ${res.status}`);
          if (res.status >= 400) assert.equal(res.body?.success, false, `${where}: ${res.status} in the error shape`);
          if (who === 'no key' || who === 'malformed key' || who === 'revoked key') {
            assert.equal(res.status, 401, where);
            if (e.method === 'GET' && e.url === '/api/v1/sources') assert.equal(res.body.error, 'Invalid API key.');
            else assert.equal(res.body.error, 'Unauthorized');
          } else if (who === 'public key') {
            if (e.need === 'private') assert.equal(res.status, 403, where);
            else assert.ok(![401, 403].includes(res.status), `${where}: a public key may upload (${res.status})`);
          } else if (e.otherWorkspace === 404) {
            assert.equal(res.status, 404, where);
          }
          // A's public key may see A's upload sessions; nobody else sees anything of A.
          if (who !== 'public key') for (const s of secrets) assert.ok(!res.raw.includes(s), `${where}: leaks "${s}"`);
          else if (e.need === 'private')
            for (const s of secrets) assert.ok(!res.raw.includes(s), `${where}: leaks "${s}"`);
        }
      }
      assert.equal(seen.length, Object.keys(credentials).length * endpoints.length);
    });

    test("another workspace's own collections show only its own data", async () => {
      const b = credentials["another workspace's private key"];
      for (const url of ['/api/v1/sources', '/api/v1/files', '/api/v1/folders', '/api/v1/presets']) {
        const res = await call(h.app, 'GET', url, { headers: b });
        assert.equal(res.status, 200, url);
        for (const s of secrets) assert.ok(!res.raw.includes(s), `${url} leaks "${s}"`);
      }
    });

    test('after all of that, workspace A is unchanged', async () => {
      const a = { 'x-api-key': h.ws.private_key };
      const src = (await call(h.app, 'GET', '/api/v1/sources', { headers: a })).body.sources;
      assert.deepEqual(
        src.map((s: any) => s.name),
        ['a-source'],
      );
      const files = (await call(h.app, 'GET', '/api/v1/files', { headers: a })).body.files;
      assert.deepEqual(
        files.map((f: any) => [f.name, f.is_private]),
        [['a-file.txt', false]],
      );
      const folders = (await call(h.app, 'GET', '/api/v1/folders', { headers: a })).body.folders;
      assert.deepEqual(
        folders.map((f: any) => f.name),
        ['a-folder'],
      );
      const settings = (await call(h.app, 'GET', '/api/v1/workspace', { headers: a })).body.data;
      assert.deepEqual(
        [settings.allowed_origins, settings.webhook_origins],
        [[], []],
        "nobody else changed A's browser settings",
      );
      const presets = (await call(h.app, 'GET', '/api/v1/presets', { headers: a })).body.data.presets;
      assert.deepEqual(
        presets.map((p: any) => [p.name, p.transformation]),
        [['a-preset', 'w_321,h_123']],
        "nobody else wrote or deleted A's presets",
      );
    });
  });
}
