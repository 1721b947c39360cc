// Baseline (a): a bare node:http server that only pipes the request body to a file. With
// BENCH_FSYNC=1 it answers only after fdatasync, as Stowage does with STOWAGE_FSYNC on (the
// default): the same durability, so the fairest yardstick for Stowage's default rows.
import { open } from 'node:fs/promises';
import http from 'node:http';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';

const dir = process.env.BENCH_DIR;
const flush = process.env.BENCH_FSYNC === '1';
let n = 0;
const server = http.createServer(async (req, res) => {
  const file = await open(join(dir, `upload-${n++}`), 'w');
  try {
    await pipeline(req, file.createWriteStream({ autoClose: false }));
    if (flush) await file.datasync();
    res.writeHead(201).end('{}');
  } catch {
    res.writeHead(500).end();
  } finally {
    await file.close();
  }
});
server.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`));
