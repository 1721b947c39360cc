// Characters no text the service stores or sends may hold: shared by names, tags and custom ids
// (src/uploads/names.ts) and by source configuration (src/sources/source-types.ts).

/**
 * C0 controls (CR and LF would split a header), DEL, C1 controls, the line and paragraph
 * separators (U+2028/U+2029), and the bidi embeddings, overrides (U+202A-U+202E) and isolates
 * (U+2066-U+2069) that make a text display as another ("evil\u202egnp.exe" shows as "evilexe.png").
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is this pattern's job
export const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

/** No lone surrogate. Node 20 has String.prototype.isWellFormed; TypeScript's ES2022 lib does not declare it. */
export const isWellFormed = (s: string): boolean => (s as string & { isWellFormed(): boolean }).isWellFormed();
