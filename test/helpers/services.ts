// External services for tests. A suite that needs one runs when its variable is set and is
// reported as skipped otherwise, except under CI=true, where a missing service fails the run.
import { test } from 'node:test';

export const IN_CI = process.env.CI === 'true';

export interface ServiceGate {
  value: string | undefined;
  /** For describe()/test() options: false to run, or the reason it is skipped. */
  skip: string | false;
}

export function externalService(envName: string, what: string): ServiceGate {
  const value = process.env[envName] || undefined;
  if (value) return { value, skip: false };
  if (IN_CI) {
    test(`${what} is configured (${envName})`, () => {
      throw new Error(`${envName} is not set: CI must provide ${what}; see .ci/run`);
    });
  }
  return { value: undefined, skip: `set ${envName} to run against ${what}` };
}
