import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { removeTempDir, tempDir } from './tmp.ts';

/**
 * A small H.264 MP4 made by `ffmpeg` from its test pattern (lavfi `testsrc=<video>`, for example
 * `duration=3:size=640x360:rate=15`), with a sine tone of `audioSeconds` as AAC when given: the
 * video tests' upload. Its bytes; the temporary folder is removed.
 */
export async function testClip(ffmpeg: string, video: string, audioSeconds?: number): Promise<Buffer> {
  const dir = tempDir('svc-clip-');
  const out = join(dir, 'clip.mp4');
  const audio = audioSeconds === undefined ? [] : ['-f', 'lavfi', '-i', `sine=duration=${audioSeconds}`];
  const p = Bun.spawn(
    [
      ffmpeg,
      '-v',
      'error',
      '-f',
      'lavfi',
      '-i',
      `testsrc=${video}`,
      ...audio,
      '-c:v',
      'libx264',
      '-preset',
      'ultrafast',
      '-pix_fmt',
      'yuv420p',
      ...(audio.length ? ['-c:a', 'aac', '-shortest'] : []),
      out,
    ],
    { stdout: 'ignore', stderr: 'inherit' },
  );
  if ((await p.exited) !== 0) throw new Error('ffmpeg could not make the test clip');
  const clip = readFileSync(out);
  removeTempDir(dir);
  return clip;
}
