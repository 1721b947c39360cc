// What /openapi.json says beyond the routes' own schemas: the document's head, the security
// schemes, the named schemas routes refer to (`$ref`, registered once on the app), each
// operation's id and document-only parts (openapi-operations.ts), and the paths no documented
// route gives (openapi-static.ts). test/openapi-lint.test.ts lints the result.
import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import { ErrorBody } from './errors.ts';
import { FileDetails, FileRecord, UploadAnswer } from './files.ts';
import { OPERATIONS, type RouteKey } from './openapi-operations.ts';
import { STATIC_PATHS, STATIC_SECURITY_SCHEMES } from './openapi-static.ts';
import { Source } from './sources.ts';

/** Schemas with an $id: components of the document, referred to by routes as Type.Ref(<$id>). */
export const SHARED_SCHEMAS = [ErrorBody, Source, FileRecord, FileDetails, UploadAnswer];

type OpenApiHead = NonNullable<FastifyDynamicSwaggerOptions['openapi']>;

/** The document's head (paths come from the routes). The type import is for checking only. */
export const OPENAPI_HEAD: OpenApiHead = {
  openapi: '3.0.3',
  info: {
    title: 'Stowage API',
    version: '1.0.0',
    description: 'Media asset uploads, sources and delivery. See README.md.',
    license: { name: 'MIT', url: 'https://opensource.org/license/mit' },
  },
  components: {
    securitySchemes: {
      bearer: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer <API key>' },
      apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key' },
      ...STATIC_SECURITY_SCHEMES,
    },
  },
  security: [{ bearer: [] }, { apiKey: [] }],
  tags: [
    { name: 'uploads', description: 'Direct, remote and token uploads (docs/api/uploads.md)' },
    { name: 'multipart', description: 'Large files in parts (docs/api/uploads.md#multipart-uploads)' },
    { name: 'files', description: 'Files (docs/api/files-folders.md)' },
    { name: 'folders', description: 'Folders (docs/api/files-folders.md)' },
    { name: 'sources', description: 'Origins delivery reads through (docs/api/sources.md)' },
    { name: 'presets', description: 'Named transformations (docs/api/presets.md)' },
    { name: 'keys', description: "The workspace's API keys (docs/api/keys.md)" },
    { name: 'webhooks', description: 'Webhook deliveries (docs/api/webhooks.md)' },
    { name: 'workspace', description: 'The caller’s workspace (docs/api/workspace.md)' },
    { name: 'delivery', description: 'Public delivery URLs (docs/api/delivery.md)' },
    { name: 'health', description: 'Probes and metrics (docs/api/health.md)' },
  ],
};

interface RouteInfo {
  schema?: Record<string, unknown>;
  url: string;
  route: { method: string | string[]; config?: { auth?: string } };
}

/** The route's schema as the document shows it: its operationId and document-only parts added. */
export function documentedRoute({ schema, url, route }: RouteInfo): { schema?: Record<string, unknown> } {
  if (!schema || schema.hide) return {};
  const method = Array.isArray(route.method) ? route.method[0] : route.method;
  const doc = OPERATIONS[`${method} ${url}` as RouteKey];
  return {
    schema: {
      ...schema,
      ...(doc ? { operationId: doc.operationId, ...doc.extra } : {}),
      // Routes that take no key (probes, upload tokens, presigned part URLs) say so.
      ...((route.config?.auth ?? 'none') === 'none' ? { security: [] } : {}),
    },
  };
}

/** The parts of an OpenAPI 3.0 schema an example is composed from. */
interface SchemaNode {
  $ref?: string;
  example?: unknown;
  enum?: unknown[];
  default?: unknown;
  anyOf?: SchemaNode[];
  oneOf?: SchemaNode[];
  type?: string;
  items?: SchemaNode;
  properties?: Record<string, SchemaNode>;
  required?: string[];
  nullable?: boolean;
}

interface Media {
  schema?: SchemaNode;
  example?: unknown;
  examples?: unknown;
}

interface Document {
  servers?: { url: string; description?: string }[];
  paths: Record<string, Record<string, { responses?: Record<string, { content?: Record<string, Media> }> }>>;
  components?: { schemas?: Record<string, SchemaNode> };
}

/**
 * An example value for a schema, composed from the examples its parts carry (TypeBox `examples`,
 * `example` once converted), their enums and defaults: undefined when a required part has none,
 * so that nothing is invented.
 */
export function composeExample(
  schema: SchemaNode | undefined,
  components: Record<string, SchemaNode>,
  depth = 0,
): unknown {
  if (!schema || depth > 16) return undefined;
  if (schema.$ref) return composeExample(components[schema.$ref.split('/').pop() ?? ''], components, depth + 1);
  if ('example' in schema) return schema.example;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  if (schema.default !== undefined) return schema.default;
  for (const members of [schema.anyOf, schema.oneOf]) {
    if (!Array.isArray(members)) continue;
    for (const member of members) {
      const value = composeExample(member, components, depth + 1);
      if (value !== undefined) return value;
    }
    return undefined;
  }
  if (schema.type === 'array') {
    const item = composeExample(schema.items, components, depth + 1);
    return item === undefined ? [] : [item];
  }
  if (schema.type === 'object') {
    const required = new Set(schema.required ?? []);
    const out: Record<string, unknown> = {};
    for (const [key, property] of Object.entries(schema.properties ?? {})) {
      const value = composeExample(property, components, depth + 1);
      if (value === undefined) {
        if (required.has(key)) return undefined;
        continue;
      }
      out[key] = value;
    }
    return out;
  }
  if (schema.nullable) return null;
  return undefined;
}

/** The generated document completed: servers, the static paths, and success answers' examples. */
export function completeDocument(doc: Document, publicUrl: string): Document {
  doc.servers = [{ url: publicUrl, description: 'This service (STOWAGE_PUBLIC_URL)' }];
  doc.paths = { ...doc.paths, ...structuredClone(STATIC_PATHS) } as Document['paths'];
  const schemas = doc.components?.schemas ?? {};
  for (const item of Object.values(doc.paths)) {
    for (const operation of Object.values(item)) {
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        const media = response.content?.['application/json'];
        if (!status.startsWith('2') || !media || 'example' in media || 'examples' in media) continue;
        const example = composeExample(media.schema, schemas);
        if (example !== undefined) media.example = example;
      }
    }
  }
  return doc;
}

/** @fastify/swagger's options for this service. */
export function swaggerOptions(publicUrl: string): FastifyDynamicSwaggerOptions {
  return {
    openapi: OPENAPI_HEAD,
    // Fastify's types for these hooks are wider than what is read here.
    transform: documentedRoute as unknown as FastifyDynamicSwaggerOptions['transform'],
    transformObject: ({ openapiObject }: { openapiObject: unknown }) =>
      completeDocument(structuredClone(openapiObject) as Document, publicUrl),
  } as FastifyDynamicSwaggerOptions;
}
