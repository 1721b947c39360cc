// How a multipart upload's file is cut into parts: every part but the last is `part_size`
// bytes, the last holds the rest, and no file needs more than 10,000 parts.
const MiB = 1024 * 1024;
export const MIN_PART_SIZE = 5 * MiB;
const BASE_PART_SIZE = 8 * MiB;
const MAX_PARTS = 10_000;

/** The part layout of a session (its row, or the same fields). */
export interface PartLayout {
  size: number;
  part_size: number;
  part_count: number;
}

/** Part size: 8 MiB, or more (whole MiB) so that no file needs over 10,000 parts. */
export function partSizeFor(size: number): number {
  return Math.max(BASE_PART_SIZE, Math.ceil(size / MAX_PARTS / MiB) * MiB);
}

export function partLength(s: PartLayout, partNumber: number): number {
  return partNumber < s.part_count ? Number(s.part_size) : Number(s.size) - (s.part_count - 1) * Number(s.part_size);
}
