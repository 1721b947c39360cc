// The load generator of bench/small-files, in a process of its own (so that it does not share an
// event loop with anything it measures): autocannon sends `amount` multipart uploads over
// `connections` keep-alive connections, each body a different file (a counter written into a
// random payload: no upload is a duplicate of another) under a name of its own (a tag of this
// process and the counter: no upload replaces a file of an earlier run), and prints one JSON line
// of results.
//
//   node --import tsx bench/small-files-client.ts '{"url":"...","headers":{...},"amount":10000,"connections":32,"size":102400}'
import { randomBytes } from 'node:crypto';
import autocannon from 'autocannon';

const { url, headers, amount, connections, size } = JSON.parse(process.argv[2]) as {
  url: string;
  headers: Record<string, string>;
  amount: number;
  connections: number;
  size: number;
};
const boundary = '----stowagebenchsmall';
const payload = randomBytes(size);
const run = randomBytes(4).toString('hex');
const suffix = Buffer.from(`\r\n--${boundary}--\r\n`);
let sent = 0;

/** The multipart body of upload i: a file_name field, then the file (Stowage's direct upload form). */
function body(i: number): Buffer {
  const name = `small-${run}-${String(i).padStart(8, '0')}.bin`;
  const prefix = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="file_name"\r\n\r\n${name}\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${name}"\r\nContent-Type: application/octet-stream\r\n\r\n`,
  );
  payload.writeUInt32LE(i, 0);
  return Buffer.concat([prefix, payload, suffix]);
}

const cpuBefore = process.cpuUsage();
const started = performance.now();
// autocannon ends a run with `amount` on its next sampling tick (every second), not at the last
// answer: its own clock would add up to a second to each run (10% of a 10 s run). The run's
// length here is from the start to the last answer.
let lastAnswer = started;
const result = await new Promise<autocannon.Result>((resolve, reject) => {
  const instance = autocannon(
    {
      url,
      method: 'POST',
      connections,
      amount,
      headers: { ...headers, 'content-type': `multipart/form-data; boundary=${boundary}` },
      requests: [{ setupRequest: (req) => ({ ...req, body: body(sent++) }) }],
    },
    (err, res) => (err ? reject(err) : resolve(res)),
  );
  instance.on('response', () => {
    lastAnswer = performance.now();
  });
});
const seconds = (lastAnswer - started) / 1000;
const cpu = process.cpuUsage(cpuBefore);
console.log(
  JSON.stringify({
    completed: result.requests.total,
    seconds,
    perSecond: result.requests.total / seconds,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
    bodies: sent,
    clientCpu: (cpu.user + cpu.system) / 1e6,
  }),
);
