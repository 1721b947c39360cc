// `npm run seed -- … --check`: after seeding, the invariants an upload keeps, checked in SQL
// on either dialect. Each query counts the rows that break one; all must be zero.
import { sql } from 'kysely';
import type { Db } from '../../../src/db/database.ts';
import { derivedDrift } from '../../../src/db/derived.ts';

const CHECKS: Record<string, string> = {
  'used_bytes is the sum of the workspace blobs': `
    select count(*) as n from workspaces w
     where w.used_bytes <> coalesce((select sum(b.size) from blobs b where b.workspace_id = w.id), 0)
        or w.reserved_bytes <> 0`,
  'a file has its blob size, in its workspace': `
    select count(*) as n from files f join blobs b on b.id = f.blob_id
     where f.size <> b.size or f.workspace_id <> b.workspace_id`,
  "a file's folder is in its workspace": `
    select count(*) as n from files f join folders d on d.id = f.folder_id where d.workspace_id <> f.workspace_id`,
  "a folder's path is its parent's path and its name": `
    select count(*) as n from folders c left join folders p on p.id = c.parent_id
     where (c.parent_id is null and c.path <> c.name)
        or (c.parent_id is not null and (p.path is null or c.path <> p.path || '/' || c.name))`,
  'each blob has one original file, the rest are duplicates': `
    select count(*) as n from (
      select blob_id, sum(case when is_duplicate = 0 then 1 else 0 end) as originals from files group by blob_id
    ) t where originals <> 1`,
  'no blob without a file': `
    select count(*) as n from blobs b where not exists (select 1 from files f where f.blob_id = b.id)`,
  'file_no is unique': `
    select count(*) as n from (select file_no from files group by file_no having count(*) > 1) t`,
};

/** The names of the broken invariants (empty when all hold). */
export async function checkInvariants(db: Db, log: (line: string) => void): Promise<string[]> {
  const broken: string[] = [];
  for (const [name, query] of Object.entries(CHECKS)) {
    const { rows } = await sql<{ n: number }>`${sql.raw(query)}`.execute(db.kysely);
    const n = Number(rows[0]?.n ?? 0);
    log(`${n === 0 ? 'ok  ' : 'FAIL'} ${name}${n === 0 ? '' : ` (${n} rows)`}`);
    if (n !== 0) broken.push(name);
  }
  for (const [name, n] of Object.entries(await derivedDrift(db.kysely))) {
    log(`${n === 0 ? 'ok  ' : 'FAIL'} derived: ${name}${n === 0 ? '' : ` (${n} rows)`}`);
    if (n !== 0) broken.push(name);
  }
  return broken;
}
