// The SVG guard: an SVG is rasterized only when it cannot reach anything outside its own bytes.
// librsvg (through sharp) follows `<image href>`, `<use href>`, `xi:include`, CSS `url()` and
// `@import` relative to the file it was opened from, and libxml2 expands entities; handed a
// blob's path on local disk, that reaches every other blob in the directory. So an SVG is read
// into memory (bounded), checked by this strict scanner, and handed to sharp as a Buffer, which
// has no base to resolve against. The scanner refuses what it does not understand rather than
// repair it: a refusal is 400 UNSAFE_SVG and nothing is rendered (SECURITY.md, "SVG").
import type { Readable } from 'node:stream';
import { appError } from '../errors.ts';

/** SVG originals above this many bytes are not rasterized (they are still served as they are). */
export const SVG_MAX_BYTES = 10 * 1024 * 1024;

/** `image/svg+xml`, with or without parameters. */
export const isSvgType = (mimeType: string | undefined) => /^\s*image\/svg\+xml\s*(;|$)/i.test(mimeType ?? '');

const unsafe = (why: string) => appError('UNSAFE_SVG', `the SVG is not rendered: ${why}`);

/** Reads `source` whole, refusing (UNSAFE_SVG) once it passes `max` bytes. */
export async function readCapped(source: Readable, max = SVG_MAX_BYTES): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of source) {
      size += (chunk as Buffer).length;
      if (size > max) throw unsafe(`it is larger than ${max} bytes`);
      chunks.push(chunk as Buffer);
    }
  } finally {
    source.destroy();
  }
  return Buffer.concat(chunks);
}

/**
 * The bytes to hand to sharp for an SVG: `bytes` itself, or a copy with a bare DOCTYPE (one
 * that only names a public DTD, as Illustrator writes) blanked out. Throws UNSAFE_SVG otherwise.
 */
export function guardSvg(bytes: Buffer, max = SVG_MAX_BYTES): Buffer {
  if (bytes.length > max) throw unsafe(`it is larger than ${max} bytes`);
  const text = decode(bytes);
  const blank = new SvgScanner(text).scan();
  if (!blank) return bytes;
  // Spaces keep every offset; prolog whitespace means nothing to XML.
  const out = text.slice(0, blank[0]) + ' '.repeat(blank[1] - blank[0]) + text.slice(blank[1]);
  return Buffer.from(out, 'utf8');
}

/** Guarded SVG bytes from a stream (delivery's hook: the source is never given to sharp by path). */
export async function guardSvgStream(source: Readable, max = SVG_MAX_BYTES): Promise<Buffer> {
  return guardSvg(await readCapped(source, max), max);
}

/**
 * UTF-8 only. libxml2 honours BOMs and `encoding=` declarations, so a UTF-16, UTF-7 or EBCDIC
 * document would read differently to it than to this scanner; gzip (SVGZ) is decoded by librsvg
 * and would hide everything from it. All of those are refused, as are NULs and invalid UTF-8.
 */
function decode(bytes: Buffer): string {
  if (bytes.length >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b)
    throw unsafe('compressed SVG (SVGZ) is not rendered');
  if (
    (bytes.length >= 2 && ((bytes[0] === 0xfe && bytes[1] === 0xff) || (bytes[0] === 0xff && bytes[1] === 0xfe))) ||
    bytes.includes(0)
  )
    throw unsafe('only UTF-8 SVG is rendered');
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw unsafe('only UTF-8 SVG is rendered');
  }
  // The decoder drops a UTF-8 BOM; offsets in `text` then differ from the bytes', which is
  // why a blanked DOCTYPE is re-encoded from the text rather than patched into the bytes.
  return text;
}

/** Element local names that run code, embed other documents or pull in other files. */
const FORBIDDEN_ELEMENTS = new Set([
  'script',
  'foreignobject',
  'include',
  'fallback',
  'handler',
  'listener',
  'iframe',
  'embed',
  'object',
  'link',
  'import',
]);
/** Namespaces whose very declaration is refused (XInclude, both spellings libxml2 knows). */
const FORBIDDEN_NAMESPACE = /xinclude/i;
/** Raster images carried inside the SVG: the only non-fragment reference allowed. */
const RASTER_DATA = /^data:image\/(png|jpeg|jpg|gif|webp)(;[a-z0-9=._+-]*)*,/i;
/** An XML name, roughly (any non-ASCII letter is allowed; what matters is where it ends). */
const NAME = /[A-Za-z_:\u00C0-\uFFFF][-A-Za-z0-9._:\u00B7\u00C0-\uFFFF]*/y;
/** XML 1.0 Char, without the C0 controls other than tab, LF and CR. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is this pattern's job
const ILLEGAL_CHAR = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/;

class SvgScanner {
  private i = 0;
  private readonly stack: string[] = [];
  private rootSeen = false;
  private doctype: [number, number] | undefined;
  /** The text of the open <style> element, judged whole at its end tag (comments and CDATA split it). */
  private style: string | undefined;

  constructor(private readonly s: string) {}

  /** Refuses (throws) or returns the span of a bare DOCTYPE to blank out. */
  scan(): [number, number] | undefined {
    const s = this.s;
    if (ILLEGAL_CHAR.test(s)) throw unsafe('it holds characters XML does not allow');
    this.declaration();
    while (this.i < s.length) {
      const lt = s.indexOf('<', this.i);
      const textEnd = lt === -1 ? s.length : lt;
      this.text(this.i, textEnd);
      if (lt === -1) break;
      this.i = lt;
      if (s.startsWith('<!--', lt)) this.comment();
      else if (s.startsWith('<![CDATA[', lt)) this.cdata();
      else if (s.startsWith('<!DOCTYPE', lt)) this.doctypeDecl();
      else if (s.startsWith('<!', lt)) throw unsafe('it holds a markup declaration (<!...)');
      else if (s.startsWith('<?', lt)) throw unsafe('it holds a processing instruction (such as xml-stylesheet)');
      else if (s.startsWith('</', lt)) this.endTag();
      else this.startTag();
    }
    if (!this.rootSeen || this.stack.length > 0) throw notWellFormed();
    return this.doctype;
  }

  /** `<?xml version=... encoding=...?>`, only at the very start; the encoding must be UTF-8. */
  private declaration(): void {
    const m = /^<\?xml(\s[^<>]*?)?\?>/.exec(this.s);
    if (!m) return;
    const body = m[1] ?? '';
    const enc = /\sencoding\s*=\s*(["'])([^"']*)\1/.exec(body);
    if (enc && !/^(utf-?8|us-ascii|ascii)$/i.test(enc[2])) throw unsafe('only UTF-8 SVG is rendered');
    if (
      !/^\s+version\s*=\s*(["'])1\.[0-9]\1(\s+encoding\s*=\s*(["'])[^"']*\3)?(\s+standalone\s*=\s*(["'])(yes|no)\5)?\s*$/.test(
        body,
      )
    )
      throw notWellFormed();
    this.i = m[0].length;
  }

  /** Character data: entity references must be the predefined ones or numeric. */
  private text(from: number, to: number): void {
    if (from >= to) return;
    const raw = this.s.slice(from, to);
    if (raw.includes(']]>')) throw notWellFormed();
    if (this.stack.length === 0) {
      if (raw.trim() !== '') throw notWellFormed();
      return;
    }
    const value = decodeEntities(raw);
    if (this.style !== undefined) this.style += value;
  }

  private comment(): void {
    const end = this.s.indexOf('-->', this.i + 4);
    if (end === -1) throw notWellFormed();
    // "--" inside a comment is not XML: a parser that recovers from it could end the comment
    // somewhere else than this scanner does.
    if (this.s.slice(this.i + 4, end).includes('--')) throw notWellFormed();
    this.i = end + 3;
  }

  private cdata(): void {
    const start = this.i + 9;
    const end = this.s.indexOf(']]>', start);
    if (end === -1 || this.stack.length === 0) throw notWellFormed();
    // Inside <style> a CDATA section is CSS like any other text.
    if (this.style !== undefined) this.style += this.s.slice(start, end);
    this.i = end + 3;
  }

  /**
   * A DOCTYPE that only names an external DTD (`<!DOCTYPE svg PUBLIC "..." "...">`) is blanked:
   * nothing is declared, and removing it makes sure nothing is fetched. One with an internal
   * subset (`[...]`, where entities and XInclude tricks live) is refused.
   */
  private doctypeDecl(): void {
    if (this.rootSeen || this.doctype) throw unsafe('it holds a DOCTYPE where none may be');
    const rest = this.s.slice(this.i);
    const m =
      /^<!DOCTYPE\s+[A-Za-z_:][-A-Za-z0-9._:]*(\s+(PUBLIC\s+("[^"<>[\]]*"|'[^'<>[\]]*')\s+|SYSTEM\s+)("[^"<>[\]]*"|'[^'<>[\]]*'))?\s*>/.exec(
        rest,
      );
    if (!m) throw unsafe('it declares a DOCTYPE with entities or other declarations');
    this.doctype = [this.i, this.i + m[0].length];
    this.i += m[0].length;
  }

  private endTag(): void {
    const m = /^<\/([^\s/<>]+)\s*>/.exec(this.s.slice(this.i, this.i + 1024));
    if (!m || this.stack.pop() !== m[1]) throw notWellFormed();
    if (this.style !== undefined) {
      checkCss(this.style);
      this.style = undefined;
    }
    this.i += m[0].length;
  }

  private startTag(): void {
    const s = this.s;
    let i = this.i + 1;
    const name = this.name(i);
    i += name.length;
    if (this.stack.length === 0) {
      if (this.rootSeen) throw notWellFormed();
      this.rootSeen = true;
      if (localName(name).toLowerCase() !== 'svg') throw unsafe('its root element is not <svg>');
    }
    const local = localName(name).toLowerCase();
    if (FORBIDDEN_ELEMENTS.has(local)) throw unsafe(`it holds a <${name.slice(0, 64)}> element`);
    // A style sheet is text only: an element inside one would make "its text" ambiguous.
    if (this.style !== undefined) throw unsafe('its <style> holds an element');
    const seen = new Set<string>();
    for (;;) {
      const ws = skipSpace(s, i) - i;
      i += ws;
      if (s.startsWith('/>', i)) {
        i += 2;
        break;
      }
      if (s[i] === '>') {
        i += 1;
        this.stack.push(name);
        if (local === 'style') this.style = '';
        break;
      }
      if (ws === 0) throw notWellFormed();
      const attr = this.name(i);
      i += attr.length;
      i = skipSpace(s, i);
      if (s[i] !== '=') throw notWellFormed();
      i = skipSpace(s, i + 1);
      const quote = s[i];
      if (quote !== '"' && quote !== "'") throw notWellFormed();
      const close = s.indexOf(quote, i + 1);
      if (close === -1) throw notWellFormed();
      const raw = s.slice(i + 1, close);
      if (raw.includes('<')) throw notWellFormed();
      i = close + 1;
      if (seen.has(attr)) throw notWellFormed();
      seen.add(attr);
      checkAttribute(attr, decodeEntities(raw));
    }
    this.i = i;
  }

  private name(at: number): string {
    NAME.lastIndex = at;
    const m = NAME.exec(this.s);
    if (!m) throw notWellFormed();
    return m[0];
  }
}

function skipSpace(s: string, at: number): number {
  let i = at;
  while (i < s.length && (s[i] === ' ' || s[i] === '\t' || s[i] === '\n' || s[i] === '\r')) i++;
  return i;
}

const notWellFormed = () => unsafe('it is not well-formed XML');

/** The name after any prefix: `xlink:href`, `x:href` and `href` are all an href to librsvg's eyes or could be. */
function localName(qname: string): string {
  const colon = qname.lastIndexOf(':');
  return colon === -1 ? qname : qname.slice(colon + 1);
}

/** Only `&lt; &gt; &amp; &quot; &apos;` and numeric references exist without a DTD. */
function decodeEntities(raw: string): string {
  if (!raw.includes('&')) return raw;
  return raw.replace(/&([^;&\s<]{0,32});|&/g, (whole, body: string | undefined) => {
    if (body === undefined) throw unsafe('it holds a bare "&" or an unknown entity');
    switch (body) {
      case 'lt':
        return '<';
      case 'gt':
        return '>';
      case 'amp':
        return '&';
      case 'quot':
        return '"';
      case 'apos':
        return "'";
    }
    const m = /^#(?:x([0-9a-fA-F]{1,6})|([0-9]{1,7}))$/.exec(body);
    if (!m) throw unsafe(`it uses the entity ${whole.slice(0, 40)}, which nothing declares`);
    const code = m[1] !== undefined ? Number.parseInt(m[1], 16) : Number(m[2]);
    if (code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) throw notWellFormed();
    const ch = String.fromCodePoint(code);
    if (ILLEGAL_CHAR.test(ch)) throw unsafe('it holds characters XML does not allow');
    return ch;
  });
}

function checkAttribute(qname: string, value: string): void {
  const local = localName(qname).toLowerCase();
  const prefix = qname.includes(':') ? qname.slice(0, qname.indexOf(':')).toLowerCase() : '';
  if ((prefix === 'xmlns' || qname === 'xmlns') && FORBIDDEN_NAMESPACE.test(value))
    throw unsafe('it declares the XInclude namespace');
  if (prefix === 'xml' && local === 'base') throw unsafe('it sets xml:base');
  if (local === 'href' || local === 'src') {
    // URL parsers drop tabs and newlines anywhere and spaces and controls at the ends, so
    // "d&#9;ata:" and " #x" are judged as the parser will read them.
    // biome-ignore lint/suspicious/noControlCharactersInRegex: a URL parser drops these, so the check must too
    const url = value.replace(/[\u0000-\u0020\u007F]/g, '');
    if (url !== '' && !url.startsWith('#') && !isRasterData(url))
      throw unsafe(`${qname.slice(0, 64)} refers outside the SVG (only "#id" and data: raster images are allowed)`);
    return;
  }
  // Any attribute may be a CSS value to librsvg (fill="url(...)", style="...", filter, mask...).
  checkCss(value);
}

/**
 * A data: URL whose bytes are a PNG, JPEG, GIF or WebP image. librsvg goes by the bytes, not the
 * declared type, so `data:image/png;base64,<an SVG>` would be a nested document: the bytes decide.
 */
function isRasterData(url: string): boolean {
  const m = RASTER_DATA.exec(url);
  if (!m) return false;
  const payload = url.slice(m[0].length);
  let head: Buffer;
  if (/;base64,$/i.test(m[0])) head = Buffer.from(payload.slice(0, 32), 'base64');
  else {
    const bytes: number[] = [];
    for (let k = 0; k < payload.length && bytes.length < 12; k++) {
      const hex = payload[k] === '%' ? /^[0-9a-fA-F]{2}/.exec(payload.slice(k + 1, k + 3)) : null;
      if (hex) {
        bytes.push(Number.parseInt(hex[0], 16));
        k += 2;
      } else bytes.push(payload.charCodeAt(k) & 0xff);
    }
    head = Buffer.from(bytes);
  }
  const starts = (...b: number[]) => b.every((x, k) => head[k] === x);
  return (
    starts(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a) ||
    starts(0xff, 0xd8, 0xff) ||
    starts(0x47, 0x49, 0x46, 0x38) ||
    (starts(0x52, 0x49, 0x46, 0x46) && head.subarray(8, 12).toString('latin1') === 'WEBP')
  );
}

/**
 * CSS, as a `<style>` element or any attribute value: no `@import`, and every `url(...)` a
 * fragment. Escapes are decoded first (`\75 rl(` is `url(`), and the text is judged both with
 * and without its comments, so a comment can neither hide a reference nor split one.
 */
function checkCss(css: string): void {
  if (!/[@(\\]/.test(css)) return;
  const variants = css.includes('/*') ? [css, css.replace(/\/\*[\s\S]*?(\*\/|$)/g, '')] : [css];
  for (const variant of variants) {
    const text = cssUnescape(variant);
    if (/@\s*import/i.test(text)) throw unsafe('its CSS uses @import');
    for (const m of text.matchAll(/(url|src|image|image-set)\s*\(\s*(['"]?)\s*/gi)) {
      const after = text.slice((m.index ?? 0) + m[0].length, (m.index ?? 0) + m[0].length + 2);
      if (!after.startsWith('#')) throw unsafe('its CSS refers outside the SVG (only url(#id) is allowed)');
    }
  }
}

/** CSS escapes (`\` + up to six hex digits and one optional space, or `\` + a character). */
function cssUnescape(css: string): string {
  if (!css.includes('\\')) return css;
  return css.replace(
    /\\(?:([0-9a-fA-F]{1,6})[ \t\n\r\f]?|([\s\S]))/g,
    (_w, hex: string | undefined, ch: string | undefined) => {
      if (hex !== undefined) {
        const code = Number.parseInt(hex, 16);
        return code === 0 || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)
          ? '\uFFFD'
          : String.fromCodePoint(code);
      }
      return ch === '\n' ? '' : (ch ?? '');
    },
  );
}
