// `npm run gen:sdk`: writes the SDK's wire types (sdk/src/types.gen.ts) and the error table
// (docs/errors.md) from the contract (src/contract/). TypeBox schemas are JSON Schema, so a small
// JSON-Schema-to-TypeScript emitter does: the SDK gets plain interfaces and imports nothing of
// the server's. test/contract.test.ts fails when either file is stale.
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { TSchema } from 'typebox';
import * as contract from '../src/contract/index.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
export const SDK_TYPES_PATH = join(root, 'sdk/src/types.gen.ts');
export const ERROR_DOCS_PATH = join(root, 'docs/errors.md');

interface JsonSchema {
  $id?: string;
  $ref?: string;
  type?: string;
  const?: unknown;
  enum?: unknown[];
  anyOf?: JsonSchema[];
  items?: JsonSchema;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  patternProperties?: Record<string, JsonSchema>;
  additionalProperties?: boolean | JsonSchema;
  description?: string;
}

/** The types the SDK gets, in this order: name, schema, what it is (when the schema does not say). */
const SCHEMAS: [string, TSchema, string?][] = [
  ['FileRecord', contract.FileRecord],
  ['FileDetails', contract.FileDetails],
  ['FilePage', contract.FilePage, 'GET /api/v1/files'],
  ['FileListQuery', contract.FileListQuery, 'GET /api/v1/files: the query'],
  ['FileUpdateBody', contract.FileUpdateBody, 'PATCH /api/v1/files/{file_no}'],
  ['SignedUrl', contract.SignedUrl, 'POST /api/v1/files/{file_no}/signed-url: the answer'],
  ['SignedUrlBody', contract.SignedUrlBody, 'POST /api/v1/files/{file_no}/signed-url'],
  ['Folder', contract.Folder],
  ['FolderPage', contract.FolderPage, 'GET /api/v1/folders'],
  ['FolderListQuery', contract.FolderListQuery, 'GET /api/v1/folders: the query'],
  ['FolderCreateBody', contract.FolderCreateBody, 'POST /api/v1/folders'],
  ['FolderMoveBody', contract.FolderMoveBody, 'POST /api/v1/folders/move/{folder_no}'],
  ['SourceType', contract.SourceType],
  ['SourceConfiguration', contract.Configuration],
  ['Source', contract.Source],
  ['SourcePage', contract.SourcePage, 'GET /api/v1/sources'],
  ['SourceListQuery', contract.SourceListQuery, 'GET /api/v1/sources: the query'],
  ['SourceCreateBody', contract.SourceCreateBody, 'POST /api/v1/sources'],
  ['SourceUpdateBody', contract.SourceUpdateBody, 'PATCH /api/v1/sources/{sourceId}'],
  ['SourceTest', contract.SourceTest, 'POST /api/v1/sources/{sourceId}/test: the answer'],
  ['MultipartStartBody', contract.MultipartStartBody, 'POST /api/v1/multipart/start'],
  ['MultipartSession', contract.MultipartSession],
  ['MultipartCompleteBody', contract.MultipartCompleteBody, 'POST /api/v1/multipart/complete'],
  ['SessionStatus', contract.SessionStatus, 'GET /api/v1/multipart/{sessionId}'],
  ['RemoteUploadBody', contract.RemoteUploadBody, 'POST /api/v1/uploads/remote'],
  ['TokenMintBody', contract.TokenMintBody, 'POST /api/v1/generate-token'],
  ['TokenPolicy', contract.TokenPolicy],
  ['UploadToken', contract.UploadToken],
  ['WorkspaceSettings', contract.WorkspaceSettings, 'GET /api/v1/workspace'],
  ['WorkspacePatchBody', contract.WorkspacePatchBody, 'PATCH /api/v1/workspace'],
  ['DeliveryKey', contract.DeliveryKey, 'GET /api/v1/workspace/delivery-key'],
  ['Preset', contract.Preset, 'GET /api/v1/presets/{name}'],
  ['PresetList', contract.PresetListData, 'GET /api/v1/presets'],
  ['PresetPutBody', contract.PresetPutBody, 'PUT /api/v1/presets/{name}'],
  ['ApiKeyInfo', contract.ApiKeyInfo, 'GET /api/v1/keys: one key (never the key itself)'],
  ['NewApiKey', contract.NewApiKey, 'POST /api/v1/keys: the new key, shown once'],
  ['ApiKeyRotation', contract.ApiKeyRotation, 'POST /api/v1/keys/{key_id}/rotate'],
  ['WebhookDelivery', contract.WebhookDelivery],
  ['WebhookDeliveryPage', contract.WebhookDeliveryPage, 'GET /api/v1/webhooks/deliveries'],
  ['WebhookDeliveryQuery', contract.WebhookDeliveryQuery, 'GET /api/v1/webhooks/deliveries: the query'],
  ['ErrorBody', contract.ErrorBody],
];

/** The schemas as the JSON they are (TypeBox's own markers left out). */
const EXPORTED = SCHEMAS.map(([name, schema, about]): [string, JsonSchema, string?] => [
  name,
  JSON.parse(JSON.stringify(schema)),
  about,
]);

/** Schemas emitted by name where they occur inside others: by $id for a $ref, else by their JSON (an optional copy too). */
const byJson = new Map<string, string>();
const byId = new Map<string, string>();
for (const [name, schema] of EXPORTED) {
  byJson.set(JSON.stringify(schema), name);
  if (schema.$id) byId.set(schema.$id, name);
}
const nameOf = (s: JsonSchema) => (s.$ref ? byId.get(s.$ref) : byJson.get(JSON.stringify(s)));
/** What a property is, unless its type is a named one that says it itself (`nullable` puts it on the member). */
const describe = (s: JsonSchema) =>
  nameOf(s) ? undefined : (s.description ?? s.anyOf?.find((a) => a.description)?.description);

const literal = (v: unknown) =>
  typeof v === 'string' ? `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'` : String(v);
const key = (k: string) => (/^[A-Za-z_$][\w$]*$/.test(k) ? k : literal(k));
const comment = (text: string | undefined, indent: string) =>
  text ? `${indent}/** ${text.replace(/\*\//g, '*\\/')} */\n` : '';

/** The TypeScript for a schema; `top` is the schema being named, which is never replaced by its own name. */
function tsType(s: JsonSchema, indent: string, top?: JsonSchema): string {
  const named = s !== top ? nameOf(s) : undefined;
  if (named) return named;
  if (s.$ref) throw new Error(`$ref ${s.$ref} is not among the exported types`);
  if (s.const !== undefined) return literal(s.const);
  if (s.enum) return s.enum.map(literal).join(' | ');
  if (s.anyOf) return s.anyOf.map((a) => wrap(tsType(a, indent))).join(' | ');
  switch (s.type) {
    case 'string':
      return 'string';
    case 'integer':
    case 'number':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'null':
      return 'null';
    case 'array':
      return `${wrap(tsType(s.items ?? {}, indent))}[]`;
    case 'object':
      return objectType(s, indent);
    default:
      return 'unknown';
  }
}

const wrap = (t: string) => (t.includes(' | ') && !t.startsWith('{') ? `(${t})` : t);

function objectType(s: JsonSchema, indent: string): string {
  const pattern = Object.values(s.patternProperties ?? {})[0];
  if (pattern) return `Record<string, ${tsType(pattern, indent)}>`;
  const props = Object.entries(s.properties ?? {});
  const open = s.additionalProperties === true;
  if (props.length === 0) return open ? 'Record<string, unknown>' : 'Record<string, never>';
  const inner = `${indent}  `;
  const required = new Set(s.required ?? []);
  const lines = props.map(
    ([k, v]) => `${comment(describe(v), inner)}${inner}${key(k)}${required.has(k) ? '' : '?'}: ${tsType(v, inner)};`,
  );
  if (open) lines.push(`${inner}[key: string]: unknown;`);
  return `{\n${lines.join('\n')}\n${indent}}`;
}

function declaration([name, schema, about]: [string, JsonSchema, string?]): string {
  const doc = comment([schema.description, about].filter(Boolean).join(' '), '');
  const body = tsType(schema, '', schema);
  return body.startsWith('{') && schema.type === 'object' && !schema.patternProperties
    ? `${doc}export interface ${name} ${body}\n`
    : `${doc}export type ${name} = ${body};\n`;
}

/** Runs Biome's formatter over generated TypeScript, so the file is as `npm run format` leaves it. */
function formatted(source: string, path: string): string {
  const biome = spawnSync('npx', ['biome', 'format', `--stdin-file-path=${path}`], {
    cwd: root,
    input: source,
    encoding: 'utf8',
  });
  if (biome.status !== 0) throw new Error(`biome format failed: ${biome.stderr}`);
  return biome.stdout;
}

export function renderSdkTypes(): string {
  const codes = contract.ERROR_CODES.map((c) => `  | ${literal(c)}`).join('\n');
  const source = [
    '// GENERATED by scripts/gen-sdk-types.ts from src/contract/ (`npm run gen:sdk`): do not edit.',
    "// The API's requests and answers as the server's schemas define them.",
    '',
    ...EXPORTED.map(declaration),
    '/** Every code of the error catalogue (docs/errors.md). */',
    `export type ErrorCode =\n${codes};`,
    '',
  ].join('\n');
  return formatted(source, 'sdk/src/types.gen.ts');
}

const cell = (text: string) => text.replace(/\|/g, '\\|');

export function renderErrorDocs(): string {
  const rows = contract.ERROR_CODES.map((code) => {
    const e: contract.ErrorEntry = contract.ERROR_CATALOGUE[code];
    const retry = contract.shouldRetry(code);
    return `| \`${code}\` | ${e.status} | ${cell(e.error)} | ${cell(e.message)} | ${retry === undefined ? '(not sent)' : retry} |`;
  });
  return [
    '# Error codes',
    '',
    '<!-- GENERATED by scripts/gen-sdk-types.ts from src/contract/error-catalogue.ts (`npm run gen:sdk`): do not edit. -->',
    '',
    'Every refusal is `{"success": false, "error", "errorCode", "code", "message"}` (`code` repeats `errorCode`; 429s add',
    '`retryAfterSeconds`). `error` is short and stable; `message` says what to do, and where a part of it varies the table',
    'shows it in `{braces}`. Some codes carry a more specific `error` or message where they arise (a delivery 404 says',
    '`Not found`). Other client errors raised by the framework keep its status and code (`FST_...`).',
    '',
    '`x-should-retry` is `false` on a 4xx that sending the same request again cannot fix; where it is not sent, clients',
    'follow their own rules (the SDK retries 408, 425, 429 and 5xx). 429 and 503 answers carry `retry-after` in seconds.',
    '',
    'A request refused before its body is read (a wrong key, a quota, too many uploads at once) still gets its answer',
    'while the client is sending: a body of up to 1 MiB is read to its end first (for at most a second) and dropped; a',
    'larger one is not read, and the answer goes out with `Connection: close`.',
    '',
    '| Code | Status | `error` | Message | `x-should-retry` |',
    '| --- | --- | --- | --- | --- |',
    ...rows,
    '',
  ].join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  writeFileSync(SDK_TYPES_PATH, renderSdkTypes());
  writeFileSync(ERROR_DOCS_PATH, renderErrorDocs());
  console.log(`wrote ${SDK_TYPES_PATH} and ${ERROR_DOCS_PATH}`);
}
