// Pieces the resource schemas share: nullable values, paging, tag lists, free-form objects.
import { type TSchema, Type } from 'typebox';

export const nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);

/** A JSON object of any members (metadata): `{type: object, additionalProperties: true}`, typed as a record. */
export const AnyObject = (description?: string) =>
  Type.Unsafe<Record<string, unknown>>(
    Type.Object({}, { additionalProperties: true, ...(description ? { description } : {}) }),
  );

/** Tags as a list or as one comma-separated text. */
export const TagsInput = () => Type.Union([Type.Array(Type.String()), Type.String()]);

export const PAGE = () => Type.Integer({ minimum: 1, maximum: 10_000_000, default: 1 });

/** `{success: true}` and nothing else. */
export const Ok = Type.Object({ success: Type.Literal(true) }, { examples: [{ success: true }] });
