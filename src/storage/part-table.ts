// The record of which parts of a local multipart session are done, kept in the session's data
// file itself, after its last byte: one fixed slot per part at size + (n - 1) * SLOT. A part
// is done once its slot holds a valid record. Being in the same file, one fdatasync makes the
// record durable with the data (a record file per part cost each part an open, a write, an
// fsync of a new file, a close and a rename: 6 to 9 ms of thread-pool queueing per 8 MiB part
// with four in flight). Complete truncates the file to its size, which drops the table.
//
// Slot: "SPR1", part number (u32 LE), size (f64 LE: exact below 2^53), the part's XXH3-64 (the
// ETag, 8 bytes), then the first 4 bytes of the SHA-256 of the 24 bytes before. An unwritten
// (sparse, zero) slot or one whose check fails (a write cut short) is a part not done.
import { createHash } from 'node:crypto';
import type { PartInfo } from './driver.ts';

export const SLOT = 32;
const MAGIC = Buffer.from('SPR1', 'latin1');
const ETAG_RE = /^"([0-9a-f]{16})"$/;

/** An all-zero slot: written over a done part's record before that part is written again. */
export const EMPTY_SLOT: Buffer = Buffer.alloc(SLOT);

export function partCountOf(size: number, partSize: number): number {
  return Math.max(1, Math.ceil(size / partSize));
}

/** Where part `partNumber`'s slot is in a session's data file of `size` bytes. */
export const slotOffset = (size: number, partNumber: number) => size + (partNumber - 1) * SLOT;

const check = (head: Buffer) => createHash('sha256').update(head).digest().subarray(0, 4);

export function encodeSlot(part: PartInfo): Buffer {
  const etag = ETAG_RE.exec(part.etag);
  if (!etag) throw new Error(`part ETag ${part.etag} is not a quoted XXH3-64`);
  const slot = Buffer.alloc(SLOT);
  MAGIC.copy(slot, 0);
  slot.writeUInt32LE(part.partNumber, 4);
  slot.writeDoubleLE(part.size, 8);
  Buffer.from(etag[1], 'hex').copy(slot, 16);
  check(slot.subarray(0, 24)).copy(slot, 24);
  return slot;
}

/** The record in `slot`, or undefined if the slot is empty or does not check out. */
export function decodeSlot(slot: Buffer, partNumber: number): PartInfo | undefined {
  if (slot.length < SLOT || !slot.subarray(0, 4).equals(MAGIC)) return undefined;
  if (!slot.subarray(24, 28).equals(check(slot.subarray(0, 24)))) return undefined;
  if (slot.readUInt32LE(4) !== partNumber) return undefined;
  return {
    partNumber,
    size: slot.readDoubleLE(8),
    etag: `"${slot.subarray(16, 24).toString('hex')}"`,
  };
}

/** Every done part recorded in `table` (the bytes from the first slot on), in order. */
export function decodeTable(table: Buffer, partCount: number): PartInfo[] {
  const parts: PartInfo[] = [];
  for (let n = 1; n <= partCount; n++) {
    const part = decodeSlot(table.subarray((n - 1) * SLOT, n * SLOT), n);
    if (part) parts.push(part);
  }
  return parts;
}
