import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A real S3-compatible server for tests: s3rver (npm), in this process, on an ephemeral port,
 * with one bucket. It speaks the S3 REST API (path-style), so Bun.S3Client talks to it as to
 * AWS; it does not check signatures, so expiry of presigned URLs is S3's job, not tested here.
 */
export interface TestS3 {
  url: string;
  endpoint: string;
  bucket: string;
  client: Bun.S3Client;
  stop(): Promise<void>;
}

export async function startS3(bucket = 'svc-test'): Promise<TestS3> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-s3-'));
  const mod = 's3rver';
  const S3rver = (
    (await import(mod)) as {
      default: new (o: Record<string, unknown>) => { run(): Promise<{ port: number }>; close(): Promise<void> };
    }
  ).default;
  const server = new S3rver({
    port: 0,
    address: '127.0.0.1',
    silent: true,
    directory: dir,
    configureBuckets: [{ name: bucket, configs: [] }],
  });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    url: `http://S3RVER:S3RVER@127.0.0.1:${port}/${bucket}`,
    endpoint,
    bucket,
    client: new Bun.S3Client({
      accessKeyId: 'S3RVER',
      secretAccessKey: 'S3RVER',
      bucket,
      endpoint,
      region: 'us-east-1',
    }),
    async stop() {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
