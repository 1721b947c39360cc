// A multipart part sent through the service (local disk; S3 takes parts at presigned URLs): the
// signed URL is the authorisation, the part must be exactly its length, and it is written in
// place while the session's running hash follows it (running-hash.ts).
import { PassThrough, type Readable } from 'node:stream';
import { AppError, appError, errors } from '../../errors.ts';
import { MultipartSealedError, ObjectNotFoundError, type PartInfo } from '../../storage/driver.ts';
import { PartLengthError } from '../../storage/driver.ts';
import type { MultipartSessionRow } from '../../db/schema.ts';
import { type MultipartContext, nowSeconds } from './context.ts';
import { partLength } from './part-layout.ts';

/** A part arrived for a session that a complete or an abort has sealed. */
const sessionSealed = () => appError('SESSION_COMPLETING');

// Written out: its `error` text names the part and length, where the catalogue's is a template.
const partSizeMismatch = (partNumber: number, expected: number, detail: string) =>
  new AppError(400, 'PART_SIZE_MISMATCH', `Part ${partNumber} must be exactly ${expected} bytes`, detail);

export class Parts {
  constructor(private readonly ctx: MultipartContext) {}

  async put(
    sessionId: string,
    partNumber: number,
    query: { length?: string; expires?: string; signature?: string },
    contentType: string | undefined,
    contentLength: string | undefined,
    body: Readable,
  ): Promise<PartInfo> {
    const verdict = this.ctx.signer.verify(sessionId, partNumber, query, nowSeconds());
    if (verdict === 'bad') throw appError('INVALID_SIGNATURE', 'The part URL signature is not valid');
    if (verdict === 'expired') throw appError('URL_EXPIRED', 'The part URL has expired');
    const s = await this.ctx.sessions.byId(sessionId);
    if (s?.status === 'completing') throw sessionSealed();
    if (s?.status !== 'active' || partNumber < 1 || partNumber > s.part_count) throw errors.sessionNotFound();
    if ((contentType ?? '').split(';')[0].trim().toLowerCase() !== 'application/octet-stream') {
      throw appError('INVALID_CONTENT_TYPE');
    }
    const expected = partLength(s, partNumber);
    if (Number(query.length) !== expected) throw appError('INVALID_SIGNATURE', 'The part URL does not match this part');
    if (contentLength !== undefined && Number(contentLength) !== expected) {
      throw partSizeMismatch(
        partNumber,
        expected,
        `Part ${partNumber} must be exactly ${expected} bytes; Content-Length says ${contentLength}`,
      );
    }
    return this.write(s, partNumber, body);
  }

  /**
   * Writes part `partNumber` of an active session whose caller is already authorised (the
   * signed URL above, or tus's own checks): exactly its length, in place, followed by the
   * running hash.
   */
  async write(s: MultipartSessionRow, partNumber: number, body: Readable): Promise<PartInfo> {
    const expected = partLength(s, partNumber);
    // Piped through, so that a refused part ends the driver's pipeline but not the request,
    // which still gets its answer.
    const pass = new PassThrough();
    pass.on('error', () => {}); // kept for the driver's pipeline, as in staging.ts
    body.once('error', (err) => pass.destroy(err));
    body.pipe(pass);
    const done = this.ctx.hashes.begin(s, partNumber);
    try {
      const part = await this.ctx.storage.writePart!(s.storage_key, s.upload_id, partNumber, pass, expected);
      done(true);
      return part;
    } catch (err) {
      done(false);
      body.unpipe(pass);
      if (err instanceof PartLengthError) throw partSizeMismatch(partNumber, expected, err.message);
      if (err instanceof MultipartSealedError) throw sessionSealed();
      if (err instanceof ObjectNotFoundError) throw errors.sessionNotFound();
      throw err;
    }
  }
}
