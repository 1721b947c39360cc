// Packages as users install them: `npm pack` (which runs the package's prepack build) in a
// temporary copy of the repository, so the checkout's own dist/ folders are never touched, and
// the tarball unpacked into a scratch project's node_modules without a registry.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, symlinkSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { ROOT } from './process.ts';

const SKIP_IN_COPY = new Set(['node_modules', '.git', 'data', 'dist', '.test-artifacts']);

export interface Packed {
  /** The tarball's path. */
  tarball: string;
  /** Its entries, one a line (`package/…`). */
  listing: string;
}

/**
 * Copies the repository (or only the top-level entries in `only`) into `work/checkout`, with
 * this checkout's node_modules linked in for the build tools, and runs `npm pack` in `dir`
 * (relative to the repository) there. Build output (`dist`) is never copied: the pack builds it.
 */
export function packFromCopy(work: string, opts: { dir?: string; only?: string[] } = {}): Packed {
  const copy = join(work, 'checkout');
  const only = opts.only ? new Set(opts.only) : undefined;
  cpSync(ROOT, copy, {
    recursive: true,
    filter: (src) => {
      const parts = relative(ROOT, src).split('/');
      if (parts[0] === '') return true;
      if (only && !only.has(parts[0])) return false;
      return !parts.some((p) => SKIP_IN_COPY.has(p));
    },
  });
  symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'));
  const name = execFileSync('npm', ['pack', '--silent', '--pack-destination', work], {
    cwd: join(copy, opts.dir ?? '.'),
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  })
    .trim()
    .split('\n')
    .pop()!;
  const tarball = join(work, name);
  return { tarball, listing: execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' }) };
}

/** Unpacks `tarball` as `node_modules/<name>` of the project in `app`; returns the package's folder. */
export function installTarball(tarball: string, app: string, name: string): string {
  const target = join(app, 'node_modules', name);
  mkdirSync(target, { recursive: true });
  execFileSync('tar', ['-xzf', tarball, '-C', target, '--strip-components=1']);
  return target;
}

/** Hard links of this checkout's installed `packages` (paths relative to node_modules) into `app`'s node_modules. */
export function linkInstalled(app: string, packages: Iterable<string>): void {
  for (const pkg of packages) {
    const target = join(app, 'node_modules', pkg);
    if (existsSync(target)) continue;
    mkdirSync(dirname(target), { recursive: true });
    execFileSync('cp', ['-al', join(ROOT, 'node_modules', pkg), target]);
  }
}

/**
 * The dependency closure of the package in `from` (the repository by default) as npm installs it
 * (dependencies, installed optional ones, required peers; not optional peers such as
 * cosmiconfig's typescript), as paths relative to node_modules, found by Node's lookup from each
 * dependent's folder.
 */
export function productionPackages(from = ROOT): string[] {
  const root = resolve(ROOT);
  const modules = join(root, 'node_modules');
  const found = new Set<string>();
  const locate = (name: string, start: string): string | undefined => {
    for (let dir = start; dir.startsWith(root); dir = dirname(dir)) {
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
  visit(resolve(from));
  return [...found].map((p) => relative(modules, p));
}
