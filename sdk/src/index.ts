// @stowage/sdk: a typed client for the Stowage API, for Node (>= 20) and browsers.
export { Stowage, uploadWithToken } from './client.ts';
export type { AutoUploadOptions, ClientOptions, MultipartOptions, RequestOptions } from './client.ts';
export { StowageAbortError, StowageError, StowageNetworkError } from './errors.ts';
export { signDeliveryUrl } from './sign.ts';
export type { SignDeliveryUrlOptions } from './sign.ts';
export type { AnyErrorCode } from './errors.ts';
export type * from './types.ts';
