// The hashing thread (see file-hasher.ts): SHA-256 of byte ranges of files, read back from the
// page cache right after the main thread wrote them, so the main thread never hashes.
// Messages are handled strictly in order; each job's ranges arrive in file order.
import { createHash } from 'node:crypto';
import { closeSync, openSync, readSync } from 'node:fs';
import { parentPort } from 'node:worker_threads';

const jobs = new Map(); // id -> { hash, error }
const buffer = Buffer.allocUnsafe(1024 * 1024);

parentPort.on('message', (msg) => {
  if (msg.op === 'open') {
    jobs.set(msg.id, { hash: createHash('sha256'), error: null });
  } else if (msg.op === 'feed') {
    const job = jobs.get(msg.id);
    if (!job || job.error) return;
    let fd;
    try {
      fd = openSync(msg.path, 'r');
      for (let pos = msg.start; pos < msg.end; ) {
        const n = readSync(fd, buffer, 0, Math.min(buffer.length, msg.end - pos), pos);
        if (n === 0) throw new Error(`${msg.path} ends at ${pos}, before ${msg.end}`);
        job.hash.update(buffer.subarray(0, n));
        pos += n;
      }
    } catch (err) {
      job.error = String(err?.message ?? err);
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
  } else if (msg.op === 'digest') {
    const job = jobs.get(msg.id);
    jobs.delete(msg.id);
    if (!job) parentPort.postMessage({ seq: msg.seq, error: 'unknown hash job' });
    else if (job.error) parentPort.postMessage({ seq: msg.seq, error: job.error });
    else parentPort.postMessage({ seq: msg.seq, hex: job.hash.digest('hex') });
  } else if (msg.op === 'drop') {
    jobs.delete(msg.id);
  }
});
