// bench/delivery's @fastify/static baseline: the directory BENCH_DIR served as plainly as the
// plugin serves it, in its own process (as Stowage and nginx run in theirs).
import fastifyStatic from '@fastify/static';
import Fastify from 'fastify';

const app = Fastify({ logger: false });
await app.register(fastifyStatic, { root: process.env.BENCH_DIR });
const address = await app.listen({ host: '127.0.0.1', port: 0 });
console.log(`listening ${new URL(address).port}`);
