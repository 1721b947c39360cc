// The last step of the pipeline: what an upload tells the rest of the process once its record
// is committed. Side effects such as metrics subscribe to these on the services' EventEmitter;
// the webhook is not one of them (it is queued in the commit's transaction, see commit.ts).
import type { EventEmitter } from 'node:events';
import type { UploadSource } from './options.ts';

export const UPLOAD_COMPLETED = 'upload.completed';

export interface UploadCompleted {
  source: UploadSource;
  size: number;
  workspaceId: string;
}

export function announceUpload(events: EventEmitter | undefined, e: UploadCompleted): void {
  events?.emit(UPLOAD_COMPLETED, e);
}
