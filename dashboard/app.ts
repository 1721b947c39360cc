// The Stowage dashboard: plain DOM over the SDK. The private key lives in sessionStorage
// only, so it is gone when the tab closes.
import { Stowage, StowageError } from '../sdk/src/index.ts';
import type { Preset, Source } from '../sdk/src/types.ts';
import { openFromAddress, wireFilePage } from './file-page.ts';
import { loadFiles, refreshFiles, wireFiles } from './files-view.ts';
import { loadFromAddress, saveToAddress, wireFind } from './find.ts';
import { wireFolders } from './folders-tree.ts';
import { lib } from './library.ts';
import { wireSelection } from './selection.ts';
import { $, guarded, labelledCell, problem, status, statusIsError } from './ui.ts';
import { forgetUploads, mountUploader } from './uploads.ts';
import { refreshWorkspace, wireWorkspace } from './workspace-view.ts';

const KEY = 'stowage.key';
let api: Stowage | undefined;

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
  lib.api = client;
  if (statusIsError) status('');
  sessionStorage.setItem(KEY, key);
  $('signin').hidden = true;
  $('nav').hidden = false;
  try {
    mountUploader();
  } catch (err) {
    status(`The uploader did not start: ${problem(err)}`, true);
  }
  // The address names the view, folder and filters to open with (a shared or reloaded link).
  const wanted = loadFromAddress();
  lib.folderNo = wanted.folderNo;
  show(VIEWS.includes(wanted.view as View) ? (wanted.view as View) : 'files');
  // A file's page named by the address opens over the Files view.
  if (!wanted.view || wanted.view === 'files') void openFromAddress(wanted.fileNo);
  return true;
}

function signOut(): void {
  forgetUploads();
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
wireFiles();
wireFolders();
wireSelection();
wireFilePage();
wireFind(() => {
  if (api) void guarded('Loading files', () => loadFiles(true));
});

const saved = sessionStorage.getItem(KEY);
if (saved) void signIn(saved);
