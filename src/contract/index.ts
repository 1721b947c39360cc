// The HTTP contract in one place: TypeBox schemas (JSON Schema) for every request and answer of
// the API, with their static types, and the error catalogue. Routes validate with these, the
// OpenAPI document is generated from them, and scripts/gen-sdk-types.ts writes the SDK's types
// and docs/errors.md from them. Nothing here imports server code.
export * from './common.ts';
export * from './error-catalogue.ts';
export * from './errors.ts';
export * from './files.ts';
export * from './keys.ts';
export * from './folders.ts';
export * from './multipart.ts';
export * from './openapi.ts';
export * from './presets.ts';
export * from './sources.ts';
export * from './uploads.ts';
export * from './webhooks.ts';
export * from './workspace.ts';
