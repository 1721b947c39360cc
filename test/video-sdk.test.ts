// The SDK's video helpers (@stowage/sdk/video) against the real service with real ffmpeg:
// videoTokens/posterTokens build the grammar's tokens (and refuse what it would refuse), and
// waitForRendition polls a rendition made in the background until the media is there, telling
// each status, without downloading the video; refusals and failed transcodes are thrown.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { Stowage, StowageAbortError, StowageError } from '../sdk/src/index.ts';
import { posterTokens, videoTokens, waitForRendition } from '../sdk/src/video.ts';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { clipFolder, ffmpegSkip } from './helpers/video.ts';

test('videoTokens and posterTokens write the grammar and refuse what it refuses', () => {
  assert.equal(
    videoTokens({
      width: 640,
      height: 360,
      mode: 'pad',
      background: 'white',
      start: 5,
      end: 15,
      format: 'webm',
      quality: 60,
    }),
    'w_640,h_360,cm_pad_resize,bg_white,so_5,eo_15,q_60,f_webm',
  );
  assert.equal(videoTokens({ width: 480, start: 1.25, duration: 3, format: 'gif' }), 'w_480,so_1.25,d_3,f_gif');
  assert.equal(videoTokens({ rotate: 90, flip: 'h', mute: true }), 'r_90,flip_h,ac_none');
  assert.equal(
    videoTokens({ height: 720, mode: 'pad', background: { blurred: 30 } }),
    'h_720,cm_pad_resize,bg_blurred_30',
  );
  assert.equal(posterTokens({ at: 2, width: 320 }), 'thumb_ar,so_2,w_320');
  assert.throws(() => videoTokens({ width: 5000 }), /width must be a whole number from 1 to 4320/);
  assert.throws(() => videoTokens({ start: -1 }), /start must be a number of seconds/);
  assert.throws(() => videoTokens({ end: 3, duration: 2 }), /end or duration/);
  assert.throws(() => videoTokens({ background: 'red;x' }), /colour name or hex/);
});

describe('waitForRendition against the service', { skip: ffmpegSkip }, () => {
  const clips = ffmpegSkip ? undefined : clipFolder('stowage-video-sdk-');
  let h: Harness;
  let base: string;
  let sdk: Stowage;
  let ws: string;

  before(async () => {
    clips!.ffmpeg(
      '-f',
      'lavfi',
      '-i',
      'testsrc=size=96x64:rate=10:duration=2',
      '-pix_fmt',
      'yuv420p',
      clips!.at('c.mp4'),
    );
    h = await makeHarness('sqlite');
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    sdk = new Stowage({ baseUrl: base, apiKey: h.ws.private_key });
    ws = h.ws.workspace_id;
    await sdk.upload(new Blob([readFileSync(clips!.at('c.mp4'))]), 'c.mp4');
    // The jobs run as under `npm start`: the transcode happens in the background.
    await h.services.jobs.start();
  });
  after(() => h?.close());

  test('polls through triggered/processing to the media, then the URL serves the rendition', async () => {
    const url = sdk.deliveryUrl(ws, 'c.mp4', videoTokens({ width: 48, format: 'webm' }));
    const statuses: string[] = [];
    const got = await waitForRendition(url, { onStatus: (s) => statuses.push(s.status), timeoutMs: 120_000 });
    assert.equal(got, url);
    assert.equal(statuses[0], 'triggered');
    const res = await fetch(url);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^video\/webm/);
    // Asked again once made: no status, at once.
    const again: string[] = [];
    await waitForRendition(url, { onStatus: (s) => again.push(s.status) });
    assert.deepEqual(again, []);
  });

  test('a refused token is thrown as a StowageError at once; a cancel is an abort', async () => {
    const bad = `${base}/${ws}/w_9999/c.mp4`;
    await assert.rejects(waitForRendition(bad), (err: StowageError) => {
      assert.ok(err instanceof StowageError);
      assert.equal(err.status, 400);
      assert.equal(err.errorCode, 'VALIDATION_FAILED');
      return true;
    });
    const controller = new AbortController();
    const waiting = waitForRendition(sdk.deliveryUrl(ws, 'c.mp4', videoTokens({ width: 32, start: 1 })), {
      signal: controller.signal,
      onStatus: () => controller.abort(),
    });
    await assert.rejects(waiting, StowageAbortError);
  });
});
