// bench/scale's bare baseline: the least a server can do to answer a row's requests on this
// machine. Plain node:http, no auth, no Stowage code: for each path it was given a script for
// (POST /__scripts, from capture.ts: the statements Stowage sent for that request), it runs
// those statements with their parameters through the same driver, with the same overlap (each
// starts once the statements that had finished before it in Stowage have finished here), and
// answers the rows of all of them as one JSON document. An unknown path answers 404.
//
// The driver as Stowage sets it up: PostgreSQL through a pg Pool of BARE_POOL connections with
// int8 read as numbers; SQLite through better-sqlite3 with BARE_READERS worker threads, each
// with a read-only connection (memory-mapped as Stowage's, BARE_MMAP bytes), taking the
// statements Stowage sends to its reader threads (rows come back by postMessage, as there), and
// one connection on the main thread for the others (raw SQL, which Stowage runs on its main
// connection); prepared statements are kept.
//
// BARE_DIALECT sqlite|postgres, BARE_SQLITE (file), BARE_PG_URL, BARE_POOL, BARE_READERS, BARE_MMAP,
// BARE_APPLICATION (the pg application_name). Prints "listening PORT" once up.
import http from 'node:http';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import SQLite from 'better-sqlite3';
import pg from 'pg';

/** Prepared statements kept per connection, as src/db/statement-cache.ts does. */
function cached(db) {
  const cache = new Map();
  return (sql) => {
    let stmt = cache.get(sql);
    if (!stmt) {
      stmt = db.prepare(sql);
      cache.set(sql, stmt);
    }
    return stmt;
  };
}

if (!isMainThread) {
  const reader = new SQLite(workerData.path, { readonly: true, fileMustExist: true });
  reader.pragma(`mmap_size = ${workerData.mmapBytes}`);
  const prepare = cached(reader);
  parentPort.on('message', ({ sql, parameters }) => {
    try {
      parentPort.postMessage({ rows: prepare(sql).all(parameters) });
    } catch (err) {
      parentPort.postMessage({ error: String(err) });
    }
  });
} else {
  const env = process.env;
  /** path → statements */
  const scripts = new Map();
  let run;

  if (env.BARE_DIALECT === 'postgres') {
    const pool = new pg.Pool({
      connectionString: env.BARE_PG_URL,
      max: Number(env.BARE_POOL ?? 10),
      application_name: env.BARE_APPLICATION,
      types: {
        getTypeParser: (oid, format) =>
          oid === pg.types.builtins.INT8 ? (v) => Number(v) : pg.types.getTypeParser(oid, format),
      },
    });
    pool.on('error', () => {});
    pool.on('connect', (client) => client.on('error', () => {}));
    run = (s) => pool.query(s.sql, s.parameters).then((r) => r.rows);
  } else {
    const main = new SQLite(env.BARE_SQLITE, { readonly: true, fileMustExist: true });
    main.pragma('busy_timeout = 5000');
    const prepare = cached(main);
    const queue = [];
    const threads = Array.from({ length: Number(env.BARE_READERS ?? 2) }, () => {
      const worker = new Worker(new URL(import.meta.url), {
        workerData: { path: env.BARE_SQLITE, mmapBytes: Number(env.BARE_MMAP ?? 0) },
      });
      const slot = { worker, job: null };
      worker.on('message', (reply) => {
        const job = slot.job;
        slot.job = null;
        if ('error' in reply) job.reject(new Error(reply.error));
        else job.resolve(reply.rows);
        dispatch();
      });
      return slot;
    });
    const dispatch = () => {
      for (const slot of threads) {
        if (queue.length === 0) return;
        if (slot.job) continue;
        slot.job = queue.shift();
        slot.worker.postMessage(slot.job.statement);
      }
    };
    run = (s) => {
      if (!s.reader || threads.length === 0) return Promise.resolve(prepare(s.sql).all(s.parameters));
      return new Promise((resolve, reject) => {
        queue.push({ statement: { sql: s.sql, parameters: s.parameters }, resolve, reject });
        dispatch();
      });
    };
  }

  /** Every statement of the script, each once those it waited for in Stowage are done. */
  function answer(statements) {
    const results = [];
    for (const s of statements) results.push(Promise.all(s.after.map((i) => results[i])).then(() => run(s)));
    return Promise.all(results);
  }

  const server = http.createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/__scripts') {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        for (const [path, script] of Object.entries(JSON.parse(body))) scripts.set(path, script.statements);
        res.writeHead(204).end();
      });
      return;
    }
    const statements = scripts.get(req.url);
    if (!statements) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"no script for this path"}');
      return;
    }
    answer(statements).then(
      (results) => {
        const body = JSON.stringify({ results });
        res.writeHead(200, {
          'content-type': 'application/json; charset=utf-8',
          'content-length': Buffer.byteLength(body),
        });
        res.end(body);
      },
      (err) => {
        res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: String(err) }));
      },
    );
  });
  server.keepAliveTimeout = 72_000;
  server.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`));
}
