// Which leading segments of a delivery path are transformation tokens: the one answer delivery
// (services/delivery.ts), the signed-transformations gate (http/transform-signature.ts), the fast
// path (http/routes/delivery.ts) and record URLs (services/file-records.ts) all use.
//
// Read on the path as requested, still percent-encoded: a segment is tokens when every piece between
// its literal commas starts with a token name and an underscore ("w_100"), or is the bare number
// after `ps_{x}` (`ps_120,80`). Only a layer's opening token may hold percent-escapes (its text
// or path: "l_text:Arial_20:Hi%2C%20there"); any other escaped piece makes the segment a name
// ("w_200%2Ch_100" is the folder "w_200,h_100"). Record URLs escape the underscore of a first
// folder whose name would read as tokens ("w%5F100").
//
// Several segments may be tokens (`l_text:…,fl_layer_apply/w_400/photo.jpg`); when a name could
// be read either way, delivery tries the longest reading first (services/delivery.ts).

const PIECE = /^[a-z]+_[^/%]*$/;
const LAYER_PIECE = /^l_[^/]*$/;
const NUMBER = /^\d{1,6}(\.\d{1,4})?$/;
/** Token segments in one path at most: more is not a transformation anybody writes. */
export const MAX_TOKEN_SEGMENTS = 4;

/** Whether one raw (still percent-encoded) path segment reads as transformation tokens. */
export function isTokenSegment(raw: string): boolean {
  if (raw === '' || raw.includes('/')) return false;
  const pieces = raw.split(',');
  return pieces.every(
    (p, i) => PIECE.test(p) || LAYER_PIECE.test(p) || (i > 0 && NUMBER.test(p) && pieces[i - 1].startsWith('ps_')),
  );
}

/**
 * How many leading segments of `raw` (a path's segments, still percent-encoded) are tokens. At
 * least one segment is always left for the file, and a path whose token segments would exceed
 * MAX_TOKEN_SEGMENTS has none.
 */
export function tokenSegmentCount(raw: readonly string[]): number {
  let n = 0;
  while (n < raw.length - 1 && isTokenSegment(raw[n])) n++;
  return n > MAX_TOKEN_SEGMENTS ? 0 : n;
}
