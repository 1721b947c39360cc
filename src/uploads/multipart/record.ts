// The end of a multipart complete: the object storage assembled becomes a file record through
// the one commit step every upload ends in (commit.ts), and the session is marked completed in
// the same transaction. Of two completers of one session, exactly one writes the record.
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { MultipartSessionRow } from '../../db/schema.ts';
import { AppError, errors } from '../../errors.ts';
import { HEAD_BYTES } from '../../media/detect.ts';
import type { FileRecord } from '../../services/files.ts';
import type { MultipartContext } from './context.ts';

/** Another completer wrote the session's record first (see `recordAssembled`). */
class CompletedElsewhere extends Error {}

/** The assembled object becomes a file record; the session is marked completed with it. */
export async function recordAssembled(
  ctx: MultipartContext,
  s: MultipartSessionRow,
  runningHash?: string,
): Promise<FileRecord> {
  const { storage, sessions } = ctx;
  const size = Number(s.size);
  let sha256 = runningHash;
  if (!sha256) {
    const hash = createHash('sha256');
    for await (const chunk of await storage.get(s.storage_key)) hash.update(chunk as Buffer);
    sha256 = hash.digest('hex');
  }
  const head = await readHead(await storage.get(s.storage_key, { start: 0, end: Math.min(size, HEAD_BYTES) - 1 }));
  const staged = { workspaceId: s.workspace_id, key: s.storage_key, size, sha256, head };
  try {
    return await ctx.uploads.finish(
      staged,
      {
        name: s.file_name,
        folder: s.folder ? s.folder.split('/') : [],
        tags: JSON.parse(s.tags),
        metadata: JSON.parse(s.metadata),
        custom_id: s.custom_id,
        randomPrefix: false,
        transform: null,
        webhookUrl: s.webhook_url,
        mayReplace: Boolean(s.may_replace),
      },
      'multipart',
      {
        inTransaction: async (trx, row) => {
          // Only one completer writes the record: a second one (a client retry racing the
          // sweeper's take-over) rolls back here and returns the winner's record, never
          // touching the bytes that are now the winner's.
          if (!(await sessions.in(trx).markCompleted(s.id, row.id))) throw new CompletedElsewhere();
        },
        // A passing failure (database down) must not lose the assembled file: a retry of
        // complete picks it up. A refusal (quota) ends the session.
        keepOnError: (err) => !(err instanceof AppError),
      },
    );
  } catch (err) {
    // Lost the race (here, or on PostgreSQL at the blob's unique index, which waits for the
    // winner to commit): the winner's record is the answer.
    const now = await sessions.byId(s.id).catch(() => undefined);
    if (now?.status === 'completed' && now.file_id) return recordOf(ctx, now);
    if (err instanceof CompletedElsewhere) throw errors.completeInProgress();
    if (err instanceof AppError) await sessions.move(s.id, 'completing', 'aborted');
    throw err;
  }
}

/** The record a completed session made, as its uploader may see it. */
export async function recordOf(ctx: MultipartContext, s: MultipartSessionRow): Promise<FileRecord> {
  const found = await ctx.sessions.completedFile(s.file_id!);
  if (!found) throw errors.sessionNotFound();
  const record = ctx.records.view(
    found.file,
    found.folder_no,
    found.sha256,
    await ctx.records.transformKey(found.file.workspace_id),
  );
  if (!s.may_replace) record.is_duplicate = false;
  return record;
}

async function readHead(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const chunk of stream) {
    chunks.push(chunk as Buffer);
    n += (chunk as Buffer).length;
    if (n >= HEAD_BYTES) break;
  }
  stream.destroy();
  return Buffer.concat(chunks).subarray(0, HEAD_BYTES);
}
