// Face detection for `fo_face`/`p_face`: the interface the transformation pipeline calls. Until a
// detector is wired in, no face is ever found, and the pipeline falls back to libvips `attention`.

/** A face in the source image's pixels, EXIF orientation applied. */
export interface FaceBox {
  left: number;
  top: number;
  width: number;
  height: number;
  score: number;
}

/** The faces in an image (a file path or encoded bytes); [] when none is found within `timeoutMs`. */
export async function findFaces(
  input: string | Buffer,
  opts: { timeoutMs: number; maxPixels: number },
): Promise<FaceBox[]> {
  void input;
  void opts;
  return [];
}

/** The point a crop should centre on to keep `faces` of a `width` x `height` image; undefined without faces. */
export function faceFocus(
  faces: readonly FaceBox[],
  width: number,
  height: number,
): { x: number; y: number } | undefined {
  if (faces.length === 0) return undefined;
  let x0 = width;
  let y0 = height;
  let x1 = 0;
  let y1 = 0;
  for (const f of faces) {
    x0 = Math.min(x0, f.left);
    y0 = Math.min(y0, f.top);
    x1 = Math.max(x1, f.left + f.width);
    y1 = Math.max(y1, f.top + f.height);
  }
  return { x: (x0 + x1) / 2, y: (y0 + y1) / 2 };
}
