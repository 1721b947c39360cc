// Answers in both documented shapes at once (docs/api/uploads.md#answer-shapes): a flat record and
// `{success, data}`, and the hosted SDKs read one or the other (uploads, file rename and update,
// folder create and rename); the flat fields plus `success` and `data` satisfy all of them.
export function bothShapes<T extends object>(value: T) {
  return { success: true as const, ...value, data: value };
}

export const uploadAnswer = bothShapes;
