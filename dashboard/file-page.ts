// A file's page: a full-window dialog whose address (?file=<file_no>) can be shared. Preview by
// kind (image, video with its poster, audio, a link for anything else: Stowage renders no PDF
// page), every field of the record, editing of name, folder, tags, metadata, custom id and
// privacy, copyable delivery URLs, the transformation builder for images, a poster builder and a
// rendition builder (made in the background, waited for, then played) for videos.
import type { Stowage } from '../sdk/src/index.ts';
import type { FileRecord } from '../sdk/src/types.ts';
import { videoTokens, waitForRendition } from '../sdk/src/video.ts';
import { setAddressFile } from './find.ts';
import { api, lib } from './library.ts';
import { $, guarded, human, status } from './ui.ts';

let current: FileRecord | undefined;

const dialog = () => $<HTMLDialogElement>('details');

/** Opens the page of the file named by the address, if any (a shared or reloaded link). */
export async function openFromAddress(fileNo: string | null): Promise<void> {
  if (!fileNo) return;
  await guarded('Opening the file', async () => openFilePage(await api().getFile(fileNo)));
}

export function openFilePage(f: FileRecord): void {
  current = f;
  setAddressFile(f.file_no);
  $('details-title').textContent = f.name;
  preview(f);
  facts(f);
  $<HTMLInputElement>('rename').value = f.name;
  $<HTMLSelectElement>('move').value = f.folder_no ?? '';
  $<HTMLInputElement>('tags').value = f.tags.join(', ');
  $<HTMLTextAreaElement>('metadata').value = JSON.stringify(f.metadata, null, 2);
  $<HTMLInputElement>('custom-id').value = f.custom_id ?? '';
  $<HTMLInputElement>('private').checked = f.is_private;
  $('builder').hidden = !f.mime_type.startsWith('image/');
  // A video's builder makes posters (one frame as an image); its other tokens are background jobs.
  $('poster-builder').hidden = !(f.mime_type.startsWith('video/') && f.thumbnail);
  // Other video tokens are made in the background: the builder asks, waits and then shows it.
  $('video-builder').hidden = !(f.mime_type.startsWith('video/') && f.duration !== null);
  $('vr-state').textContent = '';
  $('vr-result').replaceChildren();
  updateBuilder();
  updatePoster();
  if (!dialog().open) dialog().showModal();
}

function preview(f: FileRecord): void {
  const box = $('preview');
  box.replaceChildren();
  const kind = f.mime_type.split('/')[0];
  if (kind === 'image') {
    const img = document.createElement('img');
    img.src = f.thumbnail ? f.thumbnail.replace('/w_200,h_200,c_fit/', '/w_800,c_fit/') : f.url;
    // A signed thumbnail (a private file, or a workspace with signed transformations) opens only
    // its own path: the larger preview is signed by the service instead.
    if (f.thumbnail?.includes('?'))
      void signedRendition(f, 'w_800,c_fit').then((url) => {
        img.src = url ?? f.thumbnail!;
      });
    img.alt = `Preview of ${f.name}`;
    box.append(img);
  } else if (kind === 'video' || kind === 'audio') {
    const media = document.createElement(kind);
    media.controls = true;
    media.preload = 'metadata';
    media.setAttribute('aria-label', `Play ${f.name}`);
    if (media instanceof HTMLVideoElement && f.thumbnail)
      media.poster = f.thumbnail.replace('w_200,h_200', 'w_800,h_800');
    media.src = f.url;
    if (f.is_private) void originalUrl(f).then((u) => (media.src = u));
    box.append(media);
  }
  const a = document.createElement('a');
  a.href = f.url;
  a.textContent = f.mime_type === 'application/pdf' ? 'Open the PDF' : 'Open the original';
  a.target = '_blank';
  a.rel = 'noopener';
  if (f.is_private) void originalUrl(f).then((u) => (a.href = u));
  const p = document.createElement('p');
  p.append(a);
  box.append(p);
}

/** Every field of the record, as the API gives it. */
function facts(f: FileRecord): void {
  const folder = lib.folders.find((o) => o.folder_no === f.folder_no)?.path;
  const rows: [string, string][] = [
    ['File number', f.file_no],
    ['Id', f.id],
    ['Name', f.name],
    ['Folder', folder ?? (f.folder_no ? (f.folder_name ?? f.folder_no) : '(root)')],
    ['Path', f.path],
    ['Type', f.mime_type],
    ['Extension', f.extension ?? '—'],
    ['Format', f.format ?? '—'],
    ['Size', `${human(f.size)} (${f.size.toLocaleString()} bytes)`],
    ['Dimensions', f.width ? `${f.width} × ${f.height}` : '—'],
    ['Duration', f.duration != null ? `${f.duration.toFixed(2)} s` : '—'],
    ['Media', f.media ? JSON.stringify(f.media) : '—'],
    ['Tags', f.tags.join(', ') || '—'],
    ['Custom id', f.custom_id ?? '—'],
    ['Metadata', JSON.stringify(f.metadata)],
    ['Private', f.is_private ? 'yes (signed URLs only)' : 'no'],
    ['Duplicate', f.is_duplicate ? 'yes' : 'no'],
    ['Uploaded by', f.upload_source],
    ['Created', new Date(f.created_at).toLocaleString()],
    ['Updated', new Date(f.updated_at).toLocaleString()],
    ['SHA-256', f.hash],
    ['URL', f.url],
    ['Thumbnail', f.thumbnail ?? '—'],
  ];
  const dl = $('facts');
  dl.replaceChildren();
  for (const [k, v] of rows) {
    const dt = document.createElement('dt');
    dt.textContent = k;
    const dd = document.createElement('dd');
    dd.textContent = v;
    dl.append(dt, dd);
  }
}

/** The original's address that works: a private file's is signed by the service, for an hour. */
async function originalUrl(f: FileRecord): Promise<string> {
  if (!f.is_private) return f.url;
  return (await api().signedUrl(f.file_no, { expires_in: 3600 })).url;
}

/** The delivery URL of the current file with the builder's tokens. */
function builderUrl(): string | undefined {
  if (!current) return undefined;
  const tokens: string[] = [];
  const val = (id: string) => $<HTMLInputElement>(id).value.trim();
  if (val('t-width')) tokens.push(`w_${val('t-width')}`);
  if (val('t-height')) tokens.push(`h_${val('t-height')}`);
  if (val('t-crop')) tokens.push(`c_${val('t-crop')}`);
  if (val('t-quality')) tokens.push(`q_${val('t-quality')}`);
  if ($<HTMLInputElement>('t-gray').checked) tokens.push('e_grayscale');
  if (val('t-format')) tokens.push(`f_${val('t-format')}`);
  const url = new URL(current.url);
  if (tokens.length === 0) return url.toString();
  const [, workspace, ...rest] = url.pathname.split('/');
  url.pathname = `/${workspace}/${tokens.join(',')}/${rest.join('/')}`;
  return url.toString();
}

/** A service-signed URL of a rendition (valid an hour), or undefined when the API refuses. */
async function signedRendition(f: FileRecord, tokens: string): Promise<string | undefined> {
  try {
    return (await api().signedUrl(f.file_no, { transform: tokens, expires_in: 3600 })).url;
  } catch {
    return undefined;
  }
}

/** Answers to builder changes can arrive out of order: only the latest is shown. */
let builderSeq = 0;

function updateBuilder(): void {
  const url = builderUrl();
  if (!url || !current || $('builder').hidden) return;
  const seq = ++builderSeq;
  const show = (u: string) => {
    if (seq !== builderSeq) return;
    $('t-url').textContent = u;
    $<HTMLImageElement>('t-preview').src = u;
  };
  const file = current;
  const tokens = new URL(url).pathname.split('/')[2];
  // Signed URLs (private files, signed transformations) are not edited by hand: the service signs one.
  if (file.thumbnail?.includes('?') && url !== new URL(file.url).toString())
    void signedRendition(file, tokens).then((signed) => show(signed ?? url));
  else show(url);
}

/** The poster URL of the current video: thumb_ar with the chosen second and width. */
function posterUrl(): string | undefined {
  if (!current || $('poster-builder').hidden) return undefined;
  const at = Number($<HTMLInputElement>('v-at').value);
  const width = $<HTMLInputElement>('v-width').value.trim();
  const tokens = ['thumb_ar', ...(at > 0 ? [`so_${at}`] : []), ...(width ? [`w_${width}`] : [])].join(',');
  const url = new URL(current.url);
  const [, workspace, ...rest] = url.pathname.split('/');
  url.pathname = `/${workspace}/${tokens}/${rest.join('/')}`;
  return url.toString();
}

/** Answers to poster changes can arrive out of order: only the latest is shown. */
let posterSeq = 0;

function updatePoster(): void {
  const url = posterUrl();
  if (!url || !current) return;
  const seq = ++posterSeq;
  const show = (u: string) => {
    if (seq !== posterSeq) return;
    $('v-url').textContent = u;
    $<HTMLImageElement>('v-preview').src = u;
  };
  const file = current;
  if (file.thumbnail?.includes('?'))
    void signedRendition(file, new URL(url).pathname.split('/')[2]!).then((signed) => show(signed ?? url));
  else show(url);
}

/** Stops waiting for the rendition asked last when another is asked or the page closes. */
let renditionWait: AbortController | undefined;

/** Asks for the video rendition the builder describes, waits while it is made, then plays it. */
async function makeVideoRendition(): Promise<void> {
  const file = current;
  if (!file) return;
  const num = (id: string) => {
    const v = $<HTMLInputElement>(id).value.trim();
    return v === '' ? undefined : Number(v);
  };
  const format = $<HTMLSelectElement>('vr-format').value as 'mp4' | 'webm' | 'gif';
  let tokens: string;
  try {
    tokens = videoTokens({
      width: num('vr-width'),
      start: num('vr-start'),
      end: num('vr-end'),
      format,
      mute: $<HTMLInputElement>('vr-mute').checked,
    });
  } catch (err) {
    status((err as Error).message, true);
    return;
  }
  const plain = new URL(file.url);
  const [, workspace, ...rest] = plain.pathname.split('/');
  plain.pathname = `/${workspace}/${tokens}/${rest.join('/')}`;
  // A private file's (or a signed workspace's) renditions need the service's signature.
  const url = file.thumbnail?.includes('?')
    ? ((await signedRendition(file, tokens)) ?? plain.toString())
    : plain.toString();
  renditionWait?.abort();
  const wait = new AbortController();
  renditionWait = wait;
  const state = $('vr-state');
  state.textContent = 'Asked…';
  await waitForRendition(url, {
    signal: wait.signal,
    onStatus: (s) => {
      state.textContent =
        s.status === 'triggered'
          ? 'Queued: it is being made in the background…'
          : `Being made${s.progress === undefined ? '' : ` (${Math.round(s.progress * 100)}%)`}…`;
    },
  });
  if (wait.signal.aborted || current !== file) return;
  state.textContent = 'Ready.';
  const out = document.createElement(format === 'gif' ? 'img' : 'video');
  if (out instanceof HTMLVideoElement) {
    out.controls = true;
    out.setAttribute('aria-label', 'Play the rendition');
  } else out.alt = 'The GIF rendition';
  out.src = url;
  const link = document.createElement('output');
  link.textContent = url;
  $('vr-result').replaceChildren(out, link);
}

async function save(patch: Parameters<Stowage['updateFile']>[1], done: string): Promise<void> {
  if (!current) return;
  await guarded(done, async () => {
    current = await api().updateFile(current!.file_no, patch);
    status(done);
    openFilePage(current);
    await lib.refresh();
  });
}

async function copy(what: string, url: string | undefined): Promise<void> {
  if (!url) return;
  await navigator.clipboard.writeText(url);
  status(`${what} copied`);
}

export function wireFilePage(): void {
  dialog().addEventListener('close', () => {
    renditionWait?.abort();
    current = undefined;
    setAddressFile(null);
  });
  $('rename-form').addEventListener('submit', (e) => {
    e.preventDefault();
    if (!current) return;
    void guarded('Renaming', async () => {
      current = await api().renameFile(current!.file_no, $<HTMLInputElement>('rename').value.trim());
      status(`Renamed to ${current.name}`);
      openFilePage(current);
      await lib.refresh();
    });
  });
  $('move-form').addEventListener('submit', (e) => {
    e.preventDefault();
    void save({ folder_no: $<HTMLSelectElement>('move').value || null }, 'Moved');
  });
  $('meta-form').addEventListener('submit', (e) => {
    e.preventDefault();
    if (!current) return;
    let metadata: Record<string, unknown>;
    try {
      metadata = JSON.parse($<HTMLTextAreaElement>('metadata').value || '{}');
    } catch {
      status('Metadata must be a JSON object', true);
      return;
    }
    const tags = $<HTMLInputElement>('tags')
      .value.split(',')
      .map((t) => t.trim())
      .filter(Boolean);
    for (const k of Object.keys(current.metadata)) if (!(k in metadata)) metadata[k] = null;
    const customId = $<HTMLInputElement>('custom-id').value.trim();
    void save(
      {
        add_tags: tags,
        remove_tags: current.tags.filter((t) => !tags.includes(t)),
        metadata,
        ...(customId !== (current.custom_id ?? '') ? { custom_id: customId || null } : {}),
        is_private: $<HTMLInputElement>('private').checked,
      },
      'Saved',
    );
  });
  for (const id of ['t-width', 't-height', 't-crop', 't-format', 't-quality', 't-gray'])
    $(id).addEventListener('input', updateBuilder);
  for (const id of ['v-at', 'v-width']) $(id).addEventListener('input', updatePoster);
  $('vr-make').addEventListener('click', () =>
    guarded('Making the rendition', async () => {
      try {
        await makeVideoRendition();
      } catch (err) {
        // A wait cut short by a newer ask or a closed page is not a failure.
        if ((err as Error).name !== 'AbortError') throw err;
      }
    }),
  );
  $('v-copy').addEventListener('click', () =>
    guarded('Copying', () => copy('Poster URL', $('v-url').textContent || posterUrl())),
  );
  // What the preview shows: signed by the service where the URL needs a signature.
  $('copy').addEventListener('click', () =>
    guarded('Copying', () => copy('URL', $('t-url').textContent || builderUrl())),
  );
  $('copy-original').addEventListener('click', () =>
    guarded('Copying', async () => {
      if (current) await copy('Original URL', await originalUrl(current));
    }),
  );
  $('delete').addEventListener('click', () => {
    const f = current;
    if (!f || !confirm(`Delete ${f.name}?`)) return;
    void guarded('Deleting', async () => {
      await api().deleteFile(f.file_no);
      status(`Deleted ${f.name}`);
      dialog().close();
      await lib.refresh();
    });
  });
}
