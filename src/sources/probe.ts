// "Test connection" for each source type: really reaches the origin with the stored
// credentials. Answers are written here, never copied from the SDK, so that no credential,
// signature or request detail can leak into a response.
import { createSign } from 'node:crypto';
import { HeadBucketCommand } from '@aws-sdk/client-s3';
import type { GetBucketMetadataOptions } from '@google-cloud/storage';
import { OutboundBlockedError } from '../outbound/guard.ts';
import { outboundRequest } from '../outbound/http-client.ts';
import { azureServiceFor, checkGcsEndpoint, type ClientDeps, gcsStorageFor, s3ClientFor } from './clients.ts';
import { type Configuration, parseServiceAccount, type SourceType } from './source-types.ts';

export interface ProbeResult {
  ok: boolean;
  latency_ms: number;
  error?: string;
}

/** How origins are reached: the outbound guard, a time limit, the GCS endpoint. */
export type ProbeDeps = ClientDeps;

export async function probeSource(type: SourceType, config: Configuration, deps: ProbeDeps): Promise<ProbeResult> {
  const started = performance.now();
  const done = (error?: string): ProbeResult => ({
    ok: error === undefined,
    latency_ms: Math.round(performance.now() - started),
    ...(error === undefined ? {} : { error }),
  });
  try {
    switch (type) {
      case 'image_source':
        return done(await probeImageSource(config, deps));
      case 's3':
        return done(await probeS3(config, deps));
      case 'azure':
        return done(await probeAzure(config, deps));
      case 'google_cloud':
        return done(await probeGoogleCloud(config, deps));
    }
  } catch (err) {
    return done(describeNetworkError(err));
  }
}

async function probeImageSource(config: Configuration, deps: ProbeDeps): Promise<string | undefined> {
  const res = await outboundRequest(deps.guard, `${String(config.base_url)}/`, {
    method: 'HEAD',
    timeoutMs: deps.timeoutMs,
  });
  res.body.resume();
  // Any answer below 500 means the origin is there; a web origin need not serve its root.
  if (res.status >= 500) return `origin answered HTTP ${res.status}`;
  return undefined;
}

async function probeS3(config: Configuration, deps: ProbeDeps): Promise<string | undefined> {
  const client = await s3ClientFor(config, deps, { attempts: 1, requestTimeoutMs: deps.timeoutMs });
  try {
    await client.send(new HeadBucketCommand({ Bucket: String(config.bucket) }), {
      abortSignal: AbortSignal.timeout(deps.timeoutMs),
    });
    return undefined;
  } catch (err) {
    const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
    if (status === 403) return 'access denied: check access_key, secret_key and the bucket policy';
    if (status === 404) return `bucket "${config.bucket}" does not exist`;
    if (status === 301 || status === 400)
      return `the bucket refused the request (HTTP ${status}): check region and endpoint`;
    if (status) return `storage answered HTTP ${status}`;
    throw err;
  } finally {
    client.destroy();
  }
}

async function probeAzure(config: Configuration, deps: ProbeDeps): Promise<string | undefined> {
  const service = await azureServiceFor(config, deps, { attempts: 1, requestTimeoutMs: deps.timeoutMs });
  try {
    await service
      .getContainerClient(String(config.container_name))
      .getProperties({ abortSignal: AbortSignal.timeout(deps.timeoutMs) });
    return undefined;
  } catch (err) {
    const status = (err as { statusCode?: number }).statusCode;
    if (status === 403) return 'authentication failed: check the account key or SAS in connection_string';
    if (status === 404) return `container "${config.container_name}" does not exist`;
    if (status) return `storage answered HTTP ${status}`;
    throw err;
  }
}

/**
 * Google Cloud: the service account key is checked by signing locally (no network needed);
 * then the bucket is asked for, which needs Google's API (or the operator's emulator endpoint)
 * to be reachable. The answer says which of the two steps failed.
 */
async function probeGoogleCloud(config: Configuration, deps: ProbeDeps): Promise<string | undefined> {
  const account = parseServiceAccount(String(config.service_account_json));
  if (!account) return 'service_account_json is not a usable service account key';
  try {
    createSign('RSA-SHA256').update('stowage-probe').sign(account.private_key);
  } catch {
    return 'the private_key of the service account cannot sign';
  }
  const unreachable = (err: unknown) =>
    `the service account key is valid (checked by signing locally), but Google Cloud Storage could not be reached: ${describeNetworkError(err)}`;
  try {
    await checkGcsEndpoint(deps);
  } catch (err) {
    return unreachable(err);
  }
  const storage = gcsStorageFor(account, deps);
  try {
    // The client's types leave out `timeout`, which it hands on with the request.
    const options: GetBucketMetadataOptions & { timeout: number } = { timeout: deps.timeoutMs };
    await storage.bucket(String(config.bucket_name)).getMetadata(options);
    return undefined;
  } catch (err) {
    const status = (err as { code?: number }).code;
    if (status === 401 || status === 403)
      return 'the service account key is valid, but Google Cloud Storage refused it access to the bucket';
    if (status === 404) return `the service account key is valid, but bucket "${config.bucket_name}" does not exist`;
    if (typeof status === 'number')
      return `the service account key is valid, but Google Cloud Storage answered HTTP ${status}`;
    return unreachable(err);
  }
}

function describeNetworkError(err: unknown): string {
  if (err instanceof OutboundBlockedError) return `address refused: ${err.message}`;
  const e = err as NodeJS.ErrnoException & { name?: string };
  const code = e?.code ?? (e?.cause as NodeJS.ErrnoException | undefined)?.code;
  switch (code) {
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'host name could not be resolved';
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ECONNRESET':
      return 'connection reset';
    case 'ETIMEDOUT':
    case 'UND_ERR_CONNECT_TIMEOUT':
      return 'no answer in time';
    case 'CERT_HAS_EXPIRED':
    case 'DEPTH_ZERO_SELF_SIGNED_CERT':
    case 'UNABLE_TO_VERIFY_LEAF_SIGNATURE':
    case 'ERR_TLS_CERT_ALTNAME_INVALID':
      return `TLS certificate rejected (${code})`;
  }
  if (e?.name === 'AbortError' || e?.name === 'TimeoutError') return 'no answer in time';
  if (e?.code === 'EOUTBOUNDBLOCKED') return `address refused: ${e.message}`;
  return 'the origin could not be reached';
}
