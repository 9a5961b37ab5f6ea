import type { ModelDef } from '../projects/types.ts';
import type { HookDef } from '../projects/actor.ts';
import { BadUserInput, Conflict, NotFound } from '../errors.ts';
import { WriteTx, type WriteCommitter, type WriteStep } from '../content/tx.ts';
import { publishRecord, requiredKeys, searchKeys, type WriteContext } from '../content/write.ts';
import { queueHooks } from '../content/hooks.ts';

/**
 * Publishing a release: ONE write transaction (src/content/tx.ts) that locks the release row,
 * reads its items (the transaction's prelude), then publishes every record — a working version
 * exactly as `publish<Model>Version` does, a pinned version through svc_release_publish_pinned
 * (sql/045_releases.sql) — and marks the release published. Readers see either none of it or
 * all of it: it is one commit. Each record announces `record.changed` (action `published`) as a
 * manual publish does, and the release `release.published`, all after the commit; hooks on
 * `published` are queued in the same transaction. Any failure (a required field missing, a
 * record of a model since removed) rolls the whole release back.
 */
export interface PublishTarget {
  projectId: string;
  defaultLocale: string;
  models: readonly ModelDef[];
  hooks: readonly HookDef[];
}

/** What a publish needs of a project snapshot. */
export function publishTarget(s: {
  id: string;
  defaultLocale: string;
  models: readonly ModelDef[];
  hooks: readonly HookDef[];
}): PublishTarget {
  return { projectId: s.id, defaultLocale: s.defaultLocale, models: s.models, hooks: s.hooks };
}

interface ItemRow {
  status: string;
  name: string;
  record_id: string | null;
  model_key: string | null;
  version: number | null;
  data: Record<string, Record<string, unknown>> | string | null;
}

export async function publishRelease(
  writes: WriteCommitter,
  target: PublishTarget,
  releaseId: string,
  userId: string | null,
  opts: { onlyScheduledBy?: Date } = {},
): Promise<{ published: number }> {
  const models = new Map(target.models.map((m) => [m.key, m]));
  const w: WriteContext = {
    projectId: target.projectId,
    defaultLocale: target.defaultLocale,
    userId,
    models: (k) => models.get(k),
  };
  const tx = new WriteTx({ projectId: target.projectId, userId });
  let published = 0;
  tx.prelude = {
    statement: {
      // FOR UPDATE of the release: a second publish (another process, the release clock) waits
      // here and then finds it published.
      text: `select r.status, r.name, r.at, i.record_id, i.model_key, i.version, i.data
        from releases r left join release_items i on i.release_id = r.id
        where r.id = $1::text and r.project_id = $2::text
        order by i.record_id for update of r`,
      params: [releaseId, target.projectId],
    },
    // biome-ignore lint/suspicious/noThenProperty: a prelude is a plain record read by content/tx.ts, never awaited; `then` is its continuation
    then: (raw) => {
      const rows = raw as unknown as (ItemRow & { at: Date | string | null })[];
      if (rows.length === 0) throw new NotFound(`No release with id "${releaseId}"`);
      const head = rows[0]!;
      if (head.status === 'published' || head.status === 'discarded')
        throw new Conflict(`Release "${releaseId}" is ${head.status}`);
      // The release clock publishes only what is still scheduled for a time now past.
      if (
        opts.onlyScheduledBy &&
        (head.status !== 'scheduled' ||
          head.at === null ||
          new Date(head.at).getTime() > opts.onlyScheduledBy.getTime())
      ) {
        throw new Conflict(`Release "${releaseId}" is no longer due`);
      }
      for (const row of rows) {
        if (row.record_id === null) continue;
        const model = models.get(row.model_key!);
        if (!model)
          throw new Conflict(
            `Release "${releaseId}" holds a record of model "${row.model_key}", which no longer exists`,
          );
        tx.write(
          row.version === null
            ? publishRecord(w, model, row.record_id)
            : publishPinned(w, model, row.record_id, row.version, parse(row.data)),
        );
        published++;
      }
      tx.follow({
        text: `update releases set status = 'published', at = now(), error = null, updated_at = now() where id = $1::text`,
        params: [releaseId],
      });
      tx.events.push({
        type: 'release.published',
        projectId: target.projectId,
        releaseId,
        name: head.name,
        records: published,
        userId,
      });
    },
  };
  queueHooks(tx, target.projectId, target.hooks, userId);
  await writes.commit(tx);
  return { published };
}

function parse(data: ItemRow['data']): Record<string, Record<string, unknown>> {
  const v = typeof data === 'string' ? JSON.parse(data) : data;
  if (!v || typeof v !== 'object') throw new BadUserInput('A pinned version of the release has no content');
  return v;
}

function publishPinned(
  ctx: WriteContext,
  model: ModelDef,
  id: string,
  version: number,
  content: Record<string, Record<string, unknown>>,
): WriteStep {
  return {
    recordId: id,
    statements: [
      {
        text: `select svc_release_publish_pinned($1::text, $2::text, $3::text, $4::text, $5::text[], $6::text[], $7::text, $8::text::jsonb)`,
        params: [
          id,
          ctx.projectId,
          model.key,
          ctx.userId,
          requiredKeys(model),
          searchKeys(model),
          `Record "${id}" (version ${version}) of the release no longer exists`,
          JSON.stringify(content),
        ],
      },
    ],
    event: { action: 'published', recordId: id, modelKey: model.key },
  };
}
