// Domain events: the event map (name -> listener arguments) and the emitter services publish on
// and side effects (metrics) subscribe to. A typed node:events EventEmitter: emitting or
// listening with a wrong name or payload does not compile.
import { EventEmitter } from 'node:events';
import type { UploadSource } from './uploads/options.ts';

/** A file record was written by an upload of any kind. */
export interface UploadCompleted {
  /** How it came in: direct, multipart, remote, token. */
  source: UploadSource;
  size: number;
  workspaceId: string;
}

/**
 * Files of a workspace were deleted, renamed, moved or had their settings changed (privacy
 * included), or a folder was renamed or deleted: emitted after the change commits, before the
 * API answers. Replacing a file by upload is `upload.completed`. Delivery's caches listen.
 */
export interface FilesChanged {
  workspaceId: string;
}

/** A workspace's presets were written or deleted (after the commit): delivery forgets what they expanded to. */
export interface PresetsChanged {
  workspaceId: string;
}

export interface DomainEventMap {
  'upload.completed': [UploadCompleted];
  'files.changed': [FilesChanged];
  'presets.changed': [PresetsChanged];
  /** A rendition was asked for: true when it came from the cache, false when it was made. */
  rendition: [hit: boolean];
  /** The rendition cache's eviction removed this many renditions, of these bytes. */
  'renditions.evicted': [count: number, bytes: number];
}

export type DomainEventName = keyof DomainEventMap;

export class DomainEvents extends EventEmitter<DomainEventMap> {}
