/**
 * `svc/config`: typed helpers for `svc.config.ts` (CONTRACT §3, docs/config.md).
 * They only shape plain objects; every rule is checked again at push time, so a config
 * written without them (JSON, plain JS) is treated the same.
 */
import { FIELD_TYPES } from '../projects/types.ts';
import type {
  ApplyConfigInput,
  FieldCommon,
  BooleanField,
  DateField,
  EnumField,
  EnumOption,
  FieldInput,
  FieldType,
  FileField,
  FlexibleField,
  ImageField,
  JsonField,
  ListField,
  ModelField,
  ModelInput,
  NumberField,
  ReferenceField,
  RichtextField,
  SelectField,
  TextField,
  VideoField,
} from './types.ts';

export type * from './types.ts';
export { FIELD_TYPES };

/** Identity with types: gives autocompletion for every collection of the config. */
export function defineConfig<const T extends ApplyConfigInput>(config: T): T {
  return config;
}

export function defineModel<const T extends ModelInput>(model: T): T {
  return model;
}

/** What a dedicated helper takes: the common field properties plus the type's config. */
type Args<F extends FieldInput> = FieldCommon & { config?: F['config'] };

/**
 * The generic field helper. `select` is refused here: its `optionModelKey` is easy to get
 * wrong in a loose object, so it must come from the dedicated `select(...)` helper.
 */
export function field<F extends Exclude<FieldInput, SelectField>>(def: F): F {
  if ((def as { type?: unknown }).type === 'select') {
    throw new Error(
      `field "${String(def.key)}": a select field cannot be defined with field({ type: 'select' }); ` +
        `use the select helper instead: select({ key, optionModelKey, multiple })`,
    );
  }
  if (!(FIELD_TYPES as readonly unknown[]).includes(def.type)) {
    throw new Error(
      `field "${String(def.key)}": unknown type "${String(def.type)}"; use one of ${FIELD_TYPES.join(', ')}`,
    );
  }
  return def;
}

/** Single- or multi-line text; `widget: 'textarea'` makes it multi-line. */
export function text(def: Args<TextField> & { widget?: 'textarea' | (string & {}) }): TextField {
  const { widget, config, ...rest } = def;
  if (widget === undefined) return { ...rest, type: 'text', ...(config ? { config } : {}) };
  return { ...rest, type: 'text', config: { ...(config ?? {}), widget } };
}

/** Translatable rich-text prose. */
export function richtext(def: Args<RichtextField>): RichtextField {
  return { ...def, type: 'richtext' };
}

/** Ordered array of structured blocks. */
export function flexible(def: Args<FlexibleField>): FlexibleField {
  return { ...def, type: 'flexible' };
}

export function number(def: Args<NumberField>): NumberField {
  return { ...def, type: 'number' };
}

export function boolean(def: Args<BooleanField>): BooleanField {
  return { ...def, type: 'boolean' };
}

/** Date, optionally with time. */
export function date(def: Args<DateField>): DateField {
  return { ...def, type: 'date' };
}

/** Inline choices (`enum` is a reserved word, hence the name). */
export function enumField(
  def: FieldCommon & {
    options: EnumOption[];
    multiple?: boolean;
    default?: string | string[];
    config?: Record<string, unknown>;
  },
): EnumField {
  const { options, multiple, default: dflt, config, ...rest } = def;
  return {
    ...rest,
    type: 'enum',
    config: {
      ...config,
      options,
      ...(multiple !== undefined ? { multiple } : {}),
      ...(dflt !== undefined ? { default: dflt } : {}),
    },
  };
}

/** Choices drawn from the records of another model. The only way to declare a select field. */
export function select(
  def: FieldCommon & { optionModelKey: string; multiple?: boolean; config?: Record<string, unknown> },
): SelectField {
  const { optionModelKey, multiple, config, ...rest } = def;
  return {
    ...rest,
    type: 'select',
    config: { ...config, optionModelKey, ...(multiple !== undefined ? { multiple } : {}) },
  };
}

/** Reference to another record; `modelKey`/`modelKeys` restrict the target models. */
export function reference(def: Args<ReferenceField>): ReferenceField {
  return { ...def, type: 'reference' };
}

/** Embedded value of an inline model. */
export function model(def: Args<ModelField>): ModelField {
  return { ...def, type: 'model' };
}

export function image(def: Args<ImageField>): ImageField {
  return { ...def, type: 'image' };
}

export function video(def: Args<VideoField>): VideoField {
  return { ...def, type: 'video' };
}

export function file(def: Args<FileField>): FileField {
  return { ...def, type: 'file' };
}

/** Ordered list; `itemType` is the type of each item. */
export function list(def: Args<ListField> & { itemType?: FieldType }): ListField {
  return { ...def, type: 'list' };
}

export function json(def: Args<JsonField>): JsonField {
  return { ...def, type: 'json' };
}
