import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Sql } from '../store/db.ts';
import { newId } from '../ids.ts';
import type { FileStorage } from './storage.ts';

/**
 * Video posters and HLS renditions, made by a job (table file_jobs), never inside a request: an
 * upload of a video queues one; a worker process (SVC_ROLE all or worker) claims it with SKIP
 * LOCKED and runs ffmpeg as a child process with a time limit. The poster is a JPEG frame; HLS
 * is one H.264/AAC rendition per height in RENDITIONS at or below the source's, 4-second
 * segments, and a master playlist. Everything is stored as derived objects of the blob and the
 * file row gets `duration`, `width`, `height` and `media`. Without ffmpeg (SVC_FFMPEG=off, or
 * no binary) the job ends `skipped` and the file reports `poster: null`, `hls: null`.
 */
export const RENDITIONS = [360, 720] as const;
const JOB_TIMEOUT_MS = 10 * 60_000;
const MAX_ATTEMPTS = 3;

export interface MediaJob {
  id: string;
  file_id: string;
  project_id: string;
  attempts: number;
}

/** Queues the media job of a freshly stored video (inside the upload's transaction). */
export async function queueMediaJob(tx: Sql, fileId: string, projectId: string): Promise<void> {
  await tx`insert into file_jobs (id, file_id, project_id, kind) values (${newId('fjob')}, ${fileId}, ${projectId}, 'video')`;
}

export async function claimJob(sql: Sql): Promise<MediaJob | null> {
  const [job] = await sql<MediaJob[]>`
    update file_jobs set status = 'running', attempts = attempts + 1, locked_until = now() + make_interval(secs => ${JOB_TIMEOUT_MS / 1000 + 60}), updated_at = now()
    where id = (
      select id from file_jobs
      where (status = 'pending' or (status = 'running' and locked_until < now())) and attempts < ${MAX_ATTEMPTS}
      order by created_at limit 1 for update skip locked)
    returning id, file_id, project_id, attempts`;
  return job ?? null;
}

async function finish(
  sql: Sql,
  id: string,
  status: 'completed' | 'failed' | 'skipped' | 'pending',
  error: string | null,
): Promise<void> {
  await sql`update file_jobs set status = ${status}, error = ${error}, locked_until = null, updated_at = now() where id = ${id}`;
}

/** Runs a command, collecting stdout; kills it past the time limit. */
async function run(cmd: string[], timeoutMs: number): Promise<string> {
  const proc = Bun.spawn(cmd, { stdout: 'pipe', stderr: 'pipe', stdin: 'ignore' });
  const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  clearTimeout(timer);
  if (code !== 0)
    throw new Error(`${cmd[0]} exited ${code}: ${err.trim().split('\n').slice(-2).join(' ').slice(0, 300)}`);
  return out;
}

/** Whether `bin -version` runs (checked once per process). */
export async function ffmpegAvailable(bin: string): Promise<boolean> {
  if (bin === 'off') return false;
  try {
    await run([bin, '-version'], 10_000);
    return true;
  } catch {
    return false;
  }
}

interface Probe {
  duration: number | null;
  width: number | null;
  height: number | null;
  audio: boolean;
}

async function probe(ffprobe: string, input: string): Promise<Probe> {
  const out = JSON.parse(
    await run(
      [ffprobe, '-v', 'error', '-show_entries', 'stream=codec_type,width,height:format=duration', '-of', 'json', input],
      60_000,
    ),
  ) as {
    streams?: { codec_type?: string; width?: number; height?: number }[];
    format?: { duration?: string };
  };
  const video = out.streams?.find((s) => s.codec_type === 'video');
  if (!video) throw new Error('no video stream');
  const d = Number(out.format?.duration);
  return {
    duration: Number.isFinite(d) ? d : null,
    width: video.width ?? null,
    height: video.height ?? null,
    audio: !!out.streams?.some((s) => s.codec_type === 'audio'),
  };
}

/** The derived objects of one video, made in `dir`: poster.jpg, hls-<h>.m3u8 and segments, hls-master.m3u8. */
async function render(ffmpeg: string, input: string, dir: string, p: Probe): Promise<void> {
  const at = p.duration ? Math.min(1, p.duration / 2) : 0;
  await run(
    [
      ffmpeg,
      '-v',
      'error',
      '-y',
      '-ss',
      String(at),
      '-i',
      input,
      '-frames:v',
      '1',
      '-vf',
      "scale='min(1280,iw)':-2",
      '-q:v',
      '3',
      join(dir, 'poster.jpg'),
    ],
    JOB_TIMEOUT_MS,
  );
  const src = p.height ?? RENDITIONS[0];
  const heights = RENDITIONS.filter((h) => h <= src);
  if (heights.length === 0) heights.push(RENDITIONS[0]);
  const master = ['#EXTM3U', '#EXT-X-VERSION:3'];
  for (const h of heights) {
    const vbit = h >= 720 ? 2800 : 800;
    await run(
      [
        ffmpeg,
        '-v',
        'error',
        '-y',
        '-i',
        input,
        '-vf',
        `scale=-2:${Math.min(h, src)}`,
        '-c:v',
        'libx264',
        '-preset',
        'veryfast',
        '-profile:v',
        'main',
        '-b:v',
        `${vbit}k`,
        '-maxrate',
        `${Math.round(vbit * 1.1)}k`,
        '-bufsize',
        `${vbit * 2}k`,
        ...(p.audio ? ['-c:a', 'aac', '-b:a', '128k', '-ac', '2'] : ['-an']),
        '-hls_time',
        '4',
        '-hls_playlist_type',
        'vod',
        '-hls_segment_filename',
        join(dir, `hls-${h}-%03d.ts`),
        join(dir, `hls-${h}.m3u8`),
      ],
      JOB_TIMEOUT_MS,
    );
    const w = p.width && p.height ? Math.round((p.width * Math.min(h, src)) / p.height / 2) * 2 : null;
    master.push(
      `#EXT-X-STREAM-INF:BANDWIDTH=${(vbit + (p.audio ? 128 : 0)) * 1000}${w ? `,RESOLUTION=${w}x${Math.min(h, src)}` : ''}`,
      `hls-${h}.m3u8`,
    );
  }
  await writeFile(join(dir, 'hls-master.m3u8'), master.join('\n') + '\n');
}

export interface MediaDeps {
  sql: Sql;
  storage: FileStorage;
  ffmpeg: string;
  /** Whether ffmpeg runs here (ffmpegAvailable, checked once). */
  available: boolean;
}

/** Processes one claimed job. Answers whether the file changed (its row got media). */
export async function processJob(deps: MediaDeps, job: MediaJob): Promise<boolean> {
  const [file] = await deps.sql<
    { id: string; sha256: string; media: unknown }[]
  >`select id, sha256, media from files where id = ${job.file_id}`;
  if (!file) return (void (await finish(deps.sql, job.id, 'skipped', 'the file is gone')), false);
  if (!deps.available) return (void (await finish(deps.sql, job.id, 'skipped', 'ffmpeg is not available')), false);
  // The same bytes were processed for another file already: reuse what was made.
  const [done] = await deps.sql<
    { media: unknown; duration: number | null; width: number | null; height: number | null }[]
  >`
    select media, duration, width, height from files where sha256 = ${file.sha256} and media is not null limit 1`;
  if (done) {
    await deps.sql`update files set media = ${deps.sql.json(done.media as never)}, duration = ${done.duration}, width = ${done.width}, height = ${done.height} where id = ${file.id}`;
    await finish(deps.sql, job.id, 'completed', null);
    return true;
  }
  const dir = await mkdtemp(join(tmpdir(), 'svc-media-'));
  try {
    let input = deps.storage.localPath(file.sha256);
    if (!input) {
      const obj = await deps.storage.open(file.sha256);
      if (!obj) throw new Error('the blob is missing');
      input = join(dir, 'source');
      await Bun.write(input, obj.file);
    }
    const ffprobe = deps.ffmpeg.replace(/ffmpeg$/, 'ffprobe');
    const p = await probe(ffprobe, input);
    await render(deps.ffmpeg, input, dir, p);
    for (const name of await readdir(dir)) {
      if (name === 'source') continue;
      await deps.storage.putDerived(file.sha256, name, new Uint8Array(await readFile(join(dir, name))));
    }
    const media = { poster: 'poster.jpg', hls: 'hls-master.m3u8' };
    await deps.sql`update files set media = ${deps.sql.json(media)}, duration = ${p.duration}, width = ${p.width}, height = ${p.height} where sha256 = ${file.sha256} and media is null`;
    await finish(deps.sql, job.id, 'completed', null);
    return true;
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    await finish(deps.sql, job.id, job.attempts >= MAX_ATTEMPTS ? 'failed' : 'pending', msg.slice(0, 500));
    return false;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Content types of derived objects, by extension. */
export function derivedType(name: string): string | null {
  if (name.endsWith('.jpg')) return 'image/jpeg';
  if (name.endsWith('.m3u8')) return 'application/vnd.apple.mpegurl';
  if (name.endsWith('.ts')) return 'video/mp2t';
  return null;
}
