// What /openapi.json says beyond the routes' own schemas: the document's head, the security
// schemes, and the named schemas routes refer to (`$ref`), registered once on the app.
import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import { ErrorBody } from './errors.ts';
import { FileDetails, FileRecord, UploadAnswer } from './files.ts';
import { Source } from './sources.ts';

/** Schemas with an $id: components of the document, referred to by routes as Type.Ref(<$id>). */
export const SHARED_SCHEMAS = [ErrorBody, Source, FileRecord, FileDetails, UploadAnswer];

/** The document's head (paths come from the routes). The type import is for checking only. */
export const OPENAPI_HEAD: NonNullable<FastifyDynamicSwaggerOptions['openapi']> = {
  openapi: '3.0.3',
  info: {
    title: 'Stowage API',
    version: '1.0.0',
    description: 'Media asset uploads, sources and delivery. See README.md.',
  },
  components: {
    securitySchemes: {
      bearer: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer <API key>' },
      apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key' },
    },
  },
  security: [{ bearer: [] }, { apiKey: [] }],
};
