// Baseline (a): a bare node:http server that only pipes the request body to a file.
import { createWriteStream } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';

const dir = process.env.BENCH_DIR;
let n = 0;
const server = http.createServer(async (req, res) => {
  try {
    await pipeline(req, createWriteStream(join(dir, `upload-${n++}`)));
    res.writeHead(201).end('{}');
  } catch {
    res.writeHead(500).end();
  }
});
server.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`));
