// ownTurn (src/turns.ts): continuations that became ready together run one per turn of the
// event loop, so a timer due meanwhile runs between them instead of after all of them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ownTurn, turnsWaiting } from '../src/turns.ts';

function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

/** Five 5 ms continuations made ready at once through `gate`, and a 1 ms timer: the order they ran in. */
async function order(gate: () => Promise<void>): Promise<string[]> {
  const ran: string[] = [];
  const timer = new Promise<void>((resolve) =>
    setTimeout(() => {
      ran.push('timer');
      resolve();
    }, 1),
  );
  busy(2); // the timer is due before any continuation runs
  await Promise.all(
    Array.from({ length: 5 }, (_, i) =>
      gate().then(() => {
        busy(5);
        ran.push(`w${i}`);
      }),
    ),
  );
  await timer;
  return ran;
}

test('ready continuations run one per turn, in the order they asked, with the loop running between them', async () => {
  const together = await order(() => Promise.resolve());
  assert.deepEqual(together, ['w0', 'w1', 'w2', 'w3', 'w4', 'timer'], 'without ownTurn they hold the loop together');
  const turns = await order(ownTurn);
  assert.deepEqual(
    turns.filter((x) => x !== 'timer'),
    ['w0', 'w1', 'w2', 'w3', 'w4'],
  );
  assert.ok(turns.indexOf('timer') <= 1, `the due timer ran after at most one continuation: ${turns.join(' ')}`);
  assert.equal(turnsWaiting(), 0);
});

test('a waiter queued while others are resumed still gets its turn', async () => {
  const ran: number[] = [];
  await Promise.all([
    ownTurn().then(async () => {
      ran.push(1);
      await ownTurn();
      ran.push(3);
    }),
    ownTurn().then(() => ran.push(2)),
  ]);
  assert.deepEqual(ran, [1, 2, 3]);
  assert.equal(turnsWaiting(), 0);
});
