import type * as Y from 'yjs';
import type { Awareness } from 'y-protocols/awareness';
import type { ProjectRef } from '../api.ts';
import type { FieldDef, ModelDef } from '../models.ts';

/*
 * The props of the record form's widgets, apart from fields.tsx so that a lazily loaded widget
 * (richtext.tsx) can name them without importing the form that loads it (no import cycle).
 */

/** What every widget needs besides its value: the project, the models, and edit rights. */
export interface FormCtx {
  project: ProjectRef;
  models: ModelDef[];
  readOnly: boolean;
  /** Collaboration: the room's document and awareness (absent on the "new record" form). */
  doc?: Y.Doc;
  awareness?: Awareness;
  /** Who edits which field (awareness `focus`), for the presence dots beside labels. */
  focusOf?: (key: string) => { name: string; color: string }[];
  onFocus?: (key: string | null) => void;
}

export interface FieldProps {
  field: FieldDef;
  value: unknown;
  onChange: (v: unknown) => void;
  /** The Y.Text of a text or richtext field in a room. */
  text?: Y.Text | undefined;
  ctx: FormCtx;
  id: string;
}
