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
