// The last step of the pipeline: what an upload tells the rest of the process once its record
// is committed. Side effects such as metrics subscribe on the services' typed emitter
// (src/events.ts); the webhook is not one of them (it is queued in the commit's transaction,
// see commit.ts).
import type { DomainEvents, UploadCompleted } from '../events.ts';

export function announceUpload(events: DomainEvents | undefined, e: UploadCompleted): void {
  events?.emit('upload.completed', e);
}
