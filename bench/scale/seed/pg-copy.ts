// COPY … FROM STDIN with the plain `pg` client, without pg-copy-streams: a query object the
// client submits (pg's "submittable" interface) that, once the server asks for data, lets the
// caller send text-format chunks with the socket's backpressure, then ends the copy.
import { once } from 'node:events';
import type pg from 'pg';
import type { Cell, Row } from './rows.ts';

/** The copy messages pg's Connection has (its typings leave them out). */
type CopyConnection = pg.Connection & {
  sendCopyFromChunk(chunk: Buffer): void;
  endCopyFrom(): void;
  sendCopyFail(message: string): void;
};

/** One COPY in progress on one client. */
export class CopyIn implements pg.Submittable {
  private connection?: CopyConnection;
  private failure?: Error;
  private readonly ready: Promise<void>;
  private readonly done: Promise<void>;
  private onReady!: () => void;
  private onDone!: (err?: Error) => void;

  private constructor(private readonly sql: string) {
    this.ready = new Promise((resolve) => (this.onReady = resolve));
    this.done = new Promise((resolve, reject) => (this.onDone = (err) => (err ? reject(err) : resolve())));
    // Neither may go unhandled while the caller is not waiting on it yet.
    this.done.catch(() => {});
  }

  /** Starts `COPY table (columns) FROM STDIN [options]` on `client`; resolves once data may be sent. */
  static async start(client: pg.Client, table: string, columns: readonly string[], options = ''): Promise<CopyIn> {
    const copy = new CopyIn(`copy ${table} (${columns.join(', ')}) from stdin ${options}`);
    client.query(copy);
    await Promise.race([copy.ready, copy.done]);
    if (copy.failure) throw copy.failure;
    return copy;
  }

  // pg calls these as the server answers.
  submit(connection: pg.Connection): void {
    this.connection = connection as CopyConnection;
    connection.query(this.sql);
  }
  handleCopyInResponse(): void {
    this.onReady();
  }
  handleError(err: Error): void {
    this.failure = err;
  }
  handleReadyForQuery(): void {
    this.onDone(this.failure);
  }
  handleCommandComplete(): void {}
  handleCopyData(): void {}
  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}

  /** Sends rows; waits while the socket's buffer is full. */
  async write(rows: Row[]): Promise<void> {
    if (this.failure) throw this.failure;
    const connection = this.connection!;
    connection.sendCopyFromChunk(Buffer.from(copyText(rows)));
    if (connection.stream.writableNeedDrain) await once(connection.stream, 'drain');
  }

  /** Ends the copy and waits for the server to take it. */
  async end(): Promise<void> {
    this.connection!.endCopyFrom();
    await this.done;
  }

  /** Abandons the copy (the server rolls it back). */
  async fail(reason: string): Promise<void> {
    this.connection?.sendCopyFail(reason);
    await this.done.catch(() => {});
  }
}

/** COPY's text format: tab-separated, \N for null, backslash escapes for the few special characters. */
export function copyText(rows: Row[]): string {
  let out = '';
  for (const row of rows) {
    for (let i = 0; i < row.length; i++) {
      if (i > 0) out += '\t';
      out += cell(row[i]);
    }
    out += '\n';
  }
  return out;
}

const SPECIAL = /[\\\t\n\r]/;
const ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };

function cell(value: Cell): string {
  if (value === null) return '\\N';
  if (typeof value === 'number') return String(value);
  return SPECIAL.test(value) ? value.replace(/[\\\t\n\r]/g, (c) => ESCAPES[c]) : value;
}
