import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { labelOf, type FieldType } from '../models.ts';
import { bindText } from './text-binding.ts';
import { lazy } from '../lazy.tsx';
import type { FieldProps } from './field-props.ts';
import { Choice, RecordPicker } from './pickers.tsx';
import { Asset } from './asset-input.tsx';

const RichText = lazy(() => import('./richtext.tsx').then((m) => m.RichText));

function TextInput({ field, value, onChange, text, ctx, id }: FieldProps) {
  const ref = useRef<HTMLInputElement & HTMLTextAreaElement>(null);
  // Bound before the browser paints: with useEffect the field showed empty for a frame (longer on
  // a busy machine) before the room's text arrived in it.
  useLayoutEffect(() => (text && ref.current ? bindText(ref.current, text) : undefined), [text]);
  const area = field.config?.widget === 'textarea';
  const common = {
    id,
    ref,
    readOnly: ctx.readOnly,
    placeholder: field.placeholder ?? '',
    required: field.required,
    onFocus: () => ctx.onFocus?.(field.key),
    onBlur: () => ctx.onFocus?.(null),
    ...(text
      ? {}
      : {
          value: typeof value === 'string' ? value : '',
          onInput: (e: Event) => onChange((e.currentTarget as HTMLInputElement).value),
        }),
  };
  return area ? <textarea rows={5} {...common} /> : <input type="text" {...common} />;
}

function toLocalInput(v: unknown): string {
  if (typeof v !== 'string' || !v) return '';
  const d = new Date(v);
  if (Number.isNaN(d.getTime())) return '';
  return new Date(d.getTime() - d.getTimezoneOffset() * 60000).toISOString().slice(0, 16);
}

/** `label` names a JSON box that has no <label for> of its own (list items, blocks). */
function JsonInput({
  value,
  onChange,
  ctx,
  id,
  rows = 6,
  label,
}: Omit<FieldProps, 'field' | 'text'> & { rows?: number; label?: string }) {
  const [raw, setRaw] = useState(value === undefined || value === null ? '' : JSON.stringify(value, null, 2));
  const [error, setError] = useState('');
  useEffect(() => {
    try {
      if (JSON.stringify(JSON.parse(raw || 'null')) === JSON.stringify(value ?? null)) return;
    } catch {
      /* keep what is being typed */ return;
    }
    setRaw(value === undefined || value === null ? '' : JSON.stringify(value, null, 2));
  }, [JSON.stringify(value ?? null)]);
  return (
    <>
      <textarea
        id={id}
        class="mono"
        rows={rows}
        readOnly={ctx.readOnly}
        value={raw}
        aria-invalid={!!error}
        aria-label={label}
        onInput={(e) => {
          const t = e.currentTarget.value;
          setRaw(t);
          try {
            const parsed = t.trim() ? JSON.parse(t) : null;
            setError('');
            onChange(parsed);
          } catch {
            setError('Not valid JSON yet');
          }
        }}
      />
      {error && <span class="error">{error}</span>}
    </>
  );
}

function ListInput(p: FieldProps) {
  const { field, value, onChange, ctx, id } = p;
  const items = Array.isArray(value) ? value : [];
  const inner: FieldType = field.itemType ?? field.config?.itemType ?? 'json';
  const set = (i: number, v: unknown) => onChange(items.map((x, j) => (j === i ? v : x)));
  const move = (i: number, d: number) => {
    const next = [...items];
    const [x] = next.splice(i, 1);
    next.splice(i + d, 0, x);
    onChange(next);
  };
  return (
    <div class="list" id={id}>
      <ol>
        {items.map((item, i) => (
          // biome-ignore lint/suspicious/noArrayIndexKey: list items have no identity of their own; the position is what is edited
          <li key={i}>
            {inner === 'text' ? (
              <input
                type="text"
                aria-label={`${labelOf(field)} item ${i + 1}`}
                readOnly={ctx.readOnly}
                value={String(item ?? '')}
                onInput={(e) => set(i, e.currentTarget.value)}
              />
            ) : inner === 'number' ? (
              <input
                type="number"
                aria-label={`${labelOf(field)} item ${i + 1}`}
                readOnly={ctx.readOnly}
                value={String(item ?? '')}
                onInput={(e) => set(i, Number(e.currentTarget.value))}
              />
            ) : (
              <JsonInput
                id={`${id}-${i}`}
                rows={3}
                label={`${labelOf(field)} item ${i + 1} (JSON)`}
                value={item}
                onChange={(v) => set(i, v)}
                ctx={ctx}
              />
            )}
            {!ctx.readOnly && (
              <span class="row-actions">
                <button type="button" class="ghost" aria-label="Move up" disabled={i === 0} onClick={() => move(i, -1)}>
                  ↑
                </button>
                <button
                  type="button"
                  class="ghost"
                  aria-label="Move down"
                  disabled={i === items.length - 1}
                  onClick={() => move(i, 1)}
                >
                  ↓
                </button>
                <button
                  type="button"
                  class="ghost"
                  aria-label="Remove item"
                  onClick={() => onChange(items.filter((_, j) => j !== i))}
                >
                  ✕
                </button>
              </span>
            )}
          </li>
        ))}
      </ol>
      {!ctx.readOnly && (
        <button
          type="button"
          class="ghost"
          onClick={() => onChange([...items, inner === 'text' ? '' : inner === 'number' ? 0 : {}])}
        >
          Add item
        </button>
      )}
    </div>
  );
}

/** Flexible blocks: `{ type, data }` each (the GraphQL BlockInput), `data` edited as JSON. */
function Blocks(p: FieldProps) {
  const { field, value, onChange, ctx, id } = p;
  const blocks = (Array.isArray(value) ? value : []) as Record<string, unknown>[];
  const [type, setType] = useState('paragraph');
  return (
    <div class="blocks" id={id}>
      {blocks.map((b, i) => (
        // biome-ignore lint/suspicious/noArrayIndexKey: blocks have no id; the position is what is edited (moves re-render the list)
        <div class="block" key={i}>
          <div class="bar">
            <strong>{String(b.type)}</strong>
            <span class="grow" />
            {!ctx.readOnly && (
              <>
                <button
                  type="button"
                  class="ghost"
                  aria-label="Move block up"
                  disabled={i === 0}
                  onClick={() => {
                    const n = [...blocks];
                    n.splice(i - 1, 0, n.splice(i, 1)[0]!);
                    onChange(n);
                  }}
                >
                  ↑
                </button>
                <button
                  type="button"
                  class="ghost"
                  aria-label="Remove block"
                  onClick={() => onChange(blocks.filter((_, j) => j !== i))}
                >
                  ✕
                </button>
              </>
            )}
          </div>
          <JsonInput
            id={`${id}-${i}`}
            rows={3}
            ctx={ctx}
            label={`${labelOf(field)} block ${i + 1}: ${String(b.type)} (JSON)`}
            value={b.data ?? null}
            onChange={(v) =>
              onChange(
                blocks.map((x, j) => (j === i ? (v === null ? { type: x.type } : { type: x.type, data: v }) : x)),
              )
            }
          />
        </div>
      ))}
      {!ctx.readOnly && (
        <div class="bar">
          <label>
            Block type
            <input type="text" value={type} onInput={(e) => setType(e.currentTarget.value)} />
          </label>
          <button
            type="button"
            class="ghost"
            onClick={() => type.trim() && onChange([...blocks, { type: type.trim() }])}
          >
            Add {labelOf(field)} block
          </button>
        </div>
      )}
    </div>
  );
}

function Inline(p: FieldProps) {
  const inline = p.ctx.models.find((m) => m.key === p.field.config?.modelKey);
  const obj = (p.value && typeof p.value === 'object' ? p.value : {}) as Record<string, unknown>;
  if (!inline)
    return <JsonInput id={p.id} label={labelOf(p.field)} value={p.value} onChange={p.onChange} ctx={p.ctx} />;
  return (
    <fieldset class="inline" id={p.id}>
      <legend>{inline.name || inline.key}</legend>
      {inline.fields.map((f) => (
        <Field
          key={f.key}
          field={f}
          id={`${p.id}-${f.key}`}
          ctx={p.ctx}
          value={obj[f.key]}
          onChange={(v) => p.onChange({ ...obj, [f.key]: v })}
        />
      ))}
    </fieldset>
  );
}

function Widget(p: FieldProps) {
  const { field, value, onChange, ctx, id } = p;
  switch (field.type) {
    case 'text':
      return <TextInput {...p} />;
    case 'richtext':
      return <RichText {...p} />;
    case 'number':
      return (
        <input
          id={id}
          type="number"
          step="any"
          readOnly={ctx.readOnly}
          required={field.required}
          value={typeof value === 'number' ? String(value) : ''}
          onInput={(e) => onChange(e.currentTarget.value === '' ? null : Number(e.currentTarget.value))}
        />
      );
    case 'boolean':
      return (
        <input
          id={id}
          type="checkbox"
          disabled={ctx.readOnly}
          checked={value === true}
          onChange={(e) => onChange(e.currentTarget.checked)}
        />
      );
    case 'date':
      return (
        <input
          id={id}
          type="datetime-local"
          readOnly={ctx.readOnly}
          required={field.required}
          value={toLocalInput(value)}
          onInput={(e) => onChange(e.currentTarget.value ? new Date(e.currentTarget.value).toISOString() : null)}
        />
      );
    case 'enum':
      return <Choice {...p} options={field.config?.options ?? []} />;
    case 'select':
    case 'reference':
      return <RecordPicker {...p} />;
    case 'image':
    case 'video':
    case 'file':
      return <Asset {...p} />;
    case 'list':
      return <ListInput {...p} />;
    case 'flexible':
      return <Blocks {...p} />;
    case 'model':
      return <Inline {...p} />;
    default:
      return <JsonInput id={id} value={value} onChange={onChange} ctx={ctx} />;
  }
}

/** One labelled field of the generated form, with the avatars of who is editing it. */
export function Field(p: Omit<FieldProps, 'id'> & { id?: string }) {
  const id = p.id ?? `f-${p.field.key}`;
  const editors = p.ctx.focusOf?.(p.field.key) ?? [];
  const grouped =
    ['richtext', 'list', 'flexible', 'model', 'image', 'video', 'file'].includes(p.field.type) ||
    (p.field.type === 'enum' && p.field.config?.multiple);
  return (
    <div class={`field type-${p.field.type}`} data-field={p.field.key}>
      <label for={grouped ? undefined : id} id={`${id}-label`}>
        {labelOf(p.field)}
        {p.field.required && (
          <span role="img" aria-label="required">
            {' '}
            *
          </span>
        )}
        {editors.map((u) => (
          <span
            key={u.name}
            role="img"
            class="dot"
            style={{ background: u.color }}
            title={`${u.name} is editing`}
            aria-label={`${u.name} is editing`}
          />
        ))}
      </label>
      <Widget {...p} id={id} />
    </div>
  );
}
