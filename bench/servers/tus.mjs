// Baseline (b): @tus/server with its FileStore, the reference resumable-upload server.
import http from 'node:http';
import { FileStore } from '@tus/file-store';
import { Server } from '@tus/server';

const tus = new Server({ path: '/files', datastore: new FileStore({ directory: process.env.BENCH_DIR }) });
const server = http.createServer((req, res) => tus.handle(req, res));
server.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`));
