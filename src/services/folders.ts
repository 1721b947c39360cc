// Folders by path. Uploads with a `folder` create what is missing; management (list, rename,
// delete) arrives with the Files and Folders API.
import type { Kysely } from 'kysely';
import { newShortId, newUuid } from '../crypto/ids.ts';
import { nowIso } from '../db/database.ts';
import type { Database, FolderRow } from '../db/schema.ts';

/** The folder at `segments`, creating it and its parents as needed; null for the root. */
export async function ensureFolderPath(db: Kysely<Database>, workspaceId: string, segments: string[]): Promise<FolderRow | null> {
  let parent: FolderRow | null = null;
  for (let i = 0; i < segments.length; i++) {
    const path = segments.slice(0, i + 1).join('/');
    const now = nowIso();
    // Concurrent uploads may create the same folder: insert-or-ignore, then read.
    await db
      .insertInto('folders')
      .values({ id: newUuid(), folder_no: newShortId(), workspace_id: workspaceId, parent_id: parent?.id ?? null, name: segments[i], path, created_at: now, updated_at: now })
      .onConflict((oc) => oc.columns(['workspace_id', 'path']).doNothing())
      .execute();
    parent = await db.selectFrom('folders').selectAll().where('workspace_id', '=', workspaceId).where('path', '=', path).executeTakeFirstOrThrow();
  }
  return parent;
}
