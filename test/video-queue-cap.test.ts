// Anonymous delivery URLs cannot queue unbounded transcoding: every distinct token set of a public
// video is a new job, so STOWAGE_TRANSCODE_QUEUE caps the jobs waiting or running across the
// deployment. Tried as an attacker would, with many distinct URLs at once.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { transcodeDefaults } from '../src/media/video/transcode.ts';
import { Stowage } from '../sdk/src/index.ts';
import { DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';
import { clipFolder, ffmpegSkip } from './helpers/video.ts';

const clips = ffmpegSkip ? undefined : clipFolder('stowage-queue-cap-');
clips?.ffmpeg('-f', 'lavfi', '-i', 'testsrc=size=64x48:rate=5:duration=1', '-pix_fmt', 'yuv420p', clips.at('v.mp4'));

for (const dialect of DIALECTS) {
  describe(`transcode queue cap on ${dialect.name}`, { skip: ffmpegSkip || dialect.skip }, () => {
    let h: Harness;
    let base: string;

    before(async () => {
      h = await makeHarness(dialect.name, {
        config: { transcode: { ...transcodeDefaults(), speed: 'fastest', maxQueued: 3 } },
      });
      base = await h.app.listen({ host: '127.0.0.1', port: 0 });
      const sdk = new Stowage({ baseUrl: base, apiKey: h.ws.private_key });
      await sdk.upload(new Blob([readFileSync(clips!.at('v.mp4'))]), 'v.mp4');
    });
    after(() => h?.close());

    const get = (tokens: string) => fetch(`${base}/${h.ws.workspace_id}/${tokens}/v.mp4`);

    test('ten distinct renditions at once: three are queued, seven get 503 TRANSCODE_BUSY with Retry-After', async () => {
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          get(`w_${16 + 2 * i}`).then(async (r) => ({
            status: r.status,
            retry: r.headers.get('retry-after'),
            body: (await r.json()) as { status?: string; code?: string },
          })),
        ),
      );
      const queued = answers.filter((a) => a.status === 202);
      const refused = answers.filter((a) => a.status === 503);
      assert.equal(queued.length, 3, JSON.stringify(answers.map((a) => a.status)));
      assert.equal(refused.length, 7);
      for (const r of refused) {
        assert.equal(r.body.code, 'TRANSCODE_BUSY');
        assert.equal(r.retry, '30');
      }
      // Asking again for one already queued is not new work: it is told "processing".
      const queuedWidth = answers.findIndex((a) => a.status === 202);
      const again = await get(`w_${16 + 2 * queuedWidth}`);
      assert.equal(again.status, 202);
      assert.equal(((await again.json()) as { status: string }).status, 'processing');
    });

    test('once the queue drains, new renditions are taken again', async () => {
      await h.services.jobs.runDue('video.transcode');
      const next = await get('w_60');
      assert.equal(next.status, 202, await next.text());
    });
  });
}
