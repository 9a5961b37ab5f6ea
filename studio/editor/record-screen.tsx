import { useEffect, useMemo, useState } from 'preact/hooks';
import * as Y from 'yjs';
import { canEdit, gql, type ProjectRef } from '../api.ts';
import { names, recordTitle, TEXT_TYPES, type ModelDef, type Placement, type ProjectConfig } from '../models.ts';
import { modelPath, navigate } from '../router.ts';
import { StatusBadge, type RecordRow } from '../records.tsx';
import { Field } from './fields.tsx';
import type { FormCtx } from './field-props.ts';
import { colorOf, joinRoom, type Room } from './collab.ts';
import { History } from './history.tsx';
import { settle } from './settle.ts';
import { scheduledActions, type Scheduled } from '../editorial.tsx';
import { ErrorLine, NoticeLine, useActions } from '../screen-parts.tsx';
import { AddToRelease } from '../releases.tsx';
import { NewRecord } from './new-record.tsx';

interface Props {
  project: ProjectRef;
  config: ProjectConfig;
  model: ModelDef;
  recordId: string;
}

const FIELDS = '_id naturalKey _updatedAt _publishedAt _hasDraft content';

export function RecordScreen(props: Props) {
  return props.recordId === 'new' ? <NewRecord {...props} /> : <Editor {...props} />;
}

interface Peer {
  clientId: number;
  name: string;
  color: string;
  focus: string | null;
}

function Editor({ project, config, model, recordId }: Props) {
  const n = names(model.key);
  const writer = canEdit(project.role);
  const locales = Array.isArray(config.project.settings.locales) ? (config.project.settings.locales as string[]) : [];
  const [locale, setLocale] = useState<string | null>(null);
  const [record, setRecord] = useState<RecordRow | null>(null);
  const [room, setRoom] = useState<Room | null>(null);
  const [synced, setSynced] = useState(false);
  const [, setTick] = useState(0);
  const [peers, setPeers] = useState<Peer[]>([]);
  // `reload` is defined below; an action calls it only once the screen is built.
  const { error, setError, notice, busy, act } = useActions(() => reload());
  const [saveState, setSaveState] = useState<'saved' | 'pending'>('saved');
  // Scheduled publishing (docs/scheduling.md): the time picked beside Publish, and what waits.
  const [publishAt, setPublishAt] = useState('');
  const [pending, setPending] = useState<Scheduled[]>([]);
  const loadPending = () =>
    scheduledActions(project.id, model.key).then(
      (all) => setPending(all.filter((s) => s.recordId === recordId && s.status === 'scheduled')),
      () => {},
    );
  useEffect(() => void loadPending(), [recordId]);
  const placements = (config.placements ?? []).filter(
    (p: Placement) => !p.modelKeys?.length || p.modelKeys.includes(model.key),
  );
  const [tab, setTab] = useState<string>(placements.find((p) => p.hideContentTab) ? `placement-0` : 'content');
  const email = useMemo(() => document.querySelector('.who')?.textContent ?? 'editor', []);

  const reload = () =>
    gql(project.id, `query($id:ID!,$l:String){ r: ${n.one}(_id:$id, preview:true, locale:$l){ ${FIELDS} } }`, {
      id: recordId,
      l: locale,
    }).then(
      (d) => (d.r ? setRecord(d.r) : setError('This record does not exist (or was deleted).')),
      (e: Error) => setError(e.message),
    );

  useEffect(() => void reload(), [recordId, locale]);
  useEffect(() => {
    let r: Room | undefined;
    let live = true;
    setSynced(false);
    joinRoom(project.id, model.key, recordId, locale, { name: email, canWrite: writer }).then(
      (joined) => {
        if (!live) return joined.destroy();
        r = joined;
        setRoom(joined);
        const rerender = () => setTick((t) => t + 1);
        joined.content.observeDeep((_e, tr) => {
          rerender();
          if (tr.local && model.versioned === false) setSaveState('pending');
        });
        joined.provider.on('sync', (ok: boolean) => {
          if (!ok) return;
          // Text fields are Y.Text in the room; make the missing ones so typing can bind.
          if (writer)
            joined.doc.transact(() => {
              for (const f of model.fields)
                if (TEXT_TYPES.has(f.type) && !(joined.content.get(f.key) instanceof Y.Text))
                  joined.content.set(
                    f.key,
                    new Y.Text(
                      typeof joined.content.get(f.key) === 'string' ? (joined.content.get(f.key) as string) : '',
                    ),
                  );
            });
          setSynced(true);
        });
        const aw = joined.provider.awareness;
        const onAwareness = () => {
          const list: Peer[] = [];
          aw.getStates().forEach((s: any, clientId) => {
            if (clientId !== joined.doc.clientID && s.user)
              list.push({
                clientId,
                name: s.user.name,
                color: s.user.color ?? colorOf(s.user.name),
                focus: s.focus ?? null,
              });
          });
          setPeers(list);
        };
        aw.on('change', onAwareness);
      },
      (e: Error) => live && setError(e.message),
    );
    return () => {
      live = false;
      r?.destroy();
      setRoom(null);
    };
  }, [recordId, locale]);

  // Unversioned models save themselves (docs/collab.md): show when the room has written.
  useEffect(() => {
    if (saveState !== 'pending') return;
    const t = setTimeout(() => reload().then(() => setSaveState('saved')), 3500);
    return () => clearTimeout(t);
  }, [saveState, room]);

  const saveDraft = async () => {
    await settle();
    return gql(project.id, 'mutation($r:String!){ saveCollabDraft(roomName:$r){ _id } }', { r: room!.info.roomName });
  };
  const publish = () =>
    act('Published', async () => {
      if (model.versioned !== false) await saveDraft();
      else await settle();
      await gql(project.id, `mutation($id:ID!){ ${n.publish}(_id:$id){ _id } }`, { id: recordId });
    });
  // The working version is saved first and its version number scheduled: what goes live is the
  // content as it is now, even if it is edited before then (docs/scheduling.md).
  const schedulePublish = () =>
    act(`Scheduled to publish ${new Date(publishAt).toLocaleString()}`, async () => {
      if (model.versioned !== false) await saveDraft();
      else await settle();
      const h = await gql(project.id, 'query($id:ID!){ v: recordVersions(_id:$id){ version } }', { id: recordId });
      const version = h.v.length ? h.v[h.v.length - 1].version : null;
      await gql(
        project.id,
        `mutation($id:ID!,$at:DateTime!,$v:Int){ ${n.schedulePublish}(_id:$id, at:$at, version:$v){ id } }`,
        { id: recordId, at: new Date(publishAt).toISOString(), v: version },
      );
      setPublishAt('');
      await loadPending();
    });
  const unpublish = () =>
    act('Unpublished', () => gql(project.id, `mutation($id:ID!){ ${n.unpublish}(_id:$id){ _id } }`, { id: recordId }));
  const remove = async () => {
    if (!confirm(`Delete this ${model.name || model.key}? This cannot be undone.`)) return;
    await act('Deleted', async () => {
      await gql(project.id, `mutation($id:ID!){ ${n.remove}(_id:$id) }`, { id: recordId });
      navigate(modelPath(project.id, model.key), true);
    });
  };

  const ctx: FormCtx | null = room && {
    project,
    models: config.models ?? [],
    readOnly: !writer,
    doc: room.doc,
    awareness: room.provider.awareness,
    focusOf: (key) => peers.filter((p) => p.focus === key),
    onFocus: (key) => room.provider.awareness.setLocalStateField('focus', key),
  };
  const values = room ? (room.content.toJSON() as Record<string, unknown>) : {};
  const set = (key: string, v: unknown) =>
    room!.doc.transact(() => (v === null || v === undefined ? room!.content.delete(key) : room!.content.set(key, v)));

  return (
    <section class="editor">
      <div class="bar">
        <h1>{record ? recordTitle(model, { ...record, content: { ...record.content, ...values } }) : '…'}</h1>
        {record && <StatusBadge r={record} />}
        {pending.length > 0 && (
          <span
            class="badge changed"
            title={pending.map((s) => `${s.action} ${new Date(s.at).toLocaleString()}`).join('\n')}
          >
            Scheduled
          </span>
        )}
        <span class="grow" />
        <ul class="avatars" aria-label="Also editing">
          {peers.map((p) => (
            <li key={p.clientId} style={{ background: p.color }} title={p.name} aria-label={p.name}>
              {p.name.slice(0, 1).toUpperCase()}
            </li>
          ))}
        </ul>
        {locales.length > 0 && (
          <label class="inline-label">
            Locale
            <select aria-label="Locale" value={locale ?? ''} onChange={(e) => setLocale(e.currentTarget.value || null)}>
              <option value="">Default</option>
              {locales.map((l) => (
                <option key={l} value={l}>
                  {l}
                </option>
              ))}
            </select>
          </label>
        )}
      </div>
      {!writer && (
        <p class="notice" role="status">
          You have read-only access: you see live edits but cannot change this record.
        </p>
      )}
      <div role="tablist" class="tabs" aria-label="Record">
        {!placements.some((p) => p.hideContentTab) && (
          <button type="button" role="tab" aria-selected={tab === 'content'} onClick={() => setTab('content')}>
            Content
          </button>
        )}
        <button type="button" role="tab" aria-selected={tab === 'history'} onClick={() => setTab('history')}>
          History
        </button>
        {placements.map((p, i) => (
          <button
            // biome-ignore lint/suspicious/noArrayIndexKey: placements are the config's fixed list; the tab ids name them by position too
            key={i}
            type="button"
            role="tab"
            aria-selected={tab === `placement-${i}`}
            onClick={() => setTab(`placement-${i}`)}
          >
            {p.tabName ?? `Panel ${i + 1}`}
          </button>
        ))}
      </div>
      <ErrorLine error={error} />
      <NoticeLine notice={notice} />
      {tab === 'content' &&
        (ctx && synced ? (
          <div class="form" aria-busy={!synced}>
            {model.fields.map((f) => {
              const v = room!.content.get(f.key);
              return (
                <Field
                  key={f.key}
                  field={f}
                  ctx={ctx}
                  value={values[f.key]}
                  text={v instanceof Y.Text && TEXT_TYPES.has(f.type) ? v : undefined}
                  onChange={(x) => set(f.key, x)}
                />
              );
            })}
          </div>
        ) : (
          <p class="muted" aria-busy="true">
            Joining the record’s room…
          </p>
        ))}
      {tab === 'history' && record && (
        <History
          project={project}
          model={model}
          recordId={recordId}
          current={{ ...record.content, ...values }}
          canWrite={writer}
          onRestored={() => void reload()}
        />
      )}
      {placements.map(
        (p, i) =>
          tab === `placement-${i}` && (
            <iframe
              // biome-ignore lint/suspicious/noArrayIndexKey: placements are the config's fixed list; the tab ids name them by position too
              key={i}
              class="placement"
              title={p.tabName ?? `Panel ${i + 1}`}
              sandbox="allow-scripts allow-forms allow-popups allow-same-origin"
              src={`${p.url}${p.url.includes('?') ? '&' : '?'}${new URLSearchParams({ projectId: project.id, modelKey: model.key, recordId, locale: locale ?? '' })}`}
            />
          ),
      )}
      {writer && (
        <div class="savebar">
          {model.versioned === false ? (
            <span class="muted" role="status">
              {saveState === 'pending'
                ? 'Autosaving…'
                : `Saved${record ? ` · ${new Date(record._updatedAt).toLocaleTimeString()}` : ''}`}
            </span>
          ) : (
            <button type="button" disabled={busy || !room} onClick={() => void act('Draft saved', saveDraft)}>
              Save draft
            </button>
          )}
          <button type="button" disabled={busy || !room} onClick={() => void publish()}>
            Publish
          </button>
          <label class="inline-label">
            Publish at
            <input
              type="datetime-local"
              aria-label="Publish at"
              value={publishAt}
              onInput={(e) => setPublishAt(e.currentTarget.value)}
            />
          </label>
          <button
            type="button"
            class="ghost"
            disabled={busy || !room || !publishAt}
            onClick={() => void schedulePublish()}
          >
            Schedule publish
          </button>
          {record?._publishedAt && model.versioned !== false && (
            <button type="button" class="ghost" disabled={busy} onClick={() => void unpublish()}>
              Unpublish
            </button>
          )}
          {model.versioned !== false && room && (
            <AddToRelease project={project} modelKey={model.key} recordId={recordId} before={saveDraft} />
          )}
          <span class="grow" />
          <button type="button" class="danger" disabled={busy} onClick={() => void remove()}>
            Delete
          </button>
        </div>
      )}
    </section>
  );
}
