// nginx (the Debian package) as a foreground child, for tests and bench/delivery: its prefix,
// configuration, pid, logs and every temp path inside a directory of the caller's, a free
// loopback port, and, when started by root, its workers as root too (the caller's files are
// then readable by them without opening their modes to everyone).
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import type { CreatedWorkspace } from '../../src/services/workspaces.ts';
import type { Harness } from './harness.ts';
import { closedPort } from './servers.ts';
import { IN_CI } from './services.ts';

const DEPLOY_MD = fileURLToPath(new URL('../../docs/deploy.md', import.meta.url));

/** Debian's nginx, unless STOWAGE_TEST_NGINX names another. */
export const NGINX = process.env.STOWAGE_TEST_NGINX ?? '/usr/sbin/nginx';

export const haveNginx = (binary = NGINX) => existsSync(binary);

/**
 * For the `skip` of a suite that needs nginx: false when it is installed, else the reason. Under
 * CI a missing nginx is a failing test of its own (.ci/run installs it).
 */
export function nginxSkip(): string | false {
  if (haveNginx()) return false;
  if (IN_CI) test('nginx is installed', () => assert.fail(`${NGINX} is missing: .ci/run installs Debian's nginx`));
  return `install nginx (${NGINX}, or set STOWAGE_TEST_NGINX) to run`;
}

/**
 * What the suites with nginx in front of a harness serve: a photo-like PNG of some size (400x300
 * of noise: nothing about it compresses away) and a second workspace with signed transformations.
 */
export async function nginxFixtures(h: Harness): Promise<{ photo: Buffer; signedWs: CreatedWorkspace }> {
  const photo = await sharp({
    create: {
      width: 400,
      height: 300,
      channels: 3,
      background: '#808080',
      noise: { type: 'gaussian', mean: 128, sigma: 40 },
    },
  })
    .png()
    .toBuffer();
  const signedWs = await h.services.workspaces.create('Signed transformations');
  await h.services.workspaces.updateSettings(signedWs.workspace_id, { signed_transformations: true });
  return { photo, signedWs };
}

export interface Nginx {
  base: string;
  port: number;
  child: ChildProcess;
  /** What nginx wrote to its error log so far. */
  errors(): string;
  stop(): Promise<void>;
}

/**
 * Starts nginx with one worker. `http(port)` is the inside of the `http` block (servers and
 * settings) for the port nginx is to listen on; answers once nginx answers anything there.
 */
export async function startNginx(dir: string, http: (port: number) => string, binary = NGINX): Promise<Nginx> {
  const port = await closedPort();
  for (const d of ['client', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(dir, d), { recursive: true });
  const conf = join(dir, 'nginx.conf');
  const log = join(dir, 'error.log');
  const user = userInfo();
  writeFileSync(
    conf,
    `${user.uid === 0 ? `user ${user.username};\n` : ''}worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${log} warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/client;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
${http(port)}
}
`,
  );
  const child = spawn(binary, ['-p', dir, '-c', conf, '-e', log, '-g', 'daemon off;'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d));
  const errors = () => `${stderr}${existsSync(log) ? readFileSync(log, 'utf8') : ''}`;
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  };
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) throw new Error(`nginx exited ${child.exitCode}: ${errors()}`);
    const up = await fetch(`${base}/`).then(
      async (r) => {
        await r.arrayBuffer();
        return true;
      },
      () => false,
    );
    if (up) return { base, port, child, errors, stop };
    await new Promise((r) => setTimeout(r, 100));
  }
  await stop();
  throw new Error(`nginx did not answer: ${errors()}`);
}

/**
 * The nginx server block of docs/deploy.md ("Serving files through nginx"), as documented,
 * pointed at a Stowage on 127.0.0.1:`upstream` with data in `dataDir`, listening on `port`:
 * tests and bench/delivery run the recipe itself, so it cannot drift from what is measured.
 */
export function documentedStowageServer(port: number, upstream: number, dataDir: string): string {
  const page = readFileSync(DEPLOY_MD, 'utf8');
  const section = page.slice(page.indexOf('## Serving files through nginx (X-Accel-Redirect)'));
  let conf = /```nginx\n([\s\S]*?)```/.exec(section)?.[1];
  if (!conf) throw new Error('docs/deploy.md has no nginx block under "Serving files through nginx"');
  for (const [from, to] of [
    ['server 127.0.0.1:3000;', `server 127.0.0.1:${upstream};`],
    ['listen 80;', `listen 127.0.0.1:${port};`],
    ['alias /var/lib/stowage/', `alias ${dataDir}/`],
  ]) {
    if (!conf.includes(from)) throw new Error(`the nginx block of docs/deploy.md no longer has "${from}"`);
    conf = conf.replace(from, to);
  }
  return conf;
}

/**
 * The nginx block of docs/deploy.md ("Caching delivery in nginx"): the cache, its maps and the
 * server in front of Stowage on 127.0.0.1:`upstream`, listening on `port`, its cache files in
 * `cacheDir`. Read from the page, as `documentedStowageServer` is.
 */
export function documentedCachingProxy(port: number, upstream: number, cacheDir: string): string {
  const page = readFileSync(DEPLOY_MD, 'utf8');
  const section = page.slice(page.indexOf('## Caching delivery in nginx (proxy_cache)'));
  let conf = /```nginx\n([\s\S]*?)```/.exec(section)?.[1];
  if (!conf) throw new Error('docs/deploy.md has no nginx block under "Caching delivery in nginx"');
  for (const [from, to] of [
    ['server 127.0.0.1:3000;', `server 127.0.0.1:${upstream};`],
    ['listen 80;', `listen 127.0.0.1:${port};`],
    ['proxy_cache_path /var/cache/nginx/stowage ', `proxy_cache_path ${cacheDir} `],
  ]) {
    if (!conf.includes(from)) throw new Error(`the caching block of docs/deploy.md no longer has "${from}"`);
    conf = conf.replace(from, to);
  }
  return conf;
}
