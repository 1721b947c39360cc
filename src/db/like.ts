// LIKE patterns with the metacharacters of the searched text escaped, so that a search for
// "%" or "_" finds exactly that. Use with `escape '\'` (see `likeEscaped`).
import { type RawBuilder, sql } from 'kysely';

export const escapeLike = (text: string) => text.replace(/[\\%_]/g, (c) => `\\${c}`);

/** Case-insensitive substring (compare against lower(column)). */
export const likeContains = (text: string) => `%${escapeLike(text.toLowerCase())}%`;

/** Everything below a folder path: "a/b" → "a/b/%". */
export const likeBelow = (path: string) => `${escapeLike(path)}/%`;

/** `lower(column) like pattern escape '\'` or, with `caseSensitive`, `column like …`. */
export function likeEscaped(column: string, pattern: string, caseSensitive = false): RawBuilder<boolean> {
  const ref = sql.ref(column);
  return caseSensitive
    ? sql<boolean>`${ref} like ${pattern} escape '\\'`
    : sql<boolean>`lower(${ref}) like ${pattern} escape '\\'`;
}
