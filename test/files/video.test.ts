import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import sharp from 'sharp';
import { startTestServer, type TestServer } from '../support/server.ts';
import { filesProject, form, type FilesProject } from './support.ts';
import { need } from '../support/binaries.ts';
import { testClip } from '../support/clip.ts';

/**
 * Videos: an upload queues a media job; a worker makes a poster (JPEG) and HLS renditions with
 * ffmpeg, outside the request, and the file then reports `duration`, `poster` and `hls`. Without
 * ffmpeg the job is skipped and `hls` stays null.
 */
setDefaultTimeout(180_000);
/** ffmpeg, or undefined on a box without it (these tests skip, one line says why). */
const FFMPEG = need('ffmpeg');
let clip: Uint8Array;

beforeAll(async () => {
  if (!FFMPEG) return;
  clip = new Uint8Array(await testClip(FFMPEG, 'duration=3:size=640x360:rate=15', 3));
});

/** Polls an async check until it returns without throwing (the media job runs in the background). */
async function until<T>(check: () => Promise<T>, timeoutMs: number): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (e) {
      if (Date.now() > end) throw e;
      await Bun.sleep(200);
    }
  }
}

const READ = 'query($id: ID!) { file(id: $id) { id contentType duration width height poster hls url } }';

describe('with ffmpeg', () => {
  let server: TestServer;
  let p: FilesProject;
  afterAll(async () => {
    await server?.stop();
  });

  test.skipIf(!FFMPEG)('a video gets a poster and HLS renditions from the media job', async () => {
    server = await startTestServer({ SVC_FILES_JOB_POLL_MS: '200' });
    p = await filesProject(server, 'video');
    const key = await p.key(['files:write', 'files:read']);
    const up = await p.upload(key, form({ file: [new Blob([clip as Uint8Array<ArrayBuffer>]), 'clip.mp4'] }));
    expect(up.status).toBe(201);
    expect(up.body.contentType).toBe('video/mp4');
    const first = await p.gql(key, READ, { id: up.body.id });
    expect(first.data.file.hls).toBeNull();
    const done = await until(async () => {
      const r = await p.gql(key, READ, { id: up.body.id });
      if (!r.data.file.hls) throw new Error('not yet');
      return r.data.file;
    }, 150_000);
    expect(done).toMatchObject({ width: 640, height: 360 });
    expect(done.duration).toBeGreaterThan(2.5);
    const poster = await fetch(done.poster);
    expect(poster.status).toBe(200);
    expect(poster.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(await sharp(new Uint8Array(await poster.arrayBuffer())).metadata()).toMatchObject({
      format: 'jpeg',
      width: 640,
      height: 360,
    });
    const master = await fetch(done.hls);
    expect(master.headers.get('content-type')).toBe('application/vnd.apple.mpegurl');
    const text = await master.text();
    expect(text).toContain('#EXTM3U');
    expect(text).toContain('RESOLUTION=640x360');
    const rendition = await fetch(new URL('hls-360.m3u8', done.hls));
    const list = await rendition.text();
    const segment = list.split('\n').find((l) => l.endsWith('.ts'))!;
    const seg = await fetch(new URL(segment, done.hls));
    expect(seg.status).toBe(200);
    expect(seg.headers.get('content-type')).toBe('video/mp2t');
    expect((await seg.arrayBuffer()).byteLength).toBeGreaterThan(1000);
    const [job] = await server.svc.sql`select status from file_jobs where file_id = ${up.body.id}`;
    expect(job!.status).toBe('completed');
  });
});

test.skipIf(!FFMPEG)('without ffmpeg the job is skipped and hls stays null', async () => {
  const server = await startTestServer({ SVC_FFMPEG: 'off', SVC_FILES_JOB_POLL_MS: '100' });
  try {
    const p = await filesProject(server, 'novideo');
    const key = await p.key(['files:write', 'files:read']);
    const up = await p.upload(key, form({ file: [new Blob([clip as Uint8Array<ArrayBuffer>]), 'clip.mp4'] }));
    await until(async () => {
      const [job] = await server.svc.sql`select status from file_jobs where file_id = ${up.body.id}`;
      if (job?.status !== 'skipped') throw new Error('not yet');
    }, 30_000);
    const r = await p.gql(key, READ, { id: up.body.id });
    expect(r.data.file).toMatchObject({ hls: null, poster: null, contentType: 'video/mp4' });
    expect((await fetch(`${r.data.file.url.replace(/\/[^/]+$/, '')}/~/hls-master.m3u8`)).status).toBe(404);
  } finally {
    await server.stop();
  }
});
