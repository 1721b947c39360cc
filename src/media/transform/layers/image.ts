// Image layers: a file of the same workspace (read through the delivery service's own checks), decoded
// under the same pixel limit as any input, then sized, zoomed, adjusted, flipped, rounded and rotated.
import sharp, { type Sharp } from 'sharp';
import { AppError, appError } from '../../../errors.ts';
import { fromRaw, type RawLayer, rotateRaw, rotatedSize, roundCorners, toRaw } from './raw.ts';
import type { ImageLayer, LayerFit } from './spec.ts';

interface Options {
  maxPixels: number;
  timeoutSeconds?: number;
}

function timed(img: Sharp, opts: Options): Sharp {
  return opts.timeoutSeconds ? img.timeout({ seconds: opts.timeoutSeconds }) : img;
}

/** The layer's box before zoom and rotation, and how the image fills it (undefined: as it is). */
export function layerBox(
  layer: ImageLayer,
  natural: { width: number; height: number },
): { width: number; height: number; fit?: LayerFit } {
  let { width, height } = layer;
  const { aspect } = layer;
  if (aspect !== undefined) {
    if (width !== undefined) height = Math.max(1, Math.round(width / aspect));
    else if (height !== undefined) width = Math.max(1, Math.round(height * aspect));
    else if (natural.width / natural.height > aspect) {
      height = natural.height;
      width = Math.max(1, Math.round(natural.height * aspect));
    } else {
      width = natural.width;
      height = Math.max(1, Math.round(natural.width / aspect));
    }
    return { width, height, fit: layer.fit ?? 'fill' };
  }
  if (width !== undefined && height !== undefined) return { width, height, fit: layer.fit ?? 'scale' };
  if (width !== undefined) {
    return { width, height: Math.max(1, Math.round((natural.height * width) / natural.width)), fit: 'scale' };
  }
  if (height !== undefined) {
    return { width: Math.max(1, Math.round((natural.width * height) / natural.height)), height, fit: 'scale' };
  }
  return { ...natural };
}

function sized(
  img: Sharp,
  box: { width: number; height: number; fit?: LayerFit },
  natural: { width: number; height: number },
): Sharp {
  switch (box.fit) {
    case undefined:
      return img;
    case 'crop': {
      // A region of the image at its own scale, centred.
      const width = Math.min(box.width, natural.width);
      const height = Math.min(box.height, natural.height);
      const left = Math.floor((natural.width - width) / 2);
      const top = Math.floor((natural.height - height) / 2);
      return img.extract({ left, top, width, height });
    }
    case 'fill':
      return img.resize({ width: box.width, height: box.height, fit: 'cover', position: 'centre' });
    case 'fit':
      return img.resize({ width: box.width, height: box.height, fit: 'inside' });
    case 'scale':
    case 'resize':
      return img.resize({ width: box.width, height: box.height, fit: 'fill' });
  }
}

function withEffects(img: Sharp, layer: ImageLayer): Sharp {
  let brightness = 1;
  let saturation = 1;
  let out = img;
  for (const e of layer.effects) {
    switch (e.name) {
      case 'improve':
        // A stretch of the levels, then a nudge: more colour outdoors, more light indoors.
        out = out.normalise({ lower: 1, upper: 99 });
        if (e.value === 'indoor') brightness *= 1.08;
        else saturation *= e.value === 'outdoor' ? 1.2 : 1.1;
        break;
      case 'brightness':
        brightness *= 1 + (e.value as number) / 100;
        break;
      case 'saturation':
        saturation *= 1 + (e.value as number) / 100;
        break;
      case 'contrast': {
        const a = 1 + (e.value as number) / 100;
        out = out.linear([a, a, a, 1], [128 * (1 - a), 128 * (1 - a), 128 * (1 - a), 0]);
        break;
      }
      case 'grayscale': {
        // Rec. 709 luma on each colour channel: sharp's own greyscale drops the alpha channel here.
        const luma: [number, number, number] = [0.2126, 0.7152, 0.0722];
        out = out.recomb([luma, luma, luma]);
        break;
      }
      case 'sharpen':
        out = out.sharpen({ sigma: Math.min(10, Math.max(0.3, (e.value as number) / 100)) });
        break;
    }
  }
  if (brightness !== 1 || saturation !== 1)
    out = out.modulate({ brightness: Math.max(0, brightness), saturation: Math.max(0, saturation) });
  return out;
}

function tooLarge(layer: ImageLayer, width: number, height: number, maxPixels: number): AppError {
  return appError(
    'IMAGE_TOO_LARGE',
    `transform: the layer "${layer.tokens[0].slice(0, 60)}" would be ${width}x${height} px, more than the limit of ${maxPixels} pixels`,
  );
}

/** sharp's errors about the layer's file, as the 400 they are; a timeout goes on as it is. */
function decodeError(layer: ImageLayer, err: unknown): unknown {
  if (err instanceof AppError || !(err instanceof Error)) return err;
  if (/timeout/i.test(err.message)) return err;
  if (/pixel limit/.test(err.message)) {
    return appError(
      'IMAGE_TOO_LARGE',
      `transform: the layer image "${layer.path.slice(0, 100)}" is larger than the pixel limit`,
    );
  }
  return appError('TRANSFORM_FAILED', `transform: the layer image "${layer.path.slice(0, 100)}" could not be decoded`);
}

/** The image layer's pixels (before opacity and placement). */
export async function renderImage(
  layer: ImageLayer,
  load: (path: string) => Promise<string | Buffer>,
  opts: Options,
): Promise<RawLayer> {
  const input = await load(layer.path);
  const open = () => sharp(input, { limitInputPixels: opts.maxPixels, failOn: 'error' }).autoOrient();
  let raw: RawLayer;
  try {
    const meta = await open().metadata();
    const natural = meta.autoOrient ?? { width: meta.width, height: meta.height };
    const box = layerBox(layer, natural);
    if (box.width * box.height > opts.maxPixels) throw tooLarge(layer, box.width, box.height, opts.maxPixels);
    raw = await toRaw(timed(sized(open(), box, natural), opts));
  } catch (err) {
    throw decodeError(layer, err);
  }

  if (layer.zoom > 1) {
    // Into the centre: a 1/zoom region enlarged back to the layer's box.
    const width = Math.max(1, Math.round(raw.width / layer.zoom));
    const height = Math.max(1, Math.round(raw.height / layer.zoom));
    const left = Math.floor((raw.width - width) / 2);
    const top = Math.floor((raw.height - height) / 2);
    raw = await toRaw(
      timed(
        fromRaw(raw)
          .extract({ left, top, width, height })
          .resize({ width: raw.width, height: raw.height, fit: 'fill' }),
        opts,
      ),
    );
  } else if (layer.zoom < 1) {
    // Out: the image shrinks inside the same box, which it no longer fills.
    const width = Math.max(1, Math.round(raw.width * layer.zoom));
    const height = Math.max(1, Math.round(raw.height * layer.zoom));
    const left = Math.floor((raw.width - width) / 2);
    const top = Math.floor((raw.height - height) / 2);
    raw = await toRaw(
      timed(
        fromRaw(raw)
          .resize({ width, height, fit: 'fill' })
          .extend({
            left,
            top,
            right: raw.width - width - left,
            bottom: raw.height - height - top,
            background: { r: 0, g: 0, b: 0, alpha: 0 },
          }),
        opts,
      ),
    );
  }

  if (layer.effects.length > 0 || layer.flip) {
    let img = withEffects(fromRaw(raw), layer);
    if (layer.flip === 'v' || layer.flip === 'hv') img = img.flip();
    if (layer.flip === 'h' || layer.flip === 'hv') img = img.flop();
    raw = await toRaw(timed(img, opts));
  }
  if (layer.radius > 0) roundCorners(raw, layer.radius);
  if (layer.angle) {
    const turned = rotatedSize(raw.width, raw.height, layer.angle);
    if (turned.width * turned.height > opts.maxPixels)
      throw tooLarge(layer, turned.width, turned.height, opts.maxPixels);
    raw = await rotateRaw(raw, layer.angle);
  }
  return raw;
}
