// The answer of an upload: INTERFACE.md 4.3 documents a flat record and `{success, data}`, and
// the hosted SDKs read `data.file_size` and `data.workspace_no`; this shape satisfies all of them.
import type { FileRecord } from '../../services/files.ts';

export function uploadAnswer(record: FileRecord) {
  return { success: true as const, ...record, data: record };
}
