// npm run seed -- --db sqlite|postgres --files N [--workspaces W] [--url postgres://…/db]
//                 [--data-dir DIR] [--big-share 0.5] [--folders 1010] [--seed 1] [--reset] [--check]
//
// Bulk-seeds file records for bench/scale through the service's own schema and migrations:
// W workspaces (one big one holding all files, or --big-share of them), ~1,010 nested folders
// in the big one, files with blobs, tags and metadata over two years. Prints the big
// workspace's private API key; DATA_DIR/scale.json keeps it and what the bench needs.
// Defaults: DATA_DIR data/scale-<db>; PostgreSQL postgres://postgres@127.0.0.1:5432/stowage_scale.
import { resolve } from 'node:path';
import { Args } from '../bench/scale/args.ts';
import { stopwatchLog } from '../bench/scale/seed/log.ts';
import { seed } from '../bench/scale/seed/seed.ts';

const DEFAULT_PG = 'postgres://postgres@127.0.0.1:5432/stowage_scale';

async function main(): Promise<void> {
  const args = new Args(process.argv.slice(2), ['reset', 'check']);
  const dialect = args.string('db', 'sqlite');
  if (dialect !== 'sqlite' && dialect !== 'postgres') throw new Error('--db must be sqlite or postgres');
  const workspaces = Math.max(1, Math.floor(args.number('workspaces', 1)));
  const log = stopwatchLog();
  const info = await seed({
    dialect,
    files: Math.floor(args.number('files', 100_000)),
    workspaces,
    url: dialect === 'postgres' ? args.string('url', DEFAULT_PG) : undefined,
    dataDir: resolve(args.string('data-dir', `data/scale-${dialect}`)),
    bigShare: args.number('big-share', 0.5),
    folders: Math.floor(args.number('folders', 1010)),
    seed: Math.floor(args.number('seed', 1)),
    reset: args.flag('reset'),
    check: args.flag('check'),
    log,
  });
  log(`done: ${info.files.toLocaleString('en')} files in ${info.seconds} s`);
  process.stdout.write(
    `workspace_id: ${info.workspaceId} (${info.workspaceFiles.toLocaleString('en')} files, ${info.workspaceFolders} folders)\n` +
      `private_key:  ${info.privateKey}\n` +
      `seed info:    ${info.dataDir}/scale.json\n`,
  );
}

main().catch((err) => {
  process.stderr.write(`seed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
