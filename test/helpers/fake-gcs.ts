// A small in-memory fake of the Google Cloud Storage JSON API, for the GCS storage driver's
// contract tests: no GCS emulator can run on this machine, so this is a mock, kept to what the
// driver calls and answering as GCS documents it (https://cloud.google.com/storage/docs/json_api):
// bucket metadata; objects inserted by multipart or media upload (atomic: stored only once the
// whole body arrived; md5Hash and crc32c computed), read whole or by Range, described, deleted, listed by
// prefix in pages, and composed (at most 32 sources; composite objects carry no md5Hash).
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CRC32C } from '@google-cloud/storage';
import { localServer } from './servers.ts';

interface StoredObject {
  data: Buffer;
  contentType: string;
  md5?: string;
  crc32c: string;
  updated: string;
  generation: number;
}

export interface FakeGcs {
  url: string;
  /** Objects by bucket, then name. */
  buckets: Map<string, Map<string, StoredObject>>;
  /** Method and path of every request, for assertions. */
  requests: string[];
  close(): Promise<void>;
}

const json = (res: ServerResponse, status: number, body: unknown) =>
  void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
const fail = (res: ServerResponse, status: number, message: string) =>
  json(res, status, { error: { code: status, message, errors: [{ message, reason: 'fake' }] } });

const crc32c = (data: Buffer) => {
  const crc = new CRC32C();
  crc.update(data);
  return crc.toString();
};

/** The object resource, as GCS returns it. */
function resource(bucket: string, name: string, o: StoredObject) {
  return {
    kind: 'storage#object',
    id: `${bucket}/${name}/${o.generation}`,
    name,
    bucket,
    generation: String(o.generation),
    contentType: o.contentType,
    size: String(o.data.length),
    updated: o.updated,
    crc32c: o.crc32c,
    ...(o.md5 ? { md5Hash: o.md5 } : {}),
  };
}

/** The media and metadata of a multipart/related upload body. */
function parseRelated(body: Buffer, contentType: string): { meta: Record<string, string>; media: Buffer } {
  const boundary = /boundary="?([^";]+)"?/.exec(contentType)?.[1];
  if (!boundary) throw new Error('no boundary');
  const sep = Buffer.from(`--${boundary}`);
  const pieces: Buffer[] = [];
  let at = body.indexOf(sep);
  while (at >= 0) {
    const next = body.indexOf(sep, at + sep.length);
    if (next < 0) break;
    pieces.push(body.subarray(at + sep.length, next));
    at = next;
  }
  const content = (piece: Buffer) => {
    const start = piece.indexOf('\r\n\r\n') + 4;
    return piece.subarray(start, piece.length - 2); // without the CRLF before the next boundary
  };
  return { meta: JSON.parse(content(pieces[0]).toString('utf8')), media: content(pieces[1]) };
}

export async function startFakeGcs(opts: { buckets: string[]; pageSize?: number }): Promise<FakeGcs> {
  const buckets = new Map(opts.buckets.map((b) => [b, new Map<string, StoredObject>()]));
  const requests: string[] = [];
  let generation = 1;
  const store = (objects: Map<string, StoredObject>, name: string, data: Buffer, contentType: string, md5 = true) => {
    const o: StoredObject = {
      data,
      contentType,
      md5: md5 ? createHash('md5').update(data).digest('base64') : undefined,
      crc32c: crc32c(data),
      updated: new Date().toISOString(),
      generation: generation++,
    };
    objects.set(name, o);
    return o;
  };

  const handle = (req: IncomingMessage, res: ServerResponse, body: Buffer) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    requests.push(`${req.method} ${url.pathname}`);
    const m = /^(\/upload)?\/storage\/v1\/b\/([^/]+)(?:\/o(?:\/(.+?))?(\/compose)?)?$/.exec(url.pathname);
    if (!m) return fail(res, 404, 'Not Found');
    const [, upload, bucket, rawName, compose] = m;
    const objects = buckets.get(decodeURIComponent(bucket));
    if (!objects) return fail(res, 404, 'The specified bucket does not exist.');
    const name = rawName === undefined ? undefined : decodeURIComponent(rawName);
    const q = url.searchParams;

    if (upload && req.method === 'POST') {
      const type = q.get('uploadType');
      if (type === 'multipart') {
        const { meta, media } = parseRelated(body, req.headers['content-type'] ?? '');
        const objectName = q.get('name') ?? meta.name;
        const o = store(objects, objectName, media, meta.contentType ?? 'application/octet-stream');
        return json(res, 200, resource(bucket, objectName, o));
      }
      if (type === 'media') {
        const objectName = q.get('name') ?? '';
        const o = store(objects, objectName, body, req.headers['content-type'] ?? 'application/octet-stream');
        return json(res, 200, resource(bucket, objectName, o));
      }
      return fail(res, 400, `uploadType ${type} is not supported by this fake`);
    }
    if (rawName === undefined && url.pathname.endsWith('/o') && req.method === 'GET') {
      const prefix = q.get('prefix') ?? '';
      const names = [...objects.keys()].filter((n) => n.startsWith(prefix)).sort();
      const from = Number(q.get('pageToken') ?? 0);
      const size = Math.min(Number(q.get('maxResults') ?? 1000), opts.pageSize ?? 1000);
      const page = names.slice(from, from + size);
      const more = from + size < names.length;
      return json(res, 200, {
        kind: 'storage#objects',
        items: page.map((n) => resource(bucket, n, objects.get(n)!)),
        ...(more ? { nextPageToken: String(from + size) } : {}),
      });
    }
    if (name === undefined) {
      if (req.method === 'GET') return json(res, 200, { kind: 'storage#bucket', name: bucket });
      return fail(res, 405, 'Method not allowed');
    }
    if (compose && req.method === 'POST') {
      const spec = JSON.parse(body.toString('utf8')) as {
        sourceObjects: { name: string }[];
        destination?: { contentType?: string };
      };
      if (spec.sourceObjects.length > 32) return fail(res, 400, 'The number of source components exceeds 32.');
      const sources = spec.sourceObjects.map((s) => objects.get(s.name));
      if (sources.some((s) => !s)) return fail(res, 404, 'Object not found.');
      const data = Buffer.concat(sources.map((s) => s!.data));
      const o = store(objects, name, data, spec.destination?.contentType ?? 'application/octet-stream', false);
      return json(res, 200, resource(bucket, name, o));
    }
    const o = objects.get(name);
    if (req.method === 'DELETE') {
      if (!o) return fail(res, 404, 'No such object.');
      objects.delete(name);
      return void res.writeHead(204).end();
    }
    if (req.method !== 'GET') return fail(res, 405, 'Method not allowed');
    if (!o) return fail(res, 404, `No such object: ${bucket}/${name}`);
    if (q.get('alt') !== 'media') return json(res, 200, resource(bucket, name, o));
    const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
    if (!range) return void res.writeHead(200, { 'content-type': o.contentType }).end(o.data);
    const start = Number(range[1]);
    const end = range[2] ? Math.min(Number(range[2]), o.data.length - 1) : o.data.length - 1;
    res
      .writeHead(206, {
        'content-type': o.contentType,
        'content-range': `bytes ${start}-${end}/${o.data.length}`,
      })
      .end(o.data.subarray(start, end + 1));
  };

  const server = await localServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    // Only a body that arrived whole is acted on: an aborted upload stores nothing, as in GCS.
    req.on('end', () => {
      try {
        handle(req, res, Buffer.concat(chunks));
      } catch (err) {
        fail(res, 400, String(err));
      }
    });
  });
  return { url: server.url, buckets, requests, close: server.close };
}
