// Text layers drawn by libvips' text input (Pango with fontconfig). The font asked for is used when
// fontconfig has it (or a metric-compatible family it knows); otherwise Arimo, which ships with
// Stowage (the npm package @expo-google-fonts/arimo, SIL OFL 1.1) and has Arial's metrics, so a text
// renders the same on every server.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import sharp from 'sharp';
import { appError, errors } from '../../../errors.ts';
import { type RawLayer, rotateRaw, rotatedSize, toRaw } from './raw.ts';
import { LIMITS, type TextLayer } from './spec.ts';

const FONT_DIR = dirname(createRequire(import.meta.url).resolve('@expo-google-fonts/arimo/package.json'));

// fontconfig reads FONTCONFIG_FILE once, when it first starts (the first text drawn, or the first SVG
// with text): so at import, before any request. An operator's own setting is kept.
export const FONTCONFIG_FILE = join(import.meta.dirname, 'fonts.conf');
process.env.FONTCONFIG_FILE ??= FONTCONFIG_FILE;
export const DEFAULT_FAMILY = 'Arimo';
const FONT_FILES = {
  regular: join(FONT_DIR, '400Regular', 'Arimo_400Regular.ttf'),
  bold: join(FONT_DIR, '700Bold', 'Arimo_700Bold.ttf'),
  italic: join(FONT_DIR, '400Regular_Italic', 'Arimo_400Regular_Italic.ttf'),
  boldItalic: join(FONT_DIR, '700Bold_Italic', 'Arimo_700Bold_Italic.ttf'),
};

/**
 * Families tried after the one asked for, before Arimo: metric-compatible ones for the common web
 * fonts (Liberation and DejaVu, when fontconfig has them). Generic names go straight to these.
 */
const SUBSTITUTES: Record<string, readonly string[]> = {
  arial: ['Liberation Sans'],
  helvetica: ['Liberation Sans'],
  'helvetica neue': ['Liberation Sans'],
  verdana: ['DejaVu Sans'],
  tahoma: ['DejaVu Sans'],
  times: ['Liberation Serif', 'DejaVu Serif'],
  'times new roman': ['Liberation Serif', 'DejaVu Serif'],
  georgia: ['DejaVu Serif'],
  courier: ['Liberation Mono', 'DejaVu Sans Mono'],
  'courier new': ['Liberation Mono', 'DejaVu Sans Mono'],
};
const GENERIC: Record<string, readonly string[]> = {
  sans: [],
  'sans-serif': [],
  serif: ['DejaVu Serif'],
  monospace: ['DejaVu Sans Mono'],
  mono: ['DejaVu Sans Mono'],
};

/** The Pango family list for a requested family, ending with the bundled one. */
export function familyList(font: string): string[] {
  const generic = GENERIC[font];
  const asked = generic ? [...generic] : [font, ...(SUBSTITUTES[font] ?? [])];
  return [...asked.filter((f) => f.toLowerCase() !== DEFAULT_FAMILY.toLowerCase()), DEFAULT_FAMILY];
}

let fontsLoaded: Promise<void> | undefined;

/**
 * Registers the bundled font files with fontconfig before the first text is drawn: Pango remembers
 * what a font description resolved to, so a text drawn before Arimo was known would stay on the
 * system's default font for the life of the process.
 */
export function loadBundledFonts(): Promise<void> {
  fontsLoaded ??= (async () => {
    for (const fontfile of Object.values(FONT_FILES)) {
      await sharp({ text: { text: 'x', font: `${DEFAULT_FAMILY} 8px`, fontfile } })
        .raw()
        .toBuffer();
    }
  })();
  return fontsLoaded;
}

/** Text as Pango markup shows it literally: libvips always parses its text as markup. */
export function escapeMarkup(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function describe(layer: TextLayer, size: number): { font: string; fontfile: string; text: string } {
  const style = [layer.bold && 'Bold', layer.italic && 'Italic'].filter(Boolean).join(' ');
  // The trailing comma ends the family list, so no family name is read as a style or a size.
  const font = `${familyList(layer.font).join(',')}, ${style} ${size}px`.replace(/ {2}/g, ' ');
  const fontfile = layer.bold
    ? layer.italic
      ? FONT_FILES.boldItalic
      : FONT_FILES.bold
    : layer.italic
      ? FONT_FILES.italic
      : FONT_FILES.regular;
  let body = escapeMarkup(layer.text);
  if (layer.underline) body = `<u>${body}</u>`;
  return { font, fontfile, text: `<span foreground="#${layer.color}">${body}</span>` };
}

function draw(layer: TextLayer, size: number, width: number, limitInputPixels: number) {
  const d = describe(layer, size);
  return sharp({
    text: {
      ...d,
      width,
      align: layer.align === 'center' ? 'centre' : layer.align,
      wrap: 'word-char',
      rgba: true,
    },
    limitInputPixels,
  });
}

/** libvips' refusals of a text as the 400 they are (a text of only zero-width characters draws nothing); a timeout goes on as it is. */
function drawError(layer: TextLayer, err: unknown): unknown {
  if (!(err instanceof Error) || /timeout/i.test(err.message)) return err;
  const token = layer.tokens[0].slice(0, 60);
  if (/no text to render/.test(err.message))
    return errors.validation(`transform: "${token}" has no visible character to draw`);
  return appError('TRANSFORM_FAILED', `transform: the text of "${token}" could not be drawn`);
}

/** A size measured on a small drawing: libvips allocates the whole text image, so its size is known first. */
const PROBE_SIZE = 16;
/** 500 characters at 16 px take well under a megapixel, however they wrap. */
const PROBE_PIXELS = 4_000_000;

/** The text layer's pixels (before opacity), wrapped at the output's width. */
export async function renderText(
  layer: TextLayer,
  base: { width: number; height: number },
  opts: { maxPixels: number; timeoutSeconds?: number },
): Promise<RawLayer> {
  if (layer.size > base.height) {
    throw errors.validation(
      `transform: "${layer.tokens[0].slice(0, 60)}" has a font size of ${layer.size} px, larger than the output's height of ${base.height} px`,
    );
  }
  await loadBundledFonts();
  const tooTall = (height: number) =>
    errors.validation(
      `transform: "${layer.tokens[0].slice(0, 60)}" is too long: wrapped at the output's width (${base.width} px) it would be about ${height} px tall, and a text may be at most ${LIMITS.textToOutputHeight} times the output's height (${base.height} px)`,
    );
  const maxHeight = LIMITS.textToOutputHeight * base.height + layer.size;
  if (layer.size > PROBE_SIZE) {
    const k = layer.size / PROBE_SIZE;
    const probe = await draw(layer, PROBE_SIZE, Math.max(1, Math.floor(base.width / k)), PROBE_PIXELS)
      .raw()
      .toBuffer({ resolveWithObject: true })
      .catch((err) => {
        throw err instanceof Error && /pixel limit|too big/.test(err.message)
          ? tooTall(maxHeight)
          : drawError(layer, err);
      });
    const estimated = Math.ceil(probe.info.height * k);
    if (estimated > maxHeight) throw tooTall(estimated);
  }
  // A guard beyond the estimate: glyphs overhang the wrap width by at most a few ems.
  const limit = (base.width + 4 * layer.size) * (maxHeight + 2 * layer.size);
  let img = draw(layer, layer.size, base.width, Math.min(limit, opts.maxPixels));
  if (opts.timeoutSeconds) img = img.timeout({ seconds: opts.timeoutSeconds });
  let raw: RawLayer;
  try {
    raw = await toRaw(img);
  } catch (err) {
    if (err instanceof Error && /pixel limit|too big/.test(err.message)) throw tooTall(maxHeight);
    throw drawError(layer, err);
  }
  if (raw.height > maxHeight) throw tooTall(raw.height);
  if (layer.angle) {
    const turned = rotatedSize(raw.width, raw.height, layer.angle);
    if (turned.width * turned.height > opts.maxPixels) throw tooTall(turned.height);
    raw = await rotateRaw(raw, layer.angle);
  }
  return raw;
}
