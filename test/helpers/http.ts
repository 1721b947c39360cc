import type { FastifyInstance } from 'fastify';

export interface Reply {
  status: number;
  headers: Record<string, unknown>;
  body: any;
  raw: string;
}

/** One request through app.inject(); JSON bodies are encoded and decoded. */
export async function call(
  app: FastifyInstance,
  method: string,
  url: string,
  opts: { body?: unknown; headers?: Record<string, string>; rawBody?: string } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...opts.headers };
  let payload: string | undefined = opts.rawBody;
  if (opts.body !== undefined) {
    payload = JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await app.inject({ method: method as any, url, headers, payload });
  let body: any;
  try {
    body = res.body ? JSON.parse(res.body) : undefined;
  } catch {
    body = undefined;
  }
  return { status: res.statusCode, headers: res.headers, body, raw: res.body };
}

/** What a fetch answered: status, headers, the body's bytes, and the body parsed when it is JSON. */
export interface Fetched<J> {
  status: number;
  headers: Headers;
  body: Buffer;
  json?: J;
}

/** Reads `res` whole into a Fetched (`json` undefined when the body is not JSON). */
export async function readFetched<J>(res: Response): Promise<Fetched<J>> {
  const body = Buffer.from(await res.arrayBuffer());
  let json: J | undefined;
  try {
    json = JSON.parse(body.toString());
  } catch {}
  return { status: res.status, headers: res.headers, body, json };
}
