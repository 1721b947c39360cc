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
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { installTarball, linkInstalled, packFromCopy, productionPackages } from './helpers/pack.ts';
import { startServer } from './helpers/process.ts';

// (@types/node is not among them: graphile-config and wkx list it as a dependency of their own.)
const DEV_ONLY = ['tsx', 'typescript', 'esbuild'];

const work = mkdtempSync(join(tmpdir(), 'stowage-pack-'));
after(() => rmSync(work, { recursive: true, force: true }));

test('npm pack, installed without dev dependencies, starts from dist/, serves an upload and runs the CLI', async () => {
  // 1. Pack from a temporary copy, so the checkout's own dist/ is not touched.
  const { tarball, listing } = packFromCopy(work);
  assert.match(listing, /package\/dist\/src\/main\.js/);
  assert.match(listing, /package\/dist\/src\/browser\/dashboard-app\.js/);
  assert.match(listing, /package\/bin\/stowage-server\.js/);
  assert.doesNotMatch(listing, /package\/src\//, 'sources stay out of the package');
  assert.doesNotMatch(listing, /package\/test\//, 'tests stay out of the package');

  // 2. An empty project with the production dependencies and the package.
  const app = join(work, 'app');
  const modules = join(app, 'node_modules');
  linkInstalled(app, productionPackages());
  for (const dev of DEV_ONLY) assert.ok(!existsSync(join(modules, dev)), `${dev} is not a production dependency`);
  installTarball(tarball, app, 'stowage');
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
