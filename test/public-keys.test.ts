// A public key sits in web pages for anyone to copy. Written from the attacker's side: with only
// that key (or an upload token), on every upload path (direct, multipart, remote, token), try to
// replace a private file, learn whether bytes exist, reach another record or a signed URL, or
// make the service send webhooks to a host of our choosing. Only a private key replaces.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import type { ResolvedAddress } from '../src/outbound/guard.ts';
import { after, before, describe, test } from 'node:test';
import { DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';
import { localServer } from './helpers/servers.ts';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const resolver = async (host: string): Promise<ResolvedAddress[]> => {
  if (host === 'files.test' || host === 'hooks.test') return [{ address: '127.0.0.1', family: 4 }];
  throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
};

type Path = 'direct' | 'multipart' | 'remote' | 'token';
const PATHS: Path[] = ['direct', 'multipart', 'remote', 'token'];

for (const dialect of DIALECTS) {
  describe(`public keys and tokens add, never replace or reveal, on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let base: string;
    let origin: Awaited<ReturnType<typeof localServer>>;
    /** Bytes the remote origin serves, by path. */
    const served = new Map<string, Buffer>();
    const hooks: string[] = [];

    before(async () => {
      origin = await localServer((req, res) => {
        if (req.url?.startsWith('/hook')) {
          hooks.push(req.url);
          req.resume();
          res.writeHead(204).end();
          return;
        }
        const body = served.get(req.url ?? '');
        if (body) res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(body);
        else res.writeHead(404).end();
      });
      h = await makeHarness(dialect.name, {
        config: { outboundAllow: ['files.test', 'hooks.test'], webhookPollMs: 0 },
        services: { resolver },
      });
      base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    });
    after(async () => {
      await h?.close();
      await origin?.close();
    });

    /** URLs the service hands out name its public URL; the test server listens elsewhere. */
    const local = (url: string) => url.replace(h.config.publicUrl, base);
    const json = async (method: string, path: string, key: string | null, body?: unknown) => {
      const headers: Record<string, string> = {};
      if (key) headers['x-api-key'] = key;
      if (body !== undefined) headers['content-type'] = 'application/json';
      const res = await fetch(`${base}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as any };
    };

    /** One upload of `data` as `folder/name` on `path`, with `key` (the token is minted with the private key). */
    const upload = async (
      path: Path,
      key: string,
      folder: string,
      name: string,
      data: Buffer,
      extra: Record<string, unknown> = {},
    ) => {
      if (path === 'direct') {
        const form = new FormData();
        form.append('file_name', name);
        form.append('folder', folder);
        for (const [k, v] of Object.entries(extra)) form.append(k, String(v));
        form.append('file', new Blob([new Uint8Array(data)]), name);
        const res = await fetch(`${base}/api/v1/uploads`, {
          method: 'POST',
          body: form,
          headers: { 'x-api-key': key },
        });
        return { status: res.status, body: (await res.json()) as any };
      }
      if (path === 'remote') {
        const at = `/f/${randomBytes(6).toString('hex')}`;
        served.set(at, data);
        return json('POST', '/api/v1/uploads/remote', key, {
          remote_url: `http://files.test:${origin.port}${at}`,
          file_name: name,
          folder,
          ...extra,
        });
      }
      if (path === 'multipart') {
        const start = await json('POST', '/api/v1/multipart/start', key, {
          file_name: name,
          size: data.length,
          format: 'application/octet-stream',
          folder,
          ...extra,
        });
        if (start.status !== 201) return start;
        const put = await fetch(local(start.body.parts[0]), {
          method: 'PUT',
          body: new Uint8Array(data),
          headers: { 'content-type': 'application/octet-stream' },
        });
        assert.equal(put.status, 200);
        return json('POST', '/api/v1/multipart/complete', key, { session_id: start.body.session_id });
      }
      const minted = await json('POST', '/api/v1/generate-token', h.ws.private_key, { file_name: name, folder });
      assert.equal(minted.status, 201, JSON.stringify(minted.body));
      const res = await fetch(local(minted.body.upload_url), {
        method: 'POST',
        body: new Uint8Array(data),
        headers: { 'content-type': 'application/octet-stream' },
      });
      const body = (await res.json()) as any;
      return { status: res.status, body: body.data ? { ...body.data } : body };
    };

    const stored = async (fileNo: string) => {
      const rec = await h.services.files.get(h.ws.workspace_id, fileNo);
      const row = await h.services.db.kysely
        .selectFrom('files')
        .innerJoin('blobs', 'blobs.id', 'files.blob_id')
        .select(['blobs.storage_key'])
        .where('files.file_no', '=', fileNo)
        .executeTakeFirstOrThrow();
      const chunks: Buffer[] = [];
      for await (const c of await h.services.storage.get(row.storage_key)) chunks.push(c as Buffer);
      return { rec, bytes: Buffer.concat(chunks) };
    };

    /** A private file hr/payroll-<path>.csv uploaded with the private key. */
    const privateFile = async (path: Path) => {
      const data = Buffer.from(`name,salary\nalice,${randomBytes(8).toString('hex')}\n`);
      const staged = await h.services.uploads.stage(h.ws.workspace_id, Readable.from([data]));
      const rec = await h.services.uploads.finish(
        staged,
        {
          name: `payroll-${path}.csv`,
          folder: ['hr'],
          tags: [],
          metadata: { secret: true },
          custom_id: null,
          randomPrefix: false,
          transform: null,
          webhookUrl: null,
          mayReplace: true,
        },
        'direct',
      );
      await h.services.files.update(h.ws.workspace_id, rec.file_no, { is_private: true });
      return { rec, data };
    };

    for (const path of PATHS) {
      test(`${path}: the name of a private file gets a new file; the private one keeps its bytes and stays hidden`, async () => {
        const victim = await privateFile(path);
        const evil = Buffer.from(`name,salary\nmallory,1000000 ${path}\n`);
        const key = path === 'token' ? h.ws.private_key : h.ws.public_key; // a token is minted with the private key, spent without one
        const res = await upload(path, path === 'token' ? key : h.ws.public_key, 'hr', `payroll-${path}.csv`, evil);
        assert.equal(res.status === 200 || res.status === 201, true, JSON.stringify(res.body));
        const r = res.body;
        assert.notEqual(r.file_no, victim.rec.file_no, 'a record of its own');
        assert.notEqual(r.id, victim.rec.id);
        assert.notEqual(r.name, `payroll-${path}.csv`, 'under another name');
        assert.match(
          r.name,
          path === 'multipart'
            ? new RegExp(`^[0-9A-Za-z]{8}_payroll-${path}\\.csv$`)
            : new RegExp(`^payroll-${path}_[0-9A-Za-z]{8}\\.csv$`),
        );
        assert.equal(r.hash, sha(evil));
        assert.equal(r.is_private, false);
        const text = JSON.stringify(res.body);
        assert.ok(!text.includes('signature='), 'no signed URL in the answer');
        assert.ok(
          !text.includes(victim.rec.file_no) && !text.includes('"secret"'),
          "nothing of the private file's record",
        );
        const after = await stored(victim.rec.file_no);
        assert.deepEqual(after.bytes, victim.data, 'the private file keeps its bytes');
        assert.equal(after.rec.hash, victim.rec.hash);
        assert.equal(after.rec.is_private, true);
        assert.deepEqual((await stored(r.file_no)).bytes, evil);
      });

      test(`${path}: bytes the workspace already holds give a record of its own, stored once, with no is_duplicate oracle`, async () => {
        const victim = await privateFile(`${path}-dup` as Path);
        const blobsBefore = await h.services.db.kysely.selectFrom('blobs').select('id').execute();
        const res = await upload(
          path,
          path === 'token' ? h.ws.private_key : h.ws.public_key,
          'public',
          `copy-${path}.csv`,
          victim.data,
        );
        assert.equal(res.status === 200 || res.status === 201, true, JSON.stringify(res.body));
        assert.equal(res.body.is_duplicate, false, 'the uploader is not told the bytes existed');
        assert.notEqual(res.body.file_no, victim.rec.file_no);
        assert.equal(res.body.path, `/public/copy-${path}.csv`);
        assert.ok(!JSON.stringify(res.body).includes('signature='));
        const blobsAfter = await h.services.db.kysely.selectFrom('blobs').select('id').execute();
        assert.equal(blobsAfter.length, blobsBefore.length, 'the bytes are stored once');
        // The workspace itself (a private key) still sees the truth.
        assert.equal((await h.services.files.get(h.ws.workspace_id, res.body.file_no)).is_duplicate, true);
      });
    }

    for (const path of ['direct', 'multipart', 'remote'] as const) {
      test(`${path}: a private key still replaces by name, keeping id and file_no`, async () => {
        const first = await upload(path, h.ws.private_key, 'docs', `report-${path}.txt`, Buffer.from('v1'));
        const second = await upload(path, h.ws.private_key, 'docs', `report-${path}.txt`, Buffer.from('v2 replaced'));
        assert.equal(second.body.file_no, first.body.file_no);
        assert.equal(second.body.name, `report-${path}.txt`);
        assert.deepEqual((await stored(first.body.file_no)).bytes, Buffer.from('v2 replaced'));
      });

      test(`${path}: a public key cannot name a webhook_url unless the workspace lists its origin`, async () => {
        const url = `http://hooks.test:${origin.port}/hook-${path}`;
        const refused = await upload(path, h.ws.public_key, 'w', `w-${path}.txt`, Buffer.from(`w ${path}`), {
          webhook_url: url,
        });
        assert.equal(refused.status, 403, JSON.stringify(refused.body));
        assert.equal(refused.body.errorCode, 'WEBHOOK_NOT_ALLOWED');
        const queued = await h.services.db.kysely
          .selectFrom('webhook_deliveries')
          .selectAll()
          .where('url', '=', url)
          .execute();
        assert.equal(queued.length, 0, 'nothing queued');
        assert.equal(
          (await h.services.files.list(h.ws.workspace_id, { page: 1, limit: 100, search: `w-${path}` })).files.length,
          0,
          'nothing stored',
        );

        const set = await json('PATCH', '/api/v1/workspace', h.ws.private_key, {
          webhook_origins: [`http://hooks.test:${origin.port}`],
        });
        assert.equal(set.status, 200, JSON.stringify(set.body));
        try {
          const ok = await upload(path, h.ws.public_key, 'w', `w-${path}.txt`, Buffer.from(`w ${path}`), {
            webhook_url: url,
          });
          assert.equal(ok.status === 200 || ok.status === 201, true, JSON.stringify(ok.body));
          assert.equal(
            (await h.services.db.kysely.selectFrom('webhook_deliveries').selectAll().where('url', '=', url).execute())
              .length,
            1,
          );
          // Another port of the same host is another origin.
          const other = await upload(path, h.ws.public_key, 'w', `w2-${path}.txt`, Buffer.from(`w2 ${path}`), {
            webhook_url: `http://hooks.test:${origin.port + 1}/hook`,
          });
          assert.equal(other.status, 403);
        } finally {
          await json('PATCH', '/api/v1/workspace', h.ws.private_key, { webhook_origins: null });
        }
      });
    }

    test('many public uploads of one name at once: every one gets its own record, none fails', async () => {
      const results = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          upload('direct', h.ws.public_key, 'race', 'same.txt', Buffer.from(`copy ${i}`)),
        ),
      );
      for (const r of results) assert.equal(r.status, 201, JSON.stringify(r.body));
      assert.equal(new Set(results.map((r) => r.body.file_no)).size, 12);
      assert.equal(new Set(results.map((r) => r.body.name)).size, 12);
      for (const [i, r] of results.entries())
        assert.deepEqual((await stored(r.body.file_no)).bytes, Buffer.from(`copy ${i}`));
    });

    test('many private uploads of one name at once: one record, last writer wins, no 5xx', async () => {
      const results = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          upload('direct', h.ws.private_key, 'race-private', 'same.txt', Buffer.from(`version ${i}`)),
        ),
      );
      for (const r of results) assert.equal(r.status, 201, JSON.stringify(r.body));
      assert.equal(new Set(results.map((r) => r.body.file_no)).size, 1);
      const list = await h.services.files.list(h.ws.workspace_id, { page: 1, limit: 100, search: 'same.txt' });
      assert.equal(list.files.filter((f) => f.path === '/race-private/same.txt').length, 1);
    });
  });
}
