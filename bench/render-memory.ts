// bench/render-memory: peak resident memory while one rendition of a very large image is made,
// each case in a fresh process (its VmHWM is that case's peak). Prints figures against a
// ceiling; asserts nothing.
//
//   npm run bench:render-memory
//
// Cases: a 100-megapixel JPEG and a ~1 GB uncompressed TIFF (18,000 x 18,000, 324 megapixels;
// the pixel limit is raised to 400 million for it), rendered to w_800,f_webp by Stowage (the
// local driver hands libvips the file path: sequential access, JPEG shrink-on-load) and, for
// comparison, by sharp fed a stream of the same file (what renders from other storage and from
// origins did before: sharp gathers a stream whole into memory before decoding it); and the JPEG
// turned by r_45 first, by Stowage (shrunk before it is turned) and by sharp directly (the whole
// image decoded and turned, as before). The inputs
// are generated here, into a temporary directory, and removed at the end.
import { execFileSync } from 'node:child_process';
import { createReadStream, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import sharp from 'sharp';
import { fmt, MiB, ROOT } from './lib.ts';

/**
 * The figure Stowage's renders are held to (the "a figure you choose"): what one render
 * adds to the process's resident memory. The process itself (database reader threads, the
 * hashing thread, the job runner) sits near 300 MiB before any render, whatever the input.
 */
const CEILING_MIB = 150;
const PIXEL_LIMIT = 400_000_000;

type Case = 'stowage' | 'stream' | 'stowage-r45' | 'direct-r45';

/** Peak RSS of this process so far, in bytes. */
function peak(): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) * 1024 : Number.NaN;
}

/** Run in a child: one render of `file`, then print {baseline, peak, ms} as JSON. */
async function child(kind: Case, file: string, dir: string): Promise<void> {
  let render: () => Promise<void>;
  let close = async () => {};
  if (kind === 'stowage' || kind === 'stowage-r45') {
    const { createServices } = await import('../src/services/container.ts');
    const { testConfig } = await import('../test/helpers/harness.ts');
    const { renderDefaults } = await import('../src/config.ts');
    const services = await createServices(
      testConfig(join(dir, `data-${process.pid}`), {
        logLevel: 'silent',
        maxImagePixels: PIXEL_LIMIT,
        storage: { driver: 'local', fsync: false },
        render: { ...renderDefaults(), timeoutMs: 600_000 },
      }),
    );
    close = () => services.close();
    const ws = await services.workspaces.create('bench');
    const name = file.endsWith('.tif') ? 'big.tif' : 'big.jpg';
    const staged = await services.uploads.stage(ws.workspace_id, createReadStream(file));
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
    // detect() reads the first 256 KiB, and libvips writes a TIFF's directory after its pixels:
    // a large TIFF is stored as application/octet-stream and gets no renditions (a known bug,
    // reported with this bench). Its type is set by hand so the render path can be measured.
    if (name.endsWith('.tif'))
      await services.db.kysely.updateTable('files').set({ mime_type: 'image/tiff' }).where('name', '=', name).execute();
    render = async () => {
      const d = await services.delivery.resolve({
        workspaceId: ws.workspace_id,
        path: `${kind === 'stowage-r45' ? 'r_45,' : ''}w_800,f_webp/${name}`,
        accept: undefined,
      });
      for await (const _ of await d.open());
    };
  } else if (kind === 'direct-r45') {
    // As main did for r_45 on local disk: the whole image decoded and turned, then resized.
    render = async () => {
      await sharp(file, { limitInputPixels: PIXEL_LIMIT, sequentialRead: true })
        .rotate()
        .rotate(45, { background: '#00000000' })
        .resize({ width: 800 })
        .webp({ quality: 80 })
        .toBuffer();
    };
  } else {
    // As main did for every source not on local disk, with the process's defaults for sharp.
    render = async () => {
      const img = sharp({ limitInputPixels: PIXEL_LIMIT, sequentialRead: true })
        .rotate()
        .resize({ width: 800 })
        .webp({ quality: 80 });
      const done = img.toBuffer();
      await pipeline(createReadStream(file), img);
      await done;
    };
  }
  // The peak from here on is the render's: reset the high-water mark (Linux: clear_refs 5).
  global.gc?.();
  writeFileSync('/proc/self/clear_refs', '5');
  const baseline = peak();
  const t = performance.now();
  await render();
  const ms = performance.now() - t;
  console.log(JSON.stringify({ baseline, peak: peak(), ms }));
  await close();
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-render-memory-'));
  try {
    const jpeg = join(dir, 'big.jpg');
    const tiff = join(dir, 'big.tif');
    await sharp({
      create: {
        width: 10_000,
        height: 10_000,
        channels: 3,
        background: '#808080',
        noise: { type: 'gaussian', mean: 128, sigma: 40 },
      },
      limitInputPixels: PIXEL_LIMIT,
    })
      .jpeg({ quality: 85 })
      .toFile(jpeg);
    await sharp({
      create: { width: 18_000, height: 18_000, channels: 3, background: '#3060a0' },
      limitInputPixels: false,
    })
      .tiff({ compression: 'none' })
      .toFile(tiff);
    console.log(
      `bench/render-memory — w_800,f_webp; sharp.cache(false), one libvips thread per render; node ${process.version}; ceiling: a render adds at most ${CEILING_MIB} MiB\n`,
    );
    console.log(
      'input                                  path                     peak RSS   render   added by the render',
    );
    for (const [file, label] of [
      [jpeg, `JPEG 10000x10000 (${fmt(statSync(jpeg).size / MiB, 0)} MiB)`],
      [tiff, `TIFF 18000x18000 (${fmt(statSync(tiff).size / MiB, 0)} MiB)`],
    ] as const) {
      const kinds: Case[] = file === jpeg ? ['stowage', 'stream', 'stowage-r45', 'direct-r45'] : ['stowage', 'stream'];
      for (const kind of kinds) {
        const out = execFileSync(
          process.execPath,
          ['--expose-gc', '--import', 'tsx', join(ROOT, 'bench/render-memory.ts'), 'child', kind, file, dir],
          { encoding: 'utf8', maxBuffer: 16 * MiB },
        );
        const r = JSON.parse(out.trim().split('\n').pop()!) as { baseline: number; peak: number; ms: number };
        const grown = (r.peak - r.baseline) / MiB;
        const ours = kind.startsWith('stowage');
        const verdict = ours ? (grown <= CEILING_MIB ? '(under the ceiling)' : '(OVER the ceiling)') : '';
        const path = {
          stowage: 'Stowage w_800',
          stream: 'sharp from a stream',
          'stowage-r45': 'Stowage r_45,w_800',
          'direct-r45': 'sharp r_45 then w_800',
        }[kind];
        console.log(
          `${label.padEnd(38)} ${path.padEnd(24)} ${fmt(r.peak / MiB, 0).padStart(5)} MiB ${fmt(r.ms / 1000, 2).padStart(6)} s  +${fmt(grown, 0)} MiB over ${fmt(r.baseline / MiB, 0)} ${verdict}`,
        );
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === 'child') await child(process.argv[3] as Case, process.argv[4], process.argv[5]);
else await main();
