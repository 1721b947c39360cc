// Debian's Chromium driven by playwright-core, as every browser test launches it. Without the
// binary the browser tests are skipped, except under CI, where a missing browser is a failure.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { type Browser, chromium, type FileChooser, type Page } from 'playwright-core';
import { IN_CI } from './services.ts';

export const CHROMIUM = process.env.STOWAGE_TEST_CHROMIUM ?? '/usr/bin/chromium';
export const haveChromium = existsSync(CHROMIUM);

/** `skip` for a describe() that needs the browser; under CI, also registers a failing test when it is missing. */
export function chromiumSkip(): false | string {
  if (haveChromium) return false;
  if (IN_CI)
    test('Chromium is installed', () => assert.fail(`${CHROMIUM} is missing: .ci/run installs Debian's chromium`));
  return 'install chromium (or set STOWAGE_TEST_CHROMIUM) to run';
}

/** Headless, no sandbox (containers), and nothing that talks to the network on its own. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/**
 * Picks files in the dashboard's uploader (Uppy's Dashboard) as a user does: "browse files" (after
 * "Add more" when files are listed already) opens the file chooser, which is answered with `files`.
 */
export async function chooseFiles(page: Page, files: Parameters<FileChooser['setFiles']>[0]): Promise<void> {
  const browse = page.getByRole('button', { name: 'browse files' });
  if (!(await browse.isVisible())) await page.getByRole('button', { name: /^Add more/ }).click();
  const [chooser] = await Promise.all([page.waitForEvent('filechooser'), browse.click()]);
  // Buffers travel to the browser over the DevTools protocol: tens of MiB take long on a loaded machine.
  await chooser.setFiles(files, { timeout: 120_000 });
}
