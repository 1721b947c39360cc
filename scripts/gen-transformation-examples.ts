// Example images for the transformation docs: every `<!-- example: TOKENS -->` marker in
// docs/transformations.md and docs/transformations/*.md is rendered from the golden scene
// (test/fixtures/golden/source.jpg) through the real parser, plan and pipeline, written to
// docs/transformations/examples/<slug>.webp (about 320 px wide), and the image link is put on the
// line right after the marker (replacing the one there: running it again changes nothing).
//
//   npm run docs:examples
import { readdirSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join, relative, dirname } from 'node:path';
import sharp from 'sharp';
import { renderTransform } from '../src/media/transform/render.ts';

const root = join(import.meta.dirname, '..');
const docs = join(root, 'docs');
const out = join(docs, 'transformations', 'examples');
const source = join(root, 'test', 'fixtures', 'golden', 'source.jpg');
const limits = { maxMegapixels: 25, maxSide: 8192, timeoutMs: 10_000, faceTimeoutMs: 1000 };
const MARKER = /^<!-- example: (.+?) -->$/;
/** Image layers in the examples name the golden logo (a 200x100 PNG with alpha). */
const logo = join(root, 'test', 'fixtures', 'golden', 'logo.png');
const loadImage = async (path: string) => {
  if (path === 'logo.png') return logo;
  throw new Error(`the examples have no image "${path}"`);
};
const WIDTH = 320;

const slug = (tokens: string) =>
  tokens
    .replaceAll('-', 'm')
    .replace(/[^a-zA-Z0-9]+/g, '-')
    .replace(/^-|-$/g, '')
    .toLowerCase();

/** The example for `tokens`, shrunk to WIDTH when wider (the docs show it small). */
async function example(tokens: string): Promise<Buffer> {
  const { data } = await renderTransform(tokens, source, { limits, maxPixels: 1e8, format: 'png', loadImage });
  const img = sharp(data);
  const { width = 0 } = await img.metadata();
  return (width > WIDTH ? img.resize({ width: WIDTH }) : img).webp({ quality: 75, alphaQuality: 90 }).toBuffer();
}

async function processFile(file: string, written: Set<string>): Promise<number> {
  const lines = readFileSync(file, 'utf8').split('\n');
  let count = 0;
  for (let i = 0; i < lines.length; i++) {
    const m = MARKER.exec(lines[i].trim());
    if (!m) continue;
    const tokens = m[1].trim();
    const name = `${slug(tokens)}.webp`;
    if (!written.has(name)) {
      try {
        writeFileSync(join(out, name), await example(tokens));
      } catch (err) {
        // One marker the pipeline refuses (a token not implemented yet) does not stop the others.
        console.error(`${relative(root, file)}:${i + 1}: ${tokens}: ${(err as Error).message}`);
        process.exitCode = 1;
        continue;
      }
      written.add(name);
    }
    const link = `![${tokens}](${relative(dirname(file), join(out, name)).split('\\').join('/')})`;
    if (lines[i + 1]?.startsWith('![')) lines[i + 1] = link;
    else lines.splice(i + 1, 0, link);
    count++;
  }
  writeFileSync(file, lines.join('\n'));
  return count;
}

mkdirSync(out, { recursive: true });
const sub = join(docs, 'transformations');
const files = [
  join(docs, 'transformations.md'),
  ...readdirSync(sub)
    .filter((f) => f.endsWith('.md'))
    .map((f) => join(sub, f)),
];
const written = new Set<string>();
for (const file of files) {
  try {
    console.log(`${relative(root, file)}: ${await processFile(file, written)} examples`);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}
// Examples no marker asks for any more.
for (const f of readdirSync(out)) if (f.endsWith('.webp') && !written.has(f)) console.log(`unused: ${f}`);
