// Baseline (b): @tus/server with its FileStore, the reference resumable-upload server.
// FileStore has no durability option (its write() pipes into fs.createWriteStream and never
// syncs), so with BENCH_FSYNC=1 a subclass runs fdatasync on the file after each PATCH's bytes
// are written and before the answer: @tus/server at the durability of Stowage's default.
import { open } from 'node:fs/promises';
import http from 'node:http';
import { FileStore } from '@tus/file-store';
import { Server } from '@tus/server';

class FlushedFileStore extends FileStore {
  async write(readable, id, offset) {
    const written = await super.write(readable, id, offset);
    const file = await open(this.resolve(id), 'r+');
    try {
      await file.datasync();
    } finally {
      await file.close();
    }
    return written;
  }
}

const Store = process.env.BENCH_FSYNC === '1' ? FlushedFileStore : FileStore;
const tus = new Server({ path: '/files', datastore: new Store({ directory: process.env.BENCH_DIR }) });
const server = http.createServer((req, res) => tus.handle(req, res));
server.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`));
