// bench/svg-guard: what the SVG guard (src/media/svg-guard.ts) costs next to the render it
// guards, on dense SVGs near its 10 MiB cap. Prints; asserts nothing.
//
//   npm run bench:svg-guard
import sharp from 'sharp';
import { guardSvg } from '../src/media/svg-guard.ts';

const NS = 'xmlns="http://www.w3.org/2000/svg"';
const inputs: [string, Buffer][] = [
  [
    '100k styled rects',
    Buffer.from(
      `<svg ${NS} width="100" height="100"><defs><linearGradient id="g"/></defs>${Array.from(
        { length: 100_000 },
        (_, i) =>
          `<rect x="${i % 100}" y="${i % 77}" width="3" height="3" fill="url(#g)" style="stroke:#000;stroke-width:0.5"/>`,
      ).join('\n')}</svg>`,
    ),
  ],
  [
    'one 1 MiB path',
    Buffer.from(`<svg ${NS} width="100" height="100"><path d="${'M1 2 L3 4 '.repeat(100_000)}"/></svg>`),
  ],
];

const ms = (t: bigint) => Number(process.hrtime.bigint() - t) / 1e6;
for (const [name, svg] of inputs) {
  guardSvg(svg);
  const guard: number[] = [];
  for (let k = 0; k < 5; k++) {
    const t = process.hrtime.bigint();
    guardSvg(svg);
    guard.push(ms(t));
  }
  const t = process.hrtime.bigint();
  await sharp(svg).resize(40).png().toBuffer();
  const render = ms(t);
  const median = guard.sort((a, b) => a - b)[2];
  console.log(
    `${name.padEnd(18)} ${(svg.length / 1048576).toFixed(1)} MiB  guard ${median.toFixed(0)} ms (median of 5)  ` +
      `sharp render ${render.toFixed(0)} ms  guard/render ${(median / render).toFixed(3)}`,
  );
}
