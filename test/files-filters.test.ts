// The files list's filters that the dashboard's search uses (type, created_after/created_before,
// custom_id), on SQLite and PostgreSQL. Each answer is checked against the same filter applied
// in JavaScript to every record, so the oracle is independent of the SQL; totals, sort orders
// and cursor paging hold with the filters on; bad values are 400s.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';
import { clipFolder, ffmpegSkip } from './helpers/video.ts';

interface Rec {
  file_no: string;
  name: string;
  mime_type: string;
  created_at: string;
  custom_id: string | null;
  size: number;
}

const MEDIA = ['image/', 'video/', 'audio/'];
const DOCUMENT = [
  /^text\//,
  /^application\/(pdf|rtf|msword|epub\+zip)$/,
  /^application\/vnd\.(ms-|openxmlformats-officedocument\.|oasis\.opendocument\.|apple\.)/,
];
const kindOf = (mime: string) => {
  const media = MEDIA.find((p) => mime.startsWith(p));
  if (media) return media.slice(0, -1);
  return DOCUMENT.some((r) => r.test(mime)) ? 'document' : 'other';
};

// A video and an audio file, made by ffmpeg (installed under CI), so those filters match something.
const clips = ffmpegSkip ? undefined : clipFolder('stowage-filters-');
if (clips) {
  clips.ffmpeg(
    '-f',
    'lavfi',
    '-i',
    'testsrc=size=32x32:rate=5:duration=0.4',
    '-pix_fmt',
    'yuv420p',
    clips.at('clip.mp4'),
  );
  clips.ffmpeg('-f', 'lavfi', '-i', 'sine=frequency=440:duration=0.2', clips.at('tone.wav'));
}

for (const dialect of DIALECTS) {
  describe(`files list filters on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    const all: Rec[] = [];
    let middle = '';

    const upload = async (name: string, body: Buffer, customId?: string) => {
      const form = new FormData();
      form.append('file', new Blob([new Uint8Array(body)]), name);
      form.append('file_name', name);
      if (customId) form.append('custom_id', customId);
      const res = await h.app.inject({ method: 'POST', url: '/api/v1/uploads', headers: h.auth, payload: form });
      assert.equal(res.statusCode, 201, res.body);
      all.push(res.json().data);
    };

    before(async () => {
      h = await makeHarness(dialect.name);
      const png = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#f00' } })
        .png()
        .toBuffer();
      const gif = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#0f0' } })
        .gif()
        .toBuffer();
      await upload('red.png', png, 'sku-1');
      await upload('report.pdf', Buffer.from('%PDF-1.4\n%%EOF\n'));
      await upload('notes.txt', Buffer.from('plain words\n'), 'sku-2');
      await new Promise((r) => setTimeout(r, 30));
      middle = new Date().toISOString();
      await new Promise((r) => setTimeout(r, 30));
      await upload('green.gif', gif);
      await upload('data.bin', Buffer.from([0, 1, 2, 3, 254, 255]), 'sku-1b');
      await upload('table.csv', Buffer.from('a,b\n1,2\n'));
      await upload('page.html', Buffer.from('<!doctype html><p>hi</p>'));
      await upload('archive.zip', Buffer.from('PK\u0003\u0004rest'));
      if (clips) {
        await upload('clip.mp4', readFileSync(clips.at('clip.mp4')));
        await upload('tone.wav', readFileSync(clips.at('tone.wav')));
      }
      // Every kind the oracle knows that this set has, so each filter is tried on a real mix.
      const kinds = new Set(all.map((r) => kindOf(r.mime_type)));
      for (const k of clips ? ['image', 'video', 'audio', 'document', 'other'] : ['image', 'document', 'other'])
        assert.ok(kinds.has(k), `${k} among ${[...kinds].join(', ')}`);
    });
    after(() => h?.close());

    /** Every page of a filtered list, by cursor, limit 2: the file_nos in order and the first page's meta. */
    async function list(query: string) {
      const got: Rec[] = [];
      let cursor: string | null = null;
      let first: { total: number; totalEstimated: boolean } | undefined;
      do {
        const res: { statusCode: number; body: string; json(): any } = await h.app.inject({
          method: 'GET',
          url: `/api/v1/files?limit=2&${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
          headers: h.auth,
        });
        assert.equal(res.statusCode, 200, `${query}: ${res.body}`);
        const body = res.json();
        first ??= body.meta;
        got.push(...body.files);
        cursor = body.meta.nextCursor;
      } while (cursor);
      return { nos: got.map((r) => r.file_no), meta: first! };
    }

    const newestFirst = (rs: Rec[]) =>
      [...rs].sort((a, b) => b.created_at.localeCompare(a.created_at) || (b.file_no < a.file_no ? -1 : 1));

    for (const kind of ['image', 'video', 'audio', 'document', 'other'])
      test(`type=${kind} gives exactly the ${kind} files, with an exact total`, async () => {
        const want = all.filter((r) => kindOf(r.mime_type) === kind);
        const { nos, meta } = await list(`type=${kind}`);
        assert.deepEqual(
          new Set(nos),
          new Set(want.map((r) => r.file_no)),
          `${kind}: ${all.map((r) => `${r.name}=${r.mime_type}`).join(' ')}`,
        );
        assert.equal(nos.length, want.length, 'no file twice across pages');
        assert.deepEqual([meta.total, meta.totalEstimated], [want.length, false]);
      });

    test('created_after and created_before split the files at an instant; a date means that day in UTC', async () => {
      const later = all.filter((r) => r.created_at >= middle);
      const earlier = all.filter((r) => r.created_at < middle);
      assert.ok(later.length > 0 && earlier.length > 0);
      const a = await list(`created_after=${encodeURIComponent(middle)}`);
      assert.deepEqual(
        a.nos,
        newestFirst(later).map((r) => r.file_no),
      );
      assert.equal(a.meta.total, later.length);
      const b = await list(`created_before=${encodeURIComponent(middle)}`);
      assert.deepEqual(
        b.nos,
        newestFirst(earlier).map((r) => r.file_no),
      );
      const today = middle.slice(0, 10);
      const tomorrow = new Date(Date.parse(today) + 86_400_000).toISOString().slice(0, 10);
      assert.equal((await list(`created_after=${today}&created_before=${tomorrow}`)).nos.length, all.length);
      assert.equal((await list(`created_after=${tomorrow}`)).nos.length, 0);
    });

    test('custom_id is matched exactly, alone or with other filters; sort orders hold under filters', async () => {
      const one = await list('custom_id=sku-1');
      assert.deepEqual(
        one.nos,
        all.filter((r) => r.custom_id === 'sku-1').map((r) => r.file_no),
      );
      assert.equal(one.meta.total, 1);
      assert.deepEqual((await list('custom_id=sku')).nos, [], 'not a prefix match');
      const docsByName = await list('type=document&sort_field=name&sort_order=asc');
      assert.deepEqual(
        docsByName.nos,
        all
          .filter((r) => kindOf(r.mime_type) === 'document')
          .sort((x, y) => (x.name < y.name ? -1 : 1))
          .map((r) => r.file_no),
      );
      const otherBySize = await list(
        `type=other&sort_field=file_size&sort_order=desc&created_after=${encodeURIComponent(middle)}`,
      );
      assert.deepEqual(
        otherBySize.nos,
        all
          .filter((r) => kindOf(r.mime_type) === 'other' && r.created_at >= middle)
          .sort((x, y) => y.size - x.size || (y.file_no < x.file_no ? -1 : 1))
          .map((r) => r.file_no),
      );
    });

    test('bad filter values are 400s that name the parameter', async () => {
      for (const [q, word] of [
        ['type=pictures', 'type'],
        ['created_after=yesterday', 'created_after'],
        ['created_before=2026-13-45', 'created_before'],
        ['created_after=14/03/2026', 'created_after'],
      ] as const) {
        const res = await h.app.inject({ method: 'GET', url: `/api/v1/files?${q}`, headers: h.auth });
        assert.equal(res.statusCode, 400, q);
        assert.match(res.body, new RegExp(word), q);
      }
    });
  });
}
