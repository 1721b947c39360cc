// Writes the fixed inputs of the transformation golden tests (test/fixtures/golden/source.jpg and
// logo.png). They are drawn, not photographed, so that they are ours to publish and every region is
// recognisable in a crop: four coloured quadrants, a diagonal gradient, a ring off centre, fine
// stripes (for sharpen and blur) and a dark and a light band (for exposure, highlights, shadows).
// Run once; the committed files are what the tests read. `node --import tsx scripts/make-golden-sources.ts`
import { join } from 'node:path';
import sharp from 'sharp';

const dir = join(import.meta.dirname, '..', 'test', 'fixtures', 'golden');

const scene = `<svg xmlns="http://www.w3.org/2000/svg" width="800" height="600">
  <defs>
    <linearGradient id="g" x1="0" y1="0" x2="1" y2="1">
      <stop offset="0" stop-color="#f4d03f"/><stop offset="1" stop-color="#16a085"/>
    </linearGradient>
    <pattern id="stripes" width="6" height="6" patternUnits="userSpaceOnUse">
      <rect width="3" height="6" fill="#222"/><rect x="3" width="3" height="6" fill="#eee"/>
    </pattern>
  </defs>
  <rect width="800" height="600" fill="url(#g)"/>
  <rect x="0" y="0" width="400" height="300" fill="#c0392b" opacity="0.85"/>
  <rect x="400" y="0" width="400" height="300" fill="#2980b9" opacity="0.85"/>
  <rect x="0" y="300" width="400" height="300" fill="#27ae60" opacity="0.85"/>
  <circle cx="560" cy="420" r="110" fill="none" stroke="#8e44ad" stroke-width="36"/>
  <rect x="60" y="60" width="160" height="160" fill="url(#stripes)"/>
  <rect x="0" y="560" width="800" height="20" fill="#111"/>
  <rect x="0" y="580" width="800" height="20" fill="#fafafa"/>
  <polygon points="250,380 350,520 150,520" fill="#e67e22"/>
</svg>`;

const logo = `<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100">
  <rect x="4" y="4" width="192" height="92" rx="24" fill="#ffffff" fill-opacity="0.9" stroke="#000" stroke-width="6"/>
  <circle cx="50" cy="50" r="28" fill="#e74c3c"/>
  <rect x="96" y="30" width="80" height="40" fill="#2c3e50"/>
</svg>`;

await sharp(Buffer.from(scene)).jpeg({ quality: 92 }).toFile(join(dir, 'source.jpg'));
await sharp(Buffer.from(logo)).png().toFile(join(dir, 'logo.png'));
console.log(`wrote ${dir}/source.jpg and logo.png`);
