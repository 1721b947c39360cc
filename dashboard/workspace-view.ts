// The Workspace page: usage against the quota, the API keys (by hint; a new key is shown once,
// to copy), and webhook deliveries with their outcome and a Redeliver button.
import type { Stowage } from '../sdk/src/index.ts';
import type { ApiKeyInfo, WebhookDelivery } from '../sdk/src/types.ts';
import { $, guarded, human, labelledCell, status } from './ui.ts';

let deliveriesCursor: string | null = null;

export async function refreshWorkspace(api: Stowage): Promise<void> {
  await guarded('Loading the workspace', async () => {
    const ws = await api.getWorkspace();
    const used = ws.used_bytes + ws.reserved_bytes;
    const bar = $<HTMLProgressElement>('usage-bar');
    if (ws.quota_bytes) {
      bar.hidden = false;
      bar.max = ws.quota_bytes;
      bar.value = Math.min(used, ws.quota_bytes);
      $('usage-text').textContent =
        `${human(ws.used_bytes)} used${ws.reserved_bytes ? ` (+ ${human(ws.reserved_bytes)} in uploads now)` : ''} ` +
        `of ${human(ws.quota_bytes)} (${Math.round((100 * used) / ws.quota_bytes)}%).`;
    } else {
      bar.hidden = true;
      $('usage-text').textContent =
        `${human(ws.used_bytes)} used${ws.reserved_bytes ? ` (+ ${human(ws.reserved_bytes)} in uploads now)` : ''}; no quota set.`;
    }
    await refreshKeys(api);
    await refreshDeliveries(api, true);
  });
}

async function refreshKeys(api: Stowage): Promise<void> {
  const keys = await api.listKeys();
  $('keys').replaceChildren(...keys.map((k) => keyRow(api, k)));
}

function button(label: string, aria: string, onClick: () => void, danger = false): HTMLButtonElement {
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = label;
  b.setAttribute('aria-label', aria);
  if (danger) b.className = 'danger';
  b.addEventListener('click', onClick);
  return b;
}

function keyRow(api: Stowage, k: ApiKeyInfo): HTMLTableRowElement {
  const tr = document.createElement('tr');
  const state = k.active
    ? k.revoked_at
      ? `active until ${new Date(k.revoked_at).toLocaleString()}`
      : 'active'
    : `revoked ${k.revoked_at ? new Date(k.revoked_at).toLocaleString() : ''}`;
  const actions = labelledCell('Actions');
  if (k.active) {
    actions.append(
      button('Rotate', `Rotate key ${k.hint}`, () =>
        guarded('Rotating', async () => {
          if (!confirm(`Make a new ${k.type} key to replace ${k.hint}? The old one keeps working for one hour.`))
            return;
          const r = await api.rotateKey(k.id, { graceSeconds: 3600 });
          showNewKey(r.new.key);
          await refreshKeys(api);
        }),
      ),
      ' ',
      button(
        'Revoke',
        `Revoke key ${k.hint}`,
        () =>
          guarded('Revoking', async () => {
            if (!confirm(`Revoke ${k.hint}? Everything using it stops working at once.`)) return;
            await api.revokeKey(k.id);
            status(`Revoked ${k.hint}`);
            await refreshKeys(api);
          }),
        true,
      ),
    );
  }
  tr.append(
    labelledCell('Key', k.hint),
    labelledCell('Type', k.type),
    labelledCell('Created', new Date(k.created_at).toLocaleString()),
    labelledCell('Status', state),
    actions,
  );
  return tr;
}

function showNewKey(key: string): void {
  $('new-key-value').textContent = key;
  $('new-key').hidden = false;
  $('new-key-copy').focus();
}

async function refreshDeliveries(api: Stowage, fromStart: boolean): Promise<void> {
  if (fromStart) deliveriesCursor = null;
  const filter = $<HTMLSelectElement>('hook-status').value as WebhookDelivery['status'] | '';
  const page = await api.listWebhookDeliveries({
    limit: 20,
    ...(filter ? { status: filter } : {}),
    ...(deliveriesCursor ? { cursor: deliveriesCursor } : {}),
  });
  const rows = page.deliveries.map((d) => deliveryRow(api, d));
  if (fromStart) $('deliveries').replaceChildren(...rows);
  else $('deliveries').append(...rows);
  deliveriesCursor = page.next_cursor;
  $('deliveries-more').hidden = !page.next_cursor;
  $('deliveries-empty').hidden = $('deliveries').childElementCount > 0;
}

function deliveryRow(api: Stowage, d: WebhookDelivery): HTMLTableRowElement {
  const tr = document.createElement('tr');
  const outcome =
    d.status === 'delivered'
      ? `delivered${d.last_status ? ` (HTTP ${d.last_status})` : ''}`
      : d.last_error
        ? `${d.status}: ${d.last_error}`
        : d.status;
  const actions = labelledCell('Actions');
  actions.append(
    button('Redeliver', `Redeliver ${d.id}`, () =>
      guarded('Redelivering', async () => {
        await api.redeliverWebhook(d.id);
        status(`Queued ${d.id} again`);
        await refreshDeliveries(api, true);
      }),
    ),
  );
  tr.append(
    labelledCell('Event', `${d.event}${d.file_no ? ` · ${d.file_no}` : ''}`),
    labelledCell('Address', d.url),
    labelledCell('Outcome', outcome),
    labelledCell('Attempts', String(d.attempts)),
    labelledCell('Created', new Date(d.created_at).toLocaleString()),
    actions,
  );
  return tr;
}

/** Wires the page's own controls once; `client` gives the signed-in API when one is used. */
export function wireWorkspace(client: () => Stowage | undefined): void {
  const withApi = (fn: (api: Stowage) => Promise<void>) => () => {
    const api = client();
    if (api) void fn(api);
  };
  for (const type of ['public', 'private'] as const)
    $(`key-new-${type}`).addEventListener(
      'click',
      withApi((api) =>
        guarded('Creating the key', async () => {
          const made = await api.createKey(type);
          showNewKey(made.key);
          await refreshKeys(api);
        }),
      ),
    );
  $('new-key-copy').addEventListener('click', () =>
    guarded('Copying', async () => {
      await navigator.clipboard.writeText($('new-key-value').textContent ?? '');
      status('Key copied');
    }),
  );
  $('new-key-done').addEventListener('click', () => {
    $('new-key-value').textContent = '';
    $('new-key').hidden = true;
  });
  $('hook-status').addEventListener(
    'change',
    withApi((api) => guarded('Loading deliveries', () => refreshDeliveries(api, true))),
  );
  $('deliveries-more').addEventListener(
    'click',
    withApi((api) => guarded('Loading deliveries', () => refreshDeliveries(api, false))),
  );
}
