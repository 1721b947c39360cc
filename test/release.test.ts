// The container recipe, checked without a container engine (none runs here): the Dockerfile's
// build stage runs scripts/build-release.sh and its runtime stage runs a command; this test runs
// that same script on a copy of the repository and starts the release with the Dockerfile's own
// CMD and ENV, so the two cannot drift apart. The compose file is read with a YAML parser and
// checked for what makes a first `docker compose up` work.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, test } from 'node:test';
import { parse } from 'yaml';
import { ROOT, startServer } from './helpers/process.ts';

const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
/** Instructions with their continuation lines joined, comments dropped. */
const instructions = dockerfile
  .replace(/\\\n\s*/g, ' ')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith('#'))
  .map((l) => {
    const [op, ...rest] = l.split(/\s+/);
    return { op: op.toUpperCase(), args: rest.join(' ') };
  });
const stages = instructions.reduce<{ from: string; lines: typeof instructions }[]>((acc, i) => {
  if (i.op === 'FROM') acc.push({ from: i.args, lines: [] });
  else acc[acc.length - 1].lines.push(i);
  return acc;
}, []);
const runtime = stages[stages.length - 1];
const json = (args: string): string[] => JSON.parse(args);

const work = mkdtempSync(join(tmpdir(), 'stowage-release-'));
after(() => rmSync(work, { recursive: true, force: true }));

test('Dockerfile: multi-stage on the Node LTS, slim non-root runtime, health check on /readyz, data volume, SIGTERM', () => {
  assert.equal(stages.length, 2);
  const [build] = stages;
  assert.match(build.from, /^node:\d+ AS build$/);
  const major = Number(/^node:(\d+)/.exec(build.from)![1]);
  assert.ok(major >= 24 && major % 2 === 0, 'an even (LTS) Node line');
  assert.equal(runtime.from, `node:${major}-slim`, 'the runtime stage runs the same Node, slim');
  assert.deepEqual(
    build.lines.filter((l) => l.op === 'RUN').map((l) => l.args),
    ['bash scripts/build-release.sh /release'],
    'the build stage runs the release script, nothing else',
  );
  const ops = (op: string) => runtime.lines.filter((l) => l.op === op).map((l) => l.args);
  assert.deepEqual(ops('USER'), ['node']);
  assert.deepEqual(ops('VOLUME'), ['["/data"]']);
  assert.deepEqual(ops('STOPSIGNAL'), ['SIGTERM']);
  assert.match(ops('HEALTHCHECK')[0], /CMD \["node", "-e", ".*\/readyz/);
  assert.match(ops('COPY')[0], /--from=build .*\/release \/app/);
  const env = runtimeEnv();
  assert.equal(env.STOWAGE_DATA_DIR, '/data');
  assert.equal(env.HOST, '0.0.0.0');
  // The shutdown the code does must fit in the stop timeout the header asks for (45 s).
  assert.ok(Number(env.STOWAGE_SHUTDOWN_DELAY_MS) + Number(env.STOWAGE_SHUTDOWN_TIMEOUT_MS) < 45_000);
  assert.match(dockerfile, /--stop-timeout 45/);
  const ignored = readFileSync(join(ROOT, '.dockerignore'), 'utf8').split('\n');
  for (const p of ['node_modules', 'dist', 'data', '.git']) assert.ok(ignored.includes(p), `.dockerignore has ${p}`);
});

function runtimeEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const l of runtime.lines.filter((i) => i.op === 'ENV'))
    for (const [, k, v] of l.args.matchAll(/([A-Z_]+)=(\S+)/g)) env[k] = v;
  return env;
}

test('the release the image is built from: the script on a copy of the checkout, started with the image CMD', async () => {
  const skip = new Set(['node_modules', '.git', 'data', 'dist', 'release', '.test-artifacts']);
  const copy = join(work, 'src');
  cpSync(ROOT, copy, { recursive: true, filter: (src) => !skip.has(relative(ROOT, src).split('/')[0]) });
  // Hard links of the installed packages stand in for `npm ci` (see the script's header).
  execFileSync('cp', ['-al', join(ROOT, 'node_modules'), join(copy, 'node_modules')]);
  const out = join(work, 'release');
  execFileSync('bash', ['scripts/build-release.sh', out], {
    cwd: copy,
    env: { ...process.env, STOWAGE_RELEASE_REUSE_MODULES: '1' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  for (const dev of ['tsx', 'typescript', 'esbuild', 'fast-check', 'playwright-core'])
    assert.ok(!existsSync(join(out, 'node_modules', dev)), `${dev} is pruned from the release`);
  assert.ok(existsSync(join(out, 'dist', 'src', 'main.js')));
  assert.ok(!existsSync(join(out, 'src')), 'no sources in the release');
  assert.ok(existsSync(join(ROOT, 'node_modules', 'tsx')), "the checkout's own packages are untouched");

  const cmd = json(runtime.lines.find((l) => l.op === 'CMD')!.args);
  assert.equal(cmd[0], 'node');
  // node, its flags, the script: run as the image runs it.
  const script = cmd.findIndex((arg: string) => !arg.startsWith('-') && arg !== 'node');
  const env = runtimeEnv();
  const server = await startServer(
    { ...env, STOWAGE_DATA_DIR: join(work, 'data'), HOST: '127.0.0.1', PORT: '0', STOWAGE_SHUTDOWN_DELAY_MS: '0' },
    { nodeArgs: cmd.slice(1, script), script: cmd[script], cwd: out, args: cmd.slice(script + 1) },
  );
  try {
    assert.equal((await fetch(`${server.url}/readyz`)).status, 200);
    assert.match(server.output(), /^\{"level":30/m, 'STOWAGE_LOG_FORMAT=json from the image');
    // The image's health check command, as the engine would run it.
    const health = json(runtime.lines.find((l) => l.op === 'HEALTHCHECK')!.args.replace(/^.*?CMD /, ''));
    const port = new URL(server.url).port;
    execFileSync(process.execPath, health.slice(1), { env: { ...process.env, PORT: port }, timeout: 10_000 });
  } finally {
    assert.equal(await server.stop('SIGTERM'), 0);
  }
});

test('deploy/compose.yaml: health checks, start order, a bucket made once, secrets from files, /metrics not published', () => {
  const compose = parse(readFileSync(join(ROOT, 'deploy', 'compose.yaml'), 'utf8'), { merge: true });
  const services = compose.services as Record<string, any>;
  assert.deepEqual(Object.keys(services).sort(), [
    'db',
    'proxy',
    'redis',
    's3',
    's3-init',
    'stowage-1',
    'stowage-2',
    'worker',
  ]);
  for (const name of ['db', 'redis', 's3', 'stowage-1', 'stowage-2', 'worker'])
    assert.ok(services[name].healthcheck?.test, `${name} has a health check`);
  // The API nodes leave jobs to the worker, which runs the same image as `stowage-server worker`.
  for (const node of ['stowage-1', 'stowage-2']) assert.equal(services[node].environment.STOWAGE_JOBS, 'off');
  assert.deepEqual(services.worker.command, ['node', 'bin/stowage-server.js', 'worker']);
  assert.equal(services.worker.environment.STOWAGE_JOBS, undefined, 'the worker runs the jobs');
  assert.match(services.worker.healthcheck.test.join(' '), /127\.0\.0\.1:9464\/metrics/);
  for (const node of ['stowage-1', 'stowage-2', 'worker']) {
    const s = services[node];
    assert.equal(s.build, '..');
    assert.deepEqual(s.depends_on, {
      db: { condition: 'service_healthy' },
      redis: { condition: 'service_healthy' },
      's3-init': { condition: 'service_completed_successfully' },
    });
    assert.equal(s.ports, undefined, 'nodes are reached through the proxy only');
    if (node !== 'worker') assert.match(s.healthcheck.test.join(' '), /\/readyz/);
    assert.equal(s.environment.STOWAGE_METRICS_PORT, '9464');
    assert.ok(s.environment.DATABASE_URL_FILE && s.environment.STOWAGE_MASTER_KEY_FILE);
    assert.ok(s.environment.S3_SECRET_ACCESS_KEY_FILE && s.environment.S3_PUBLIC_ENDPOINT);
    for (const [k, v] of Object.entries(s.environment as Record<string, string>))
      assert.ok(!/PASSWORD|SECRET|KEY$/.test(k) || k.endsWith('_FILE') || k === 'S3_ACCESS_KEY_ID', `${k}=${v}`);
    const grace = Number(/^(\d+)s$/.exec(s.stop_grace_period)![1]) * 1000;
    assert.ok(
      Number(s.environment.STOWAGE_SHUTDOWN_DELAY_MS) + Number(s.environment.STOWAGE_SHUTDOWN_TIMEOUT_MS) < grace,
      'the stop grace period covers the graceful shutdown',
    );
  }
  const published = Object.values(services).flatMap((s) => (s.ports ?? []) as string[]);
  assert.ok(!published.some((p) => p.includes('9464')), '/metrics is not published');
  assert.match(services['s3-init'].command.join(' '), /mc mb --ignore-existing local\/media/);
  assert.equal(services['s3-init'].depends_on.s3.condition, 'service_healthy');
  assert.deepEqual(services.proxy.depends_on, {
    'stowage-1': { condition: 'service_healthy' },
    'stowage-2': { condition: 'service_healthy' },
  });
  for (const secret of Object.values(compose.secrets as Record<string, { file: string }>))
    assert.match(secret.file, /^\.\/secrets\//);
  // The script that makes those files writes each one the compose file names.
  const script = readFileSync(join(ROOT, 'deploy', 'make-secrets.sh'), 'utf8');
  for (const name of Object.keys(compose.secrets)) assert.ok(script.includes(`secrets/${name}`), name);
});
