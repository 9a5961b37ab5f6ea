import { useState } from 'preact/hooks';
import { upload } from '../api.ts';
import { labelOf } from '../models.ts';
import type { FieldProps } from './field-props.ts';

/** The record form's image, video and file fields: upload, preview, alt text, remove. */
const ACCEPT: Record<string, string> = { image: 'image/*', video: 'video/*', file: '' };

export function Asset({ field, value, onChange, ctx, id }: FieldProps) {
  const v = (value && typeof value === 'object' ? value : null) as Record<string, any> | null;
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const kind = field.type as 'image' | 'video' | 'file';
  const onFile = async (file: File | undefined) => {
    if (!file) return;
    setBusy(true);
    setError('');
    try {
      const f = await upload(ctx.project.id, file, kind === 'image' ? v?.alt : undefined);
      const base = { fileId: f.id, url: f.url, mimeType: f.contentType };
      onChange(
        kind === 'image'
          ? { ...base, alt: v?.alt ?? f.alt ?? '', ...(f.width ? { width: f.width, height: f.height } : {}) }
          : kind === 'video'
            ? { ...base, ...(f.width ? { width: f.width, height: f.height } : {}) }
            : { ...base, name: f.filename, size: f.size },
      );
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="asset">
      {v?.url && kind === 'image' && <img src={v.url} alt={v.alt ?? ''} class="preview" />}
      {/* biome-ignore lint/a11y/useMediaCaption: a preview of the editor's own upload, which has no caption file */}
      {v?.url && kind === 'video' && <video src={v.url} controls class="preview" />}
      {v?.url && kind === 'file' && (
        <a href={v.url} target="_blank" rel="noreferrer">
          {v.name ?? v.url}
        </a>
      )}
      {!ctx.readOnly && (
        <input
          id={id}
          type="file"
          accept={ACCEPT[kind]}
          disabled={busy}
          onChange={(e) => void onFile(e.currentTarget.files?.[0])}
          aria-label={`Upload ${labelOf(field)}`}
        />
      )}
      {kind === 'image' && v && (
        <label>
          Alt text
          <input
            type="text"
            readOnly={ctx.readOnly}
            value={v.alt ?? ''}
            onInput={(e) => onChange({ ...v, alt: e.currentTarget.value })}
          />
        </label>
      )}
      {v && !ctx.readOnly && (
        <button type="button" class="ghost" onClick={() => onChange(null)}>
          Remove
        </button>
      )}
      {busy && (
        <span class="muted" aria-live="polite">
          Uploading…
        </span>
      )}
      {error && (
        <span role="alert" class="error">
          {error}
        </span>
      )}
    </div>
  );
}
