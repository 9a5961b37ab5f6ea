/** Content model shapes shared by the config loader, the store and the schema generator. */
export const FIELD_TYPES = [
  'text',
  'richtext',
  'flexible',
  'number',
  'boolean',
  'date',
  'enum',
  'select',
  'reference',
  'model',
  'image',
  'video',
  'file',
  'list',
  'json',
] as const;

export type FieldType = (typeof FIELD_TYPES)[number];

export const PRINCIPALS = ['public', 'self', 'scoped', 'service', 'admin'] as const;
export type Principal = (typeof PRINCIPALS)[number];

export interface EnumOption {
  value: string;
  label: string;
}

export interface FieldConfig {
  widget?: string;
  options?: EnumOption[];
  multiple?: boolean;
  default?: unknown;
  optionModelKey?: string;
  /** `reference`: the model(s) a reference may point to. */
  modelKey?: string;
  modelKeys?: string[];
  /** `model`: the inline model whose shape the value has. */
  itemType?: FieldType;
  [extra: string]: unknown;
}

export interface FieldDef {
  key: string;
  type: FieldType;
  label?: string;
  required?: boolean;
  placeholder?: string;
  queryable?: boolean;
  access?: { read?: Principal[]; write?: Principal[] };
  /** `list`: the type of each item. */
  itemType?: FieldType;
  config?: FieldConfig;
  [extra: string]: unknown;
}

export interface ModelDef {
  key: string;
  name: string;
  fields: FieldDef[];
  lookups?: { keyBy: string[] }[];
  /** Whose records a reader sees: `self` = a customer sees the records they own. Omitted: everyone. */
  access?: { read?: Principal[] };
  /** CONTRACT §3: versioned models have draft and published versions. Default true. */
  versioned?: boolean;
  [extra: string]: unknown;
}

/**
 * A config entry before validation, and one validation or apply problem: where it is, and a
 * sentence. Here, below config/ and the capabilities it applies to (identity), so both speak
 * them without importing each other.
 */
export type Obj = Record<string, unknown>;
export interface ConfigError {
  path: string;
  message: string;
}
