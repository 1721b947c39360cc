// The error answer's schema, and the OpenAPI error responses of a route, from the catalogue.
import { type Static, Type } from 'typebox';
import { ERROR_CATALOGUE, ERROR_CODES } from './error-catalogue.ts';

export const ErrorBody = Type.Object(
  {
    success: Type.Literal(false),
    error: Type.String(),
    errorCode: Type.Optional(Type.String({ description: 'A code of the error catalogue (docs/errors.md)' })),
    code: Type.Optional(Type.String({ description: 'The same as errorCode (the hosted API names it code)' })),
    message: Type.Optional(Type.String()),
    retryAfterSeconds: Type.Optional(Type.Number()),
  },
  {
    $id: 'ErrorBody',
    description: 'Every error: docs/api.md#errors',
    examples: [
      {
        success: false,
        error: 'File not found',
        errorCode: 'FILE_NOT_FOUND',
        code: 'FILE_NOT_FOUND',
        message: 'No file with this file_no in this workspace',
      },
    ],
  },
);
export type ErrorBody = Static<typeof ErrorBody>;

/** The catalogue's codes answered with this status. */
export function codesWithStatus(status: number): string[] {
  return ERROR_CODES.filter((code) => ERROR_CATALOGUE[code].status === status);
}

/** A route's error responses: the error body for each status, naming the catalogue's codes of that status. */
export const errorResponses = (...statuses: number[]) =>
  Object.fromEntries(
    statuses.map((s) => [
      s,
      Type.Ref('ErrorBody', {
        description: `Every error (docs/api.md#errors). The codes the API answers ${s} with: ${codesWithStatus(s).join(', ')} (docs/errors.md)`,
      }),
    ]),
  );
