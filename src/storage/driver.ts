// The storage interface every back end implements (local disk now; S3 with issue 3).
export interface StorageDriver {
  readonly name: string;
  /** Throws when the storage does not answer or cannot be written. */
  check(): Promise<void>;
}
