// What a full local disk becomes: 507 INSUFFICIENT_STORAGE, for object puts and multipart parts.
import { errors } from '../errors.ts';

/**
 * A full disk (ENOSPC) or an exhausted disk quota (EDQUOT) becomes 507 INSUFFICIENT_STORAGE,
 * with the system error kept as its cause; anything else is passed on as it is.
 */
export function mapDiskFull(err: unknown): unknown {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code !== 'ENOSPC' && code !== 'EDQUOT') return err;
  const full = errors.insufficientStorage();
  full.cause = err;
  return full;
}
