// The package as an operator installs it: `npm pack` (its prepack builds dist/) in a temporary copy
// of the repository, then the tarball installed into an empty project with the production
// dependencies only. The server must start from dist/ and serve, the CLI must run, and nothing
// may need tsx, TypeScript or esbuild.
//
// The production dependencies are hard links of this checkout's own installed packages (their
// closure, computed as npm installs it): downloading and compiling them again would take minutes
// and test npm, not Stowage.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { after, test } from 'node:test';
import { ROOT, startServer } from './helpers/process.ts';

const SKIP_IN_COPY = new Set(['node_modules', '.git', 'data', 'dist', '.test-artifacts']);
// (@types/node is not among them: graphile-config and wkx list it as a dependency of their own.)
const DEV_ONLY = ['tsx', 'typescript', 'esbuild'];

const work = mkdtempSync(join(tmpdir(), 'stowage-pack-'));
after(() => rmSync(work, { recursive: true, force: true }));

/**
 * The production dependency closure as npm installs it (dependencies, installed optional ones,
 * required peers; not optional peers such as cosmiconfig's typescript), as paths relative to
 * node_modules, found by Node's lookup from each dependent's folder.
 */
function productionPackages(): string[] {
  const root = resolve(ROOT);
  const modules = join(root, 'node_modules');
  const found = new Set<string>();
  const locate = (name: string, from: string): string | undefined => {
    for (let dir = from; dir.startsWith(root); dir = dirname(dir)) {
      const candidate = join(dir, 'node_modules', name);
      if (existsSync(join(candidate, 'package.json'))) return candidate;
      if (dir === root) break;
    }
    return undefined;
  };
  const visit = (dir: string) => {
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    const optionalPeers = pkg.peerDependenciesMeta ?? {};
    const names = [
      ...Object.keys(pkg.dependencies ?? {}),
      ...Object.keys(pkg.optionalDependencies ?? {}),
      ...Object.keys(pkg.peerDependencies ?? {}).filter((n) => !optionalPeers[n]?.optional),
    ];
    for (const name of names) {
      const at = locate(name, dir);
      if (!at || found.has(at)) continue;
      found.add(at);
      visit(at);
    }
  };
  visit(root);
  return [...found].map((p) => relative(modules, p));
}

test('npm pack, installed without dev dependencies, starts from dist/, serves an upload and runs the CLI', async () => {
  // 1. Pack from a temporary copy, so the checkout's own dist/ is not touched.
  const copy = join(work, 'checkout');
  cpSync(ROOT, copy, { recursive: true, filter: (src) => !SKIP_IN_COPY.has(relative(ROOT, src).split('/')[0]) });
  symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'));
  const packed = execFileSync('npm', ['pack', '--silent', '--pack-destination', work], {
    cwd: copy,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  })
    .trim()
    .split('\n')
    .pop()!;
  const tarball = join(work, packed);
  const listing = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' });
  assert.match(listing, /package\/dist\/src\/main\.js/);
  assert.match(listing, /package\/dist\/src\/browser\/dashboard-app\.js/);
  assert.match(listing, /package\/bin\/stowage-server\.js/);
  assert.doesNotMatch(listing, /package\/src\//, 'sources stay out of the package');
  assert.doesNotMatch(listing, /package\/test\//, 'tests stay out of the package');

  // 2. An empty project with the production dependencies and the package.
  const app = join(work, 'app');
  const modules = join(app, 'node_modules');
  mkdirSync(modules, { recursive: true });
  for (const pkg of productionPackages()) {
    const target = join(modules, pkg);
    if (existsSync(target)) continue;
    mkdirSync(join(target, '..'), { recursive: true });
    execFileSync('cp', ['-al', join(ROOT, 'node_modules', pkg), target]);
  }
  for (const dev of DEV_ONLY) assert.ok(!existsSync(join(modules, dev)), `${dev} is not a production dependency`);
  mkdirSync(join(modules, 'stowage'));
  execFileSync('tar', ['-xzf', tarball, '-C', join(modules, 'stowage'), '--strip-components=1']);
  assert.ok(readdirSync(join(modules, 'stowage', 'dist')).includes('BUILD'));

  // 3. The server, from dist/.
  const dataDir = join(work, 'data');
  const server = await startServer(
    { STOWAGE_DATA_DIR: dataDir },
    { script: join(modules, 'stowage', 'bin', 'stowage-server.js'), cwd: app },
  );
  try {
    assert.doesNotMatch(server.output(), /building it first/, 'an installed package runs dist/ as it is');
    assert.equal((await fetch(`${server.url}/readyz`)).status, 200);
    const first = JSON.parse(execFileSync('cat', [join(dataDir, 'first-workspace.json')], { encoding: 'utf8' }));
    const form = new FormData();
    form.set('file_name', 'hello.txt');
    form.set('file', new Blob([Buffer.from('hello from a production install')]), 'hello.txt');
    const up = await fetch(`${server.url}/api/v1/uploads`, {
      method: 'POST',
      headers: { authorization: `Bearer ${first.private_key}` },
      body: form,
    });
    assert.equal(up.status, 201, await up.clone().text());
    const record = (await up.json()) as { url?: string; data?: { url?: string } };
    const url = record.url ?? record.data?.url;
    assert.ok(url);
    const got = await fetch(new URL(new URL(url).pathname, server.url));
    assert.equal(await got.text(), 'hello from a production install');
    // The dashboard's scripts come from dist/src/browser/ (esbuild is not installed).
    const page = await fetch(`${server.url}/dashboard/app.js`);
    assert.equal(page.status, 200);
    assert.ok((await page.text()).length > 1000);

    // 4. The CLI, from dist/, on the same data directory.
    const cli = execFileSync(
      process.execPath,
      [join(modules, 'stowage', 'bin', 'stowage.js'), 'workspace', 'list', '--json'],
      { cwd: app, encoding: 'utf8', env: { PATH: process.env.PATH, STOWAGE_DATA_DIR: dataDir } },
    );
    assert.ok(
      JSON.parse(cli).some(
        (w: { id?: string; workspace_id?: string }) => (w.id ?? w.workspace_id) === first.workspace_id,
      ),
    );
  } finally {
    assert.equal(await server.stop('SIGTERM'), 0);
  }
});
