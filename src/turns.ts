// One heavy continuation per turn of the event loop.
//
// Answers that cost milliseconds of JavaScript (a page of 100 file records: build, encode, send)
// tend to become ready together: the SQLite reader threads' results arrive as a batch of messages
// and pg's sockets as a batch of readable events, and Node runs every callback of a batch, with
// its promise continuations, in one turn. With 32 clients that made turns of 20 to 35 ms in which
// nothing else ran: no timer, no /healthz, no other socket. `ownTurn()` queues its caller and
// resumes one waiter per turn (a setImmediate chain: an immediate set while immediates run goes
// to the next turn), so between two such answers the loop polls sockets and runs its timers. The
// work and its order are unchanged; only the turns are shorter.

const waiting: (() => void)[] = [];
let draining = false;

function resumeOne(): void {
  const next = waiting.shift();
  if (waiting.length > 0) setImmediate(resumeOne);
  else draining = false;
  next?.();
}

/** Resolves in a turn of the event loop of its own (after the waiters queued before it). */
export function ownTurn(): Promise<void> {
  return new Promise((resolve) => {
    waiting.push(resolve);
    if (!draining) {
      draining = true;
      setImmediate(resumeOne);
    }
  });
}

/** Waiters not yet resumed (for tests). */
export const turnsWaiting = (): number => waiting.length;
