import { useState } from 'preact/hooks';
import { canEdit, gql, type ProjectRef } from '../api.ts';
import { names, type ModelDef, type ProjectConfig } from '../models.ts';
import { modelPath, navigate } from '../router.ts';
import { ErrorLine } from '../screen-parts.tsx';
import { Field } from './fields.tsx';
import type { FormCtx } from './field-props.ts';

/** The generated form without a room: fill it in, then create the record. */
export function NewRecord({ project, config, model }: { project: ProjectRef; config: ProjectConfig; model: ModelDef }) {
  const [values, setValues] = useState<Record<string, unknown>>(() =>
    Object.fromEntries(
      model.fields.flatMap((f) =>
        f.type === 'enum' && f.config?.default !== undefined ? [[f.key, f.config.default]] : [],
      ),
    ),
  );
  const [naturalKey, setNaturalKey] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const ctx: FormCtx = { project, models: config.models ?? [], readOnly: !canEdit(project.role) };
  const n = names(model.key);
  const create = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError('');
    try {
      const data = Object.fromEntries(
        Object.entries(values).filter(([, v]) => v !== null && v !== undefined && v !== ''),
      );
      const d = await gql(
        project.id,
        `mutation($nk:String,$data:${n.input}!){ r: ${n.create}(naturalKey:$nk, data:$data){ _id } }`,
        { nk: naturalKey.trim() || null, data },
      );
      navigate(`${modelPath(project.id, model.key)}/r/${d.r._id}`, true);
    } catch (err) {
      setError((err as Error).message);
      setBusy(false);
    }
  };
  return (
    <form class="editor" onSubmit={create}>
      <div class="bar">
        <h1>New {model.name || model.key}</h1>
      </div>
      <div class="field">
        <label for="f-naturalKey">
          Natural key <span class="muted">(optional, unique)</span>
        </label>
        <input id="f-naturalKey" type="text" value={naturalKey} onInput={(e) => setNaturalKey(e.currentTarget.value)} />
      </div>
      {model.fields.map((f) => (
        <Field
          key={f.key}
          field={f}
          ctx={ctx}
          value={values[f.key]}
          onChange={(v) => setValues((x) => ({ ...x, [f.key]: v }))}
        />
      ))}
      <ErrorLine error={error} />
      <div class="savebar">
        <button type="submit" disabled={busy || ctx.readOnly}>
          Create
        </button>
        <button type="button" class="ghost" onClick={() => navigate(modelPath(project.id, model.key))}>
          Cancel
        </button>
      </div>
    </form>
  );
}
