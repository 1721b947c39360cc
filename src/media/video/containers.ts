// Which demuxer may read an upload, from the type its bytes were detected as. ffmpeg is told to
// use that one demuxer and no other (`-f` and `-format_whitelist`): its format probing would
// otherwise happily take an upload for an HLS playlist, an ffconcat list or an image sequence
// pattern, all of which open other files or URLs named inside the bytes.
const BY_MIME: Record<string, string> = {
  'video/mp4': 'mov',
  'video/quicktime': 'mov',
  'video/x-m4v': 'mov',
  'video/3gpp': 'mov',
  'video/3gpp2': 'mov',
  'audio/mp4': 'mov',
  'audio/x-m4a': 'mov',
  'video/webm': 'matroska',
  'audio/webm': 'matroska',
  'video/x-matroska': 'matroska',
  'video/matroska': 'matroska',
  'audio/x-matroska': 'matroska',
  'audio/matroska': 'matroska',
  'audio/mpeg': 'mp3',
  'audio/ogg': 'ogg',
  'audio/opus': 'ogg',
  'video/ogg': 'ogg',
  'audio/wav': 'wav',
  'audio/x-wav': 'wav',
  'audio/wave': 'wav',
  'audio/vnd.wave': 'wav',
  'audio/flac': 'flac',
  'audio/x-flac': 'flac',
  'audio/aac': 'aac',
  'audio/x-aiff': 'aiff',
  'audio/aiff': 'aiff',
  'video/x-msvideo': 'avi',
  'video/vnd.avi': 'avi',
  'video/mp2t': 'mpegts',
  'video/x-flv': 'flv',
  'video/x-ms-asf': 'asf',
  'video/x-ms-wmv': 'asf',
  'audio/x-ms-wma': 'asf',
  'video/mpeg': 'mpeg',
};

/** The one demuxer allowed for this type, or null: the type is not media ffmpeg is let near. */
export function demuxerFor(mimeType: string): string | null {
  return BY_MIME[mimeType.toLowerCase()] ?? null;
}

/** Video or audio: what the upload pipeline probes. */
export const isTimedMedia = (mimeType: string): boolean =>
  mimeType.startsWith('video/') || mimeType.startsWith('audio/');
