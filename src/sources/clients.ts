// SDK clients for a source's configuration, built one way for the source test and for origin
// fetches alike: every caller-supplied endpoint is checked by the outbound guard, and the AWS
// and Azure SDKs connect through the guard's agents (addresses checked at connect time too).
import { S3Client } from '@aws-sdk/client-s3';
import { BlobServiceClient } from '@azure/storage-blob';
import { Storage } from '@google-cloud/storage';
import type { OutboundGuard } from '../outbound/guard.ts';
import { type Configuration, parseConnectionString, type ServiceAccount } from './source-types.ts';

export interface ClientDeps {
  guard: OutboundGuard;
  timeoutMs: number;
  gcsApiEndpoint?: string;
}

/** How patient a client is: one quick try for a test, more for serving files. */
export interface Patience {
  attempts: number;
  requestTimeoutMs: number;
}

export async function s3ClientFor(config: Configuration, deps: ClientDeps, patience: Patience): Promise<S3Client> {
  const endpoint = config.endpoint ? String(config.endpoint) : undefined;
  if (endpoint) await deps.guard.checkUrl(endpoint);
  return new S3Client({
    region: String(config.region),
    endpoint,
    forcePathStyle: Boolean(endpoint),
    credentials: config.access_key
      ? { accessKeyId: String(config.access_key), secretAccessKey: String(config.secret_key) }
      : undefined,
    // No keys: anonymous requests (public buckets), left unsigned.
    signer: config.access_key ? undefined : { sign: async <R>(request: R) => request },
    maxAttempts: patience.attempts,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    requestHandler: {
      httpAgent: deps.guard.httpAgent,
      httpsAgent: deps.guard.httpsAgent,
      requestTimeout: patience.requestTimeoutMs,
      connectionTimeout: deps.timeoutMs,
    },
  });
}

/** The blob endpoint a connection string names (as the Azure SDK reads it). */
export function azureBlobEndpoint(connectionString: string): string {
  const cs = parseConnectionString(connectionString) ?? {};
  if (cs.UseDevelopmentStorage === 'true') return 'http://127.0.0.1:10000/devstoreaccount1';
  return (
    cs.BlobEndpoint ??
    `${cs.DefaultEndpointsProtocol ?? 'https'}://${cs.AccountName}.blob.${cs.EndpointSuffix ?? 'core.windows.net'}`
  );
}

export async function azureServiceFor(
  config: Configuration,
  deps: ClientDeps,
  patience: Patience,
): Promise<BlobServiceClient> {
  const endpoint = azureBlobEndpoint(String(config.connection_string));
  await deps.guard.checkUrl(endpoint);
  // storage-blob hands its options to the core pipeline, whose `agent` carries the guard's
  // lookup: the connection goes only to addresses that passed the checks.
  return BlobServiceClient.fromConnectionString(String(config.connection_string), {
    retryOptions: { maxTries: patience.attempts, tryTimeoutInMs: patience.requestTimeoutMs },
    agent: deps.guard.agentFor(endpoint),
  } as Parameters<typeof BlobServiceClient.fromConnectionString>[1]);
}

/** Google's API, or the operator's emulator (trusted as configuration, so not checked). */
export const gcsApiEndpoint = (deps: ClientDeps) => deps.gcsApiEndpoint ?? 'https://storage.googleapis.com';

/** Checks Google's endpoint like any origin (an operator-set emulator is trusted). */
export async function checkGcsEndpoint(deps: ClientDeps): Promise<void> {
  if (!deps.gcsApiEndpoint) await deps.guard.checkUrl(gcsApiEndpoint(deps));
}

export function gcsStorageFor(account: ServiceAccount, deps: ClientDeps): Storage {
  return new Storage({
    apiEndpoint: gcsApiEndpoint(deps),
    projectId: account.project_id,
    credentials: { client_email: account.client_email, private_key: account.private_key },
    retryOptions: { autoRetry: false },
  });
}
