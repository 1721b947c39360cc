// What a file is, from its first bytes (magic numbers) first and its name second; image
// dimensions from the header, without decoding pixels.
import { fileTypeFromBuffer } from 'file-type';
import { imageSize } from 'image-size';
import mime from 'mime-types';

/** How many leading bytes an upload keeps for detection (JPEG headers can sit after EXIF). */
export const HEAD_BYTES = 256 * 1024;

export interface Detected {
  mime_type: string;
  /** Short format name from the content (jpg, png, pdf, mp4…), else from the name. */
  format: string | null;
  width: number | null;
  height: number | null;
}

export async function detect(head: Buffer, fileName: string): Promise<Detected> {
  let sniffed: { mime: string; ext: string } | undefined =
    head.length > 0 ? await fileTypeFromBuffer(head).catch(() => undefined) : undefined;
  const byName = mime.lookup(fileName) || undefined;
  // file-type calls anything opening with `<?xml` XML: an .svg that is SVG stays one (so an SVG
  // with an XML declaration can be rendered; the SVG guard checks it before it is).
  if (sniffed?.mime === 'application/xml' && byName === 'image/svg+xml' && looksLikeSvg(head)) sniffed = undefined;
  // file-type follows a TIFF's directory to tell camera raw formats apart; libvips writes large
  // TIFFs with the directory after the pixels, past the head, and then nothing is answered.
  if (!sniffed && isTiffHeader(head)) sniffed = { mime: 'image/tiff', ext: 'tif' };
  const mimeType =
    sniffed?.mime ??
    (byName && !isMagicType(byName) ? byName : byName === 'image/svg+xml' && looksLikeSvg(head) ? byName : undefined) ??
    'application/octet-stream';
  const format = sniffed?.ext ?? extensionOf(fileName);
  let width: number | null = null;
  let height: number | null = null;
  if (mimeType.startsWith('image/')) {
    try {
      const size = imageSize(head);
      width = size.width ?? null;
      height = size.height ?? null;
      // EXIF orientations 5-8 swap the displayed axes.
      if (size.orientation && size.orientation >= 5 && width !== null && height !== null)
        [width, height] = [height, width];
    } catch {
      // Not enough header, or a format image-size does not read: leave unknown.
    }
  }
  return { mime_type: mimeType, format, width, height };
}

/** A name that claims a binary format the bytes did not show is not believed. */
function isMagicType(type: string): boolean {
  return (
    (type.startsWith('image/') && type !== 'image/svg+xml') ||
    type.startsWith('video/') ||
    type.startsWith('audio/') ||
    type === 'application/pdf' ||
    type === 'application/zip'
  );
}

/** "II*\0" (little-endian) or "MM\0*" (big-endian), classic TIFF; BigTIFF has 43 for 42. */
function isTiffHeader(head: Buffer): boolean {
  if (head.length < 8) return false;
  const le = head[0] === 0x49 && head[1] === 0x49 && (head.readUInt16LE(2) === 42 || head.readUInt16LE(2) === 43);
  const be = head[0] === 0x4d && head[1] === 0x4d && (head.readUInt16BE(2) === 42 || head.readUInt16BE(2) === 43);
  return le || be;
}

const looksLikeSvg = (head: Buffer) => /<svg[\s>]/i.test(head.subarray(0, 4096).toString('utf8'));

export function extensionOf(name: string): string | null {
  const m = /\.([A-Za-z0-9]{1,16})$/.exec(name);
  return m ? m[1].toLowerCase() : null;
}
