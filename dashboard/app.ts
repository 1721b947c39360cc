// The Stowage dashboard: plain DOM over the SDK. The private key lives in sessionStorage
// only, so it is gone when the tab closes.
import { Stowage, StowageError } from '../sdk/src/index.ts';
import { filtering, findQuery, loadFromAddress, saveToAddress, wireFind } from './find.ts';
import { $, guarded, human, labelledCell, problem, status, statusIsError } from './ui.ts';
import { refreshWorkspace, wireWorkspace } from './workspace-view.ts';
import type { FileRecord, Folder, Preset, Source } from '../sdk/src/types.ts';

const KEY = 'stowage.key';
let api: Stowage | undefined;
let folderNo: string | null = null;
let folders: Folder[] = [];
let current: FileRecord | undefined;

// --- sign in ---------------------------------------------------------------------------------

async function signIn(key: string): Promise<boolean> {
  const client = new Stowage({ baseUrl: location.origin, apiKey: key, retries: 1 });
  try {
    await client.listSources({ limit: 1 });
  } catch (err) {
    status(
      err instanceof StowageError && err.status === 403
        ? 'That is a public key: the dashboard needs a private key.'
        : `Sign in failed: ${problem(err)}`,
      true,
    );
    return false;
  }
  api = client;
  if (statusIsError) status('');
  sessionStorage.setItem(KEY, key);
  $('signin').hidden = true;
  $('nav').hidden = false;
  // The address names the view, folder and filters to open with (a shared or reloaded link).
  const wanted = loadFromAddress();
  folderNo = wanted.folderNo;
  show(VIEWS.includes(wanted.view as View) ? (wanted.view as View) : 'files');
  return true;
}

function signOut(): void {
  sessionStorage.removeItem(KEY);
  api = undefined;
  location.reload();
}

type View = 'files' | 'sources' | 'presets' | 'workspace';
const VIEWS: View[] = ['files', 'sources', 'presets', 'workspace'];

function show(view: View): void {
  for (const v of VIEWS) $(`${v}-view`).hidden = v !== view;
  if (view !== 'files') saveToAddress(view, null);
  for (const b of document.querySelectorAll<HTMLButtonElement>('nav [data-view]')) {
    if (b.dataset.view === view) b.setAttribute('aria-current', 'page');
    else b.removeAttribute('aria-current');
  }
  const refresh = {
    files: refreshFiles,
    sources: refreshSources,
    presets: refreshPresets,
    workspace: () => refreshWorkspace(api!),
  };
  void refresh[view]();
}

// --- folders and files ------------------------------------------------------------------------

async function refreshFolders(): Promise<void> {
  const all: Folder[] = [];
  const walk = async (parent?: string) => {
    const res = await api!.listFolders({ parent_folder_no: parent, limit: 100 });
    for (const f of res.folders) {
      all.push(f);
      await walk(f.folder_no);
    }
  };
  await walk();
  folders = all.sort((a, b) => a.path.localeCompare(b.path));
  const list = $('folders');
  list.replaceChildren();
  const entry = (label: string, no: string | null, depth: number) => {
    const li = document.createElement('li');
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = label;
    b.style.paddingLeft = `${0.5 + depth}rem`;
    if (no === folderNo) b.setAttribute('aria-current', 'true');
    b.addEventListener('click', () => {
      folderNo = no;
      void refreshFiles();
    });
    li.append(b);
    list.append(li);
  };
  entry('All files (root)', null, 0);
  for (const f of folders) entry(f.name, f.folder_no, f.path.split('/').length);
  const move = $<HTMLSelectElement>('move');
  move.replaceChildren(new Option('(root)', ''), ...folders.map((f) => new Option(f.path, f.folder_no)));
}

/** Where the next page of the Files view starts; null when the last page is shown. */
let nextCursor: string | null = null;
/** Answers to list requests can arrive out of order: only the latest request's is shown. */
let listSeq = 0;

async function refreshFiles(): Promise<void> {
  await guarded('Loading files', async () => {
    await refreshFolders();
    const folder = folders.find((f) => f.folder_no === folderNo);
    $('crumb').textContent = folder ? `in ${folder.path}` : '';
    await loadFiles(true);
  });
}

/** The first page of the list the controls describe, or (`fromStart` false) the next one, appended. */
async function loadFiles(fromStart: boolean): Promise<void> {
  const seq = ++listSeq;
  if (fromStart) saveToAddress('files', folderNo);
  const res = await api!.listFiles({
    ...findQuery(),
    folder_no: folderNo ?? undefined,
    limit: 100,
    ...(fromStart || !nextCursor ? {} : { cursor: nextCursor }),
  });
  if (seq !== listSeq) return;
  const grid = $('grid');
  if (fromStart) grid.replaceChildren();
  for (const f of res.files) grid.append(card(f));
  nextCursor = res.meta.nextCursor;
  $('more').hidden = !nextCursor;
  const shown = grid.childElementCount;
  const total = `${res.meta.totalEstimated ? 'about ' : ''}${res.meta.total.toLocaleString()}`;
  $('count').textContent = shown ? `Showing ${shown.toLocaleString()} of ${total} files` : '';
  $('empty').hidden = shown > 0;
  $('empty').textContent = filtering() ? 'No files match these filters.' : 'No files here yet.';
}

function card(f: FileRecord): HTMLLIElement {
  const li = document.createElement('li');
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'card';
  b.dataset.fileNo = f.file_no;
  if (f.thumbnail) {
    const img = document.createElement('img');
    img.src = f.thumbnail;
    img.alt = f.name;
    img.loading = 'lazy';
    b.append(img);
  } else {
    const icon = document.createElement('div');
    icon.className = 'icon';
    icon.textContent = (f.extension ?? 'file').toUpperCase();
    icon.setAttribute('aria-hidden', 'true');
    b.append(icon);
  }
  const name = document.createElement('span');
  name.textContent = f.name;
  const size = document.createElement('small');
  size.textContent = human(f.size);
  b.append(name, size);
  b.addEventListener('click', () => openDetails(f));
  li.append(b);
  return li;
}

// --- uploads ----------------------------------------------------------------------------------

async function uploadAll(files: FileList | File[]): Promise<void> {
  const list = $('uploads');
  await Promise.all(
    [...files].map(async (file) => {
      const li = document.createElement('li');
      const label = document.createElement('span');
      label.textContent = file.name;
      const bar = document.createElement('progress');
      bar.max = file.size || 1;
      bar.value = 0;
      bar.setAttribute('aria-label', `Uploading ${file.name}`);
      const pct = document.createElement('small');
      pct.textContent = '0%';
      li.append(label, bar, pct);
      list.append(li);
      const folder = folders.find((f) => f.folder_no === folderNo);
      try {
        await api!.uploadFile(file, file.name, {
          folder: folder?.path,
          parallel: 4,
          onProgress: ({ loaded, total }) => {
            bar.value = loaded;
            pct.textContent = `${Math.round((100 * loaded) / Math.max(1, total))}%`;
          },
        });
        li.remove();
        status(`Uploaded ${file.name}`);
      } catch (err) {
        pct.textContent = 'failed';
        status(`Upload of ${file.name} failed: ${problem(err)}`, true);
      }
    }),
  );
  await refreshFiles();
}

// --- details ----------------------------------------------------------------------------------

function openDetails(f: FileRecord): void {
  current = f;
  $('details-title').textContent = f.name;
  const preview = $('preview');
  preview.replaceChildren();
  if (f.mime_type.startsWith('image/')) {
    const img = document.createElement('img');
    img.src = f.thumbnail ? f.thumbnail.replace('/w_200,h_200,c_fit/', '/w_800,c_fit/') : f.url;
    // A signed thumbnail (a private file, or a workspace with signed transformations) opens only
    // its own path: the larger preview is signed by the service instead.
    if (f.thumbnail?.includes('?'))
      void signedRendition(f, 'w_800,c_fit').then((url) => {
        img.src = url ?? f.thumbnail!;
      });
    img.alt = `Preview of ${f.name}`;
    preview.append(img);
  } else {
    const a = document.createElement('a');
    a.href = f.url;
    a.textContent = 'Open the file';
    a.target = '_blank';
    a.rel = 'noopener';
    preview.append(a);
  }
  const facts = $('facts');
  facts.replaceChildren();
  for (const [k, v] of [
    ['Size', human(f.size)],
    ['Type', f.mime_type],
    ['Dimensions', f.width ? `${f.width} × ${f.height}` : '—'],
    ['Path', f.path],
    ['URL', f.url],
    ['SHA-256', f.hash],
  ]) {
    const dt = document.createElement('dt');
    dt.textContent = k;
    const dd = document.createElement('dd');
    dd.textContent = v;
    facts.append(dt, dd);
  }
  $<HTMLInputElement>('rename').value = f.name;
  $<HTMLSelectElement>('move').value = f.folder_no ?? '';
  $<HTMLInputElement>('tags').value = f.tags.join(', ');
  $<HTMLTextAreaElement>('metadata').value = JSON.stringify(f.metadata, null, 2);
  $<HTMLInputElement>('private').checked = f.is_private;
  $('builder').hidden = !f.mime_type.startsWith('image/');
  updateBuilder();
  $<HTMLDialogElement>('details').showModal();
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
    return (await api!.signedUrl(f.file_no, { transform: tokens, expires_in: 3600 })).url;
  } catch {
    return undefined;
  }
}

/** Answers to builder changes can arrive out of order: only the latest is shown. */
let builderSeq = 0;

function updateBuilder(): void {
  const url = builderUrl();
  if (!url || !current) return;
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

async function saveCurrent(patch: Parameters<Stowage['updateFile']>[1], done: string): Promise<void> {
  if (!current) return;
  await guarded(done, async () => {
    current = await api!.updateFile(current!.file_no, patch);
    status(done);
    openDetailsRefresh();
  });
}

function openDetailsRefresh(): void {
  if (current) {
    $<HTMLDialogElement>('details').close();
    openDetails(current);
  }
  void refreshFiles();
}

// --- sources ----------------------------------------------------------------------------------

async function refreshSources(): Promise<void> {
  await guarded('Loading sources', async () => {
    const res = await api!.listSources({ limit: 100 });
    const body = $('sources');
    body.replaceChildren(...res.sources.map(sourceRow));
  });
}

function sourceRow(s: Source): HTMLTableRowElement {
  const tr = document.createElement('tr');
  const actions = labelledCell('Actions');
  const test = document.createElement('button');
  test.type = 'button';
  test.textContent = 'Test';
  test.setAttribute('aria-label', `Test source ${s.name}`);
  test.addEventListener('click', () =>
    guarded('Testing', async () => {
      const r = await api!.testSource(s.id);
      status(r.ok ? `${s.name}: reachable (${r.latency_ms} ms)` : `${s.name}: ${r.error}`, !r.ok);
    }),
  );
  const del = document.createElement('button');
  del.type = 'button';
  del.className = 'danger';
  del.textContent = 'Delete';
  del.setAttribute('aria-label', `Delete source ${s.name}`);
  del.addEventListener('click', () =>
    guarded('Deleting', async () => {
      if (!confirm(`Delete the source ${s.name}?`)) return;
      await api!.deleteSource(s.id);
      await refreshSources();
    }),
  );
  actions.append(test, ' ', del);
  tr.append(
    labelledCell('Name', s.name),
    labelledCell('Type', s.type),
    labelledCell('Configuration', JSON.stringify(s.configuration)),
    labelledCell('Active', s.is_active ? 'yes' : 'no'),
    actions,
  );
  return tr;
}

// --- presets ----------------------------------------------------------------------------------

async function refreshPresets(): Promise<void> {
  await guarded('Loading presets', async () => {
    const res = await api!.listPresets();
    $('presets').replaceChildren(...res.presets.map(presetRow));
    $('presets-empty').hidden = res.presets.length > 0;
    $('preset-count').textContent = `${res.presets.length} of ${res.max_presets} presets used.`;
  });
}

function presetRow(p: Preset): HTMLTableRowElement {
  const tr = document.createElement('tr');
  const button = (label: string, aria: string, onClick: () => void) => {
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = label;
    b.setAttribute('aria-label', aria);
    b.addEventListener('click', onClick);
    return b;
  };
  const edit = button('Edit', `Edit preset ${p.name}`, () => {
    $<HTMLInputElement>('p-name').value = p.name;
    $<HTMLInputElement>('p-text').value = p.transformation;
    $('p-text').focus();
  });
  const del = button('Delete', `Delete preset ${p.name}`, () =>
    guarded('Deleting', async () => {
      if (!confirm(`Delete the preset ${p.name}? URLs that name t_${p.name} will answer 400.`)) return;
      await api!.deletePreset(p.name);
      status(`Deleted preset ${p.name}`);
      await refreshPresets();
    }),
  );
  del.className = 'danger';
  const actions = labelledCell('Actions');
  actions.append(edit, ' ', del);
  tr.append(
    labelledCell('Token', `t_${p.name}`),
    labelledCell('Transformation', p.transformation),
    labelledCell('Updated', new Date(p.updated_at).toLocaleString()),
    actions,
  );
  return tr;
}

// --- wiring -----------------------------------------------------------------------------------

$('signin-form').addEventListener('submit', (e) => {
  e.preventDefault();
  void signIn($<HTMLInputElement>('key').value.trim());
});
$('signout').addEventListener('click', signOut);
for (const b of document.querySelectorAll<HTMLButtonElement>('nav [data-view]'))
  b.addEventListener('click', () => show(b.dataset.view as View));

$<HTMLInputElement>('file-input').addEventListener('change', (e) => {
  const input = e.target as HTMLInputElement;
  if (input.files?.length) void uploadAll([...input.files]).then(() => (input.value = ''));
});
const drop = $('drop');
drop.addEventListener('dragover', (e) => {
  e.preventDefault();
  drop.classList.add('over');
});
drop.addEventListener('dragleave', () => drop.classList.remove('over'));
drop.addEventListener('drop', (e) => {
  e.preventDefault();
  drop.classList.remove('over');
  if (e.dataTransfer?.files.length) void uploadAll(e.dataTransfer.files);
});

$('folder-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const input = $<HTMLInputElement>('folder-name');
  void guarded('Creating the folder', async () => {
    await api!.createFolder(input.value.trim(), folderNo ?? undefined);
    input.value = '';
    await refreshFiles();
  });
});

$('rename-form').addEventListener('submit', (e) => {
  e.preventDefault();
  if (!current) return;
  void guarded('Renaming', async () => {
    current = await api!.renameFile(current!.file_no, $<HTMLInputElement>('rename').value.trim());
    status(`Renamed to ${current.name}`);
    openDetailsRefresh();
  });
});
$('move-form').addEventListener('submit', (e) => {
  e.preventDefault();
  void saveCurrent({ folder_no: $<HTMLSelectElement>('move').value || null }, 'Moved');
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
  const removed = Object.keys(current.metadata).filter((k) => !(k in metadata));
  for (const k of removed) metadata[k] = null;
  void saveCurrent(
    {
      add_tags: tags,
      remove_tags: current.tags.filter((t) => !tags.includes(t)),
      metadata,
      is_private: $<HTMLInputElement>('private').checked,
    },
    'Saved',
  );
});
for (const id of ['t-width', 't-height', 't-crop', 't-format', 't-quality', 't-gray'])
  $(id).addEventListener('input', updateBuilder);
$('copy').addEventListener('click', () =>
  guarded('Copying', async () => {
    // What the preview shows: signed by the service where the URL needs a signature.
    const url = $('t-url').textContent || builderUrl();
    if (!url) return;
    await navigator.clipboard.writeText(url);
    status('URL copied');
  }),
);
$('delete').addEventListener('click', () => {
  if (!current || !confirm(`Delete ${current.name}?`)) return;
  void guarded('Deleting', async () => {
    await api!.deleteFile(current!.file_no);
    status(`Deleted ${current!.name}`);
    $<HTMLDialogElement>('details').close();
    current = undefined;
    await refreshFiles();
  });
});

$('source-form').addEventListener('submit', (e) => {
  e.preventDefault();
  let configuration: Record<string, unknown>;
  try {
    configuration = JSON.parse($<HTMLTextAreaElement>('s-config').value);
  } catch {
    status('The configuration must be a JSON object', true);
    return;
  }
  void guarded('Adding the source', async () => {
    await api!.createSource({
      name: $<HTMLInputElement>('s-name').value.trim(),
      type: $<HTMLSelectElement>('s-type').value as Source['type'],
      configuration,
    });
    status('Source added');
    await refreshSources();
  });
});

$('preset-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const name = $<HTMLInputElement>('p-name').value.trim();
  void guarded('Saving the preset', async () => {
    const p = await api!.setPreset(name, $<HTMLInputElement>('p-text').value);
    status(`Saved t_${p.name} = ${p.transformation}`);
    $<HTMLInputElement>('p-name').value = '';
    $<HTMLInputElement>('p-text').value = '';
    await refreshPresets();
  });
});

wireWorkspace(() => api);
wireFind(() => {
  if (api) void guarded('Loading files', () => loadFiles(true));
});
$('more').addEventListener('click', () => {
  if (api) void guarded('Loading files', () => loadFiles(false));
});

const saved = sessionStorage.getItem(KEY);
if (saved) void signIn(saved);
