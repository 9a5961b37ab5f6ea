import type { Subprocess } from 'bun';
import { replicatedDatabase, startStandbyPair, type StandbyPair } from './standby.ts';
import { startTestServer, type TestServer } from './server.ts';
import { spawnService } from './process.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from '../graphql/helpers.ts';
import type { ModelDef } from '../../src/projects/types.ts';

export const POST = [
  { key: 'post', name: 'Post', fields: [{ key: 'title', type: 'text', required: true }] },
] as ModelDef[];

/** Two service processes reading from a hot standby, with one published post to read. */
export interface ReplicaFixture {
  pair: StandbyPair;
  primaryDb: string;
  standbyDb: string;
  /** In this process, with DATABASE_READ_URL on the standby. */
  server: TestServer;
  /** A second API process on the same primary and standby. */
  other: { proc: Subprocess; url: string };
  p: GqlProject;
  sk: string;
  pk: string;
  /** A post published as "v0". */
  id: string;
  stop(): Promise<void>;
}

/**
 * A primary + hot standby pair (standby.ts), a database `dbName` on it, this process's service
 * and a second API process on it, both with `env` (DATABASE_READ_URL and the replica settings).
 */
export async function replicaFixture(
  dbName: string,
  env: (standbyDb: string) => Record<string, string>,
): Promise<ReplicaFixture> {
  const pair = await startStandbyPair();
  let server: TestServer | undefined;
  let other: ReplicaFixture['other'] | undefined;
  const stop = async () => {
    other?.proc.kill();
    await other?.proc.exited;
    await server?.stop();
    await pair.stop();
  };
  try {
    // The standby replays the CREATE DATABASE before it can be connected to.
    const { primaryDb, standbyDb } = await replicatedDatabase(pair, dbName);
    const settings = env(standbyDb);
    server = await startTestServer({ DATABASE_URL: primaryDb, ...settings });
    const p = await gqlProject(server, POST);
    const sk = await p.key('sk', ALL_SECRET);
    const pk = await p.key('pk', ['records:read']);
    const id = (await p.gql(sk, 'mutation { createPost(data: { title: "v0" }) { _id } }')).body.data.createPost._id;
    await p.gql(sk, 'mutation($id: ID!) { publishPostVersion(_id: $id) { _id } }', { id });
    other = await spawnService(
      { DATABASE_URL: primaryDb, ...settings, SVC_LOG: 'off', SVC_DATA_DIR: server.dataDir },
      { role: 'api', cwd: `${import.meta.dir}/../..` },
    );
    return { pair, primaryDb, standbyDb, server, other, p, sk, pk, id, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
