// bench/transform-signature: what the signed-transformations check (src/http/transform-signature.ts)
// adds to a rendition request: per call, with the workspace's policy already cached (the steady
// state; a miss is one indexed row read per workspace per node every 5 s). Prints; asserts nothing.
//
//   npm run bench:transform-signature
import { DeliverySigner } from '../src/crypto/delivery-url.ts';
import { signTransformUrl } from '../src/crypto/transform-url.ts';
import { checkTransformSignature, type TransformGateDeps } from '../src/http/transform-signature.ts';

const key = `stw_dk_${'x'.repeat(43)}`;
const ws = 'q3Vb8xL0aZ1k';
const path = `/${ws}/w_400,h_300,c_fill,f_auto/products/shoes/photo.jpg`;
const signed = new URL(signTransformUrl(key, `https://m.example.com${path}`)).search.slice(1);
const policy = (required: boolean) => Promise.resolve({ required, key });
const signer = new DeliverySigner(Buffer.alloc(32, 7));
const cases: [string, TransformGateDeps, string | undefined][] = [
  ['setting off', { policy: () => policy(false), signer }, undefined],
  ['setting on, signed', { policy: () => policy(true), signer }, signed],
];
const N = 200_000;
const now = Math.floor(Date.now() / 1000);
for (const [name, deps, query] of cases) {
  for (let i = 0; i < 10_000; i++) await checkTransformSignature(deps, ws, path, query, now);
  const t = process.hrtime.bigint();
  for (let i = 0; i < N; i++) await checkTransformSignature(deps, ws, path, query, now);
  const us = Number(process.hrtime.bigint() - t) / 1e3 / N;
  console.log(
    `${name.padEnd(20)} ${us.toFixed(2)} µs per request  (${Math.round(1e6 / us).toLocaleString()} per second on one core)`,
  );
}
