// bench/delivery: rendition latency and cached-rendition throughput, against baselines measured
// in the same run. Prints figures and ratios; asserts nothing.
//
//   npm run bench:delivery
//
// Targets (issue 4): a 4000x3000 JPEG resized to w_800,f_webp, first request within 1.15x of
// calling sharp directly on the same file; the cached rendition served at >= 0.7x the
// requests/s of @fastify/static serving the same bytes.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import fastifyStatic from '@fastify/static';
import autocannon from 'autocannon';
import Fastify from 'fastify';
import sharp from 'sharp';
import { buildApp } from '../src/app.ts';
import { createServices } from '../src/services/container.ts';
import { testConfig } from '../test/helpers/harness.ts';
import { fmt } from './lib.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const DURATION = Number(process.env.BENCH_DURATION_S ?? 10);
const CONNECTIONS = 50;

async function load(url: string): Promise<{ rps: number; p99: number; errors: number }> {
  const r = await autocannon({ url, connections: CONNECTIONS, duration: DURATION });
  return { rps: r.requests.average, p99: r.latency.p99, errors: r.errors + r.non2xx };
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'bench-delivery-'));
  // A photo-like 4000x3000 JPEG: noise, so it compresses (and decodes) like a real one.
  const noise = await sharp({
    create: {
      width: 4000,
      height: 3000,
      channels: 3,
      background: '#808080',
      noise: { type: 'gaussian', mean: 128, sigma: 40 },
    },
  })
    .jpeg({ quality: 85 })
    .toBuffer();
  const photoPath = join(dir, 'photo.jpg');
  writeFileSync(photoPath, noise);
  console.log(
    `bench/delivery — 4000x3000 JPEG (${fmt(noise.length / 1024 / 1024, 2)} MiB), w_800,f_webp; best of ${ROUNDS}; load ${CONNECTIONS} connections x ${DURATION} s; node ${process.version}\n`,
  );

  // Baseline 1: sharp directly, reading the same file.
  let sharpMs = Infinity;
  let rendition = Buffer.alloc(0);
  for (let i = 0; i < ROUNDS; i++) {
    const t = performance.now();
    rendition = await sharp(photoPath, { limitInputPixels: 100_000_000 })
      .rotate()
      .resize({ width: 800 })
      .webp({ quality: 80 })
      .toBuffer();
    sharpMs = Math.min(sharpMs, performance.now() - t);
  }

  // Stowage: a real server over local storage.
  const services = await createServices(testConfig(join(dir, 'data'), { logLevel: 'silent' }));
  const app = await buildApp(services, { logger: false });
  const base = await app.listen({ host: '127.0.0.1', port: 0 });
  const ws = await services.workspaces.create('bench');
  let firstMs = Infinity;
  for (let i = 0; i < ROUNDS; i++) {
    // A new name each round, so every first request really renders.
    const name = `photo-${i}.jpg`;
    const staged = await services.uploads.stage(ws.workspace_id, Readable.from([noise]));
    await services.uploads.finish(
      staged,
      {
        name,
        folder: [],
        tags: [],
        metadata: {},
        custom_id: null,
        randomPrefix: false,
        transform: null,
        webhookUrl: null,
      },
      'direct',
    );
    // Same bytes: every file shares one blob, so clear its cached renditions first.
    for await (const o of services.storage.list(''))
      if (o.key.includes('.renditions/')) await services.storage.delete(o.key);
    const t = performance.now();
    const res = await fetch(`${base}/${ws.workspace_id}/w_800,f_webp/${name}`);
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`rendition: ${res.status}`);
    firstMs = Math.min(firstMs, performance.now() - t);
  }
  const cachedUrl = `${base}/${ws.workspace_id}/w_800,f_webp/photo-0.jpg`;
  await fetch(cachedUrl).then((r) => r.arrayBuffer());
  const made = services.delivery.stats.renditionsMade;
  const stowage = await load(cachedUrl);
  const remade = services.delivery.stats.renditionsMade - made;
  await app.close();
  await services.close();

  // Baseline 2: @fastify/static serving the same rendition bytes.
  writeFileSync(join(dir, 'rendition.webp'), rendition);
  const stat = Fastify({ logger: false });
  await stat.register(fastifyStatic, { root: dir });
  const statBase = await stat.listen({ host: '127.0.0.1', port: 0 });
  const baseline = await load(`${statBase}/rendition.webp`);
  await stat.close();
  rmSync(dir, { recursive: true, force: true });

  console.log(`first request (render + store + send)   ${fmt(firstMs, 1)} ms`);
  console.log(`sharp directly on the same file          ${fmt(sharpMs, 1)} ms`);
  console.log(`  overhead ratio ${fmt(firstMs / sharpMs, 3)} (target <= 1.15)\n`);
  console.log(
    `cached rendition     ${fmt(stowage.rps, 0).padStart(7)} req/s  p99 ${stowage.p99} ms  errors ${stowage.errors}  renders during load ${remade}`,
  );
  console.log(
    `@fastify/static      ${fmt(baseline.rps, 0).padStart(7)} req/s  p99 ${baseline.p99} ms  errors ${baseline.errors}`,
  );
  console.log(`  ratio ${fmt(stowage.rps / baseline.rps, 3)} (target >= 0.70)`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
