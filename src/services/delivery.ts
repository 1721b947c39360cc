// Delivery of stored files: `/{workspace_id}/{path}` serves the original, and
// `/{workspace_id}/{tokens}/{path}` a rendition made by sharp and cached in storage beside the
// blob (`<blob key>.renditions/<canonical tokens>.<format>`), so a second identical request does
// no image work. HTTP concerns (Range, conditional requests) stay in the route.
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { PassThrough } from 'node:stream';
import { type Db } from '../db/database.ts';
import { AppError } from '../errors.ts';
import { buildPipeline, type OutputFormat, parseTransform, type TransformSpec } from '../media/transform.ts';
import type { ByteRange, StorageDriver } from '../storage/driver.ts';
import { renditionPrefix } from './blobs.ts';

export interface DeliveryTarget {
  workspaceId: string;
  /** Decoded path segments after the workspace id. */
  segments: string[];
  accept: string | undefined;
}

export interface Delivered {
  /** Opens the bytes (or a range of them). */
  open(range?: ByteRange): Promise<Readable>;
  size: number;
  contentType: string;
  etag: string;
  lastModified: Date;
  isRendition: boolean;
  /** f_auto answers depend on Accept. */
  varyAccept: boolean;
  isPrivate: boolean;
}

const MIME: Record<OutputFormat, string> = { webp: 'image/webp', avif: 'image/avif', jpg: 'image/jpeg', png: 'image/png', gif: 'image/gif' };
const DECODABLE = /^image\/(jpeg|png|webp|avif|gif|tiff|heic|heif|svg\+xml)$/;
const TOKENS_SHAPE = /^[a-z]+_[^,/]*(,[a-z]+_[^,/]*)*$/;

/** A stable text for a spec: the cache key of its rendition. */
export function canonical(spec: TransformSpec, format: OutputFormat): string {
  const parts: string[] = [];
  if (spec.width) parts.push(`w_${spec.width}`);
  if (spec.height) parts.push(`h_${spec.height}`);
  if (spec.aspectRatio) parts.push(`ar_${spec.aspectRatio.join('-')}`);
  if (spec.crop) parts.push(`c_${spec.crop}`);
  if (spec.position) parts.push(`p_${spec.position}`);
  if (spec.quality !== undefined) parts.push(`q_${spec.quality}`);
  if (spec.rotate) parts.push(`r_${spec.rotate}`);
  if (spec.flip) parts.push(`flip_${spec.flip}`);
  if (spec.background) parts.push(`bg_${spec.background.slice(1)}`);
  if (spec.grayscale) parts.push('e_grayscale');
  if (spec.blur) parts.push(`e_blur-${spec.blur}`);
  if (spec.sharpen) parts.push(`e_sharpen-${spec.sharpen}`);
  parts.push(`f_${format}`);
  return parts.join(',');
}

/** f_auto: the best format the client says it accepts. */
export function negotiate(accept: string | undefined, originalMime: string): OutputFormat {
  const a = accept ?? '';
  if (/image\/avif/.test(a)) return 'avif';
  if (/image\/webp/.test(a)) return 'webp';
  if (originalMime === 'image/png') return 'png';
  if (originalMime === 'image/gif') return 'gif';
  return 'jpg';
}

export class DeliveryService {
  constructor(
    private readonly db: Db,
    private readonly storage: StorageDriver,
    private readonly maxPixels: number,
    /** Counts renditions made (tests and metrics read it). */
    readonly stats = { renditionsMade: 0, renditionCacheHits: 0 },
  ) {}

  private async file(workspaceId: string, segments: string[]) {
    if (segments.length === 0) return undefined;
    const name = segments[segments.length - 1].normalize('NFC');
    const folderPath = segments.slice(0, -1).map((s) => s.normalize('NFC')).join('/');
    return this.db.kysely
      .selectFrom('files')
      .innerJoin('blobs', 'blobs.id', 'files.blob_id')
      .select(['files.mime_type', 'files.updated_at', 'files.is_private', 'blobs.sha256', 'blobs.size', 'blobs.storage_key'])
      .where('files.workspace_id', '=', workspaceId)
      .where('files.folder_path', '=', folderPath)
      .where('files.name', '=', name)
      .executeTakeFirst();
  }

  async resolve(target: DeliveryTarget): Promise<Delivered> {
    if (!/^[0-9A-Za-z]{10,16}$/.test(target.workspaceId)) throw notFound();
    // The whole path as a file first, so a folder that looks like tokens still works.
    const whole = await this.file(target.workspaceId, target.segments);
    if (whole) {
      return {
        open: (range) => this.storage.get(whole.storage_key, range),
        size: Number(whole.size),
        contentType: whole.mime_type,
        etag: `"${whole.sha256}"`,
        lastModified: new Date(whole.updated_at),
        isRendition: false,
        varyAccept: false,
        isPrivate: Boolean(whole.is_private),
      };
    }
    const [first, ...rest] = target.segments;
    if (!first || rest.length === 0 || !TOKENS_SHAPE.test(first)) throw notFound();
    const spec = parseTransform(first);
    const file = await this.file(target.workspaceId, rest);
    if (!file) throw notFound();
    if (!DECODABLE.test(file.mime_type)) throw new AppError(400, 'TRANSFORM_NOT_APPLICABLE', 'Validation failed', 'transformations apply to images');
    const format = spec.format === 'auto' ? negotiate(target.accept, file.mime_type) : spec.format ?? formatOf(file.mime_type);
    // Storage keys take no commas: the canonical tokens are joined with dots there.
    const key = `${renditionPrefix(file.storage_key)}${canonical(spec, format).replaceAll(',', '.')}.${format}`;
    let info = await this.storage.stat(key);
    if (info) this.stats.renditionCacheHits++;
    else {
      await this.render(file.storage_key, { ...spec, format }, key);
      info = await this.storage.stat(key);
      if (!info) throw new Error('rendition vanished after it was made');
    }
    const size = info.size;
    return {
      open: (range) => this.storage.get(key, range),
      size,
      contentType: MIME[format],
      etag: `"${file.sha256.slice(0, 32)}-${canonical(spec, format)}"`,
      lastModified: new Date(file.updated_at),
      isRendition: true,
      varyAccept: spec.format === 'auto',
      isPrivate: Boolean(file.is_private),
    };
  }

  private async render(sourceKey: string, spec: TransformSpec, key: string): Promise<void> {
    const { pipeline: img } = buildPipeline(spec, { autoFormat: 'webp', maxPixels: this.maxPixels });
    const out = new PassThrough();
    const running = pipeline(await this.storage.get(sourceKey), img, out).catch((err) => out.destroy(err));
    try {
      await this.storage.put(key, out);
      await running;
    } catch (err) {
      const message = String((err as Error).message);
      if (/pixel limit/i.test(message)) throw new AppError(400, 'IMAGE_TOO_LARGE', 'Validation failed', 'the image is larger than the pixel limit');
      throw new AppError(400, 'TRANSFORM_FAILED', 'Validation failed', 'the image could not be decoded');
    }
    this.stats.renditionsMade++;
  }
}

function formatOf(mime: string): OutputFormat {
  if (mime === 'image/png') return 'png';
  if (mime === 'image/webp') return 'webp';
  if (mime === 'image/avif') return 'avif';
  if (mime === 'image/gif') return 'gif';
  return 'jpg';
}

const notFound = () => new AppError(404, 'FILE_NOT_FOUND', 'Not found', 'Nothing is stored at this address');

