import { useEffect, useState } from 'preact/hooks';
import { gql } from '../api.ts';
import { labelOf, names, recordTitle } from '../models.ts';
import type { FieldProps, FormCtx } from './field-props.ts';

/**
 * The record form's choice widgets: an option list (enum, select with fixed options) and the
 * picker of records a select or reference field links to.
 */

/** Records of a model, for select and reference pickers (first 100, searchable by title). */
function useOptions(ctx: FormCtx, modelKeys: string[]): { id: string; label: string }[] {
  const [opts, setOpts] = useState<{ id: string; label: string }[]>([]);
  useEffect(() => {
    let live = true;
    Promise.all(
      modelKeys.map(async (k) => {
        const m = ctx.models.find((x) => x.key === k);
        if (!m) return [];
        const d = await gql(
          ctx.project.id,
          `{ l: ${names(k).list}(first: 100, preview: true) { edges { node { _id naturalKey content } } } }`,
        );
        return d.l.edges.map((e: any) => ({
          id: e.node._id,
          label: `${recordTitle(m, e.node)}${modelKeys.length > 1 ? ` (${m.name || k})` : ''}`,
        }));
      }),
    ).then(
      (all) => live && setOpts(all.flat()),
      () => {},
    );
    return () => void (live = false);
  }, [ctx.project.id, modelKeys.join(',')]);
  return opts;
}

export function Choice({
  field,
  value,
  onChange,
  ctx,
  id,
  options,
}: FieldProps & { options: { value: string; label: string }[] }) {
  if (field.config?.multiple) {
    const set = new Set(Array.isArray(value) ? (value as string[]) : []);
    return (
      <fieldset class="checks" id={id} disabled={ctx.readOnly}>
        <legend class="sr-only">{labelOf(field)}</legend>
        {options.map((o) => (
          <label key={o.value}>
            <input
              type="checkbox"
              checked={set.has(o.value)}
              onChange={(e) => {
                const next = new Set(set);
                if (e.currentTarget.checked) next.add(o.value);
                else next.delete(o.value);
                onChange(options.map((x) => x.value).filter((v) => next.has(v)));
              }}
            />{' '}
            {o.label}
          </label>
        ))}
      </fieldset>
    );
  }
  return (
    <select
      id={id}
      disabled={ctx.readOnly}
      required={field.required}
      value={typeof value === 'string' ? value : ''}
      onChange={(e) => onChange(e.currentTarget.value || null)}
    >
      <option value="">—</option>
      {options.map((o) => (
        <option key={o.value} value={o.value}>
          {o.label}
        </option>
      ))}
    </select>
  );
}

export function RecordPicker(p: FieldProps) {
  const keys =
    p.field.type === 'select'
      ? [p.field.config?.optionModelKey ?? '']
      : (p.field.config?.modelKeys ??
        (p.field.config?.modelKey ? [p.field.config.modelKey] : p.ctx.models.map((m) => m.key)));
  const opts = useOptions(p.ctx, keys.filter(Boolean));
  return <Choice {...p} options={opts.map((o) => ({ value: o.id, label: o.label }))} />;
}
