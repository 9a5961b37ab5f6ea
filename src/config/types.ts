/**
 * The project configuration file (`ApplyConfigInput`, spec "Project configuration file").
 * These shapes give editors autocompletion through the `svc/config` helpers; validation
 * (validate.ts) never trusts them, because a config may be JSON or untyped JS.
 * Every object accepts extra fields: the spec passes unknown fields through.
 */
import type { ConfigError, EnumOption, FieldType, Principal } from '../projects/types.ts';

export type { ConfigError, EnumOption, FieldType, Principal };

type Extra = { [extra: string]: unknown };

export interface FieldAccess extends Extra {
  read?: Principal[];
  /** Allow-list of principals; must be non-empty when present. Omitted: any authenticated principal. */
  write?: Principal[];
}

export interface FieldCommon extends Extra {
  key: string;
  label?: string;
  required?: boolean;
  placeholder?: string;
  /** Allows `where` and `orderBy` on the field. */
  queryable?: boolean;
  access?: FieldAccess;
}

export interface TextFieldConfig extends Extra {
  /** `'textarea'` makes the field multi-line. */
  widget?: 'textarea' | (string & {});
}
export interface EnumFieldConfig extends Extra {
  options: EnumOption[];
  multiple?: boolean;
  default?: string | string[];
}
export interface SelectFieldConfig extends Extra {
  /** The model whose records are the choices. */
  optionModelKey: string;
  multiple?: boolean;
}
export interface ReferenceFieldConfig extends Extra {
  modelKey?: string;
  modelKeys?: string[];
}

export interface TextField extends FieldCommon {
  type: 'text';
  config?: TextFieldConfig;
}
export interface RichtextField extends FieldCommon {
  type: 'richtext';
  config?: Extra;
}
export interface FlexibleField extends FieldCommon {
  type: 'flexible';
  config?: Extra;
}
export interface NumberField extends FieldCommon {
  type: 'number';
  config?: Extra;
}
export interface BooleanField extends FieldCommon {
  type: 'boolean';
  config?: Extra;
}
export interface DateField extends FieldCommon {
  type: 'date';
  config?: Extra;
}
export interface EnumField extends FieldCommon {
  type: 'enum';
  config: EnumFieldConfig;
}
export interface SelectField extends FieldCommon {
  type: 'select';
  config: SelectFieldConfig;
}
export interface ReferenceField extends FieldCommon {
  type: 'reference';
  config?: ReferenceFieldConfig;
}
export interface ModelField extends FieldCommon {
  type: 'model';
  config?: Extra & { modelKey?: string };
}
export interface ImageField extends FieldCommon {
  type: 'image';
  config?: Extra;
}
export interface VideoField extends FieldCommon {
  type: 'video';
  config?: Extra;
}
export interface FileField extends FieldCommon {
  type: 'file';
  config?: Extra;
}
export interface ListField extends FieldCommon {
  type: 'list';
  itemType?: FieldType;
  config?: Extra;
}
export interface JsonField extends FieldCommon {
  type: 'json';
  config?: Extra;
}

export type FieldInput =
  | TextField
  | RichtextField
  | FlexibleField
  | NumberField
  | BooleanField
  | DateField
  | EnumField
  | SelectField
  | ReferenceField
  | ModelField
  | ImageField
  | VideoField
  | FileField
  | ListField
  | JsonField;

export interface ModelInput extends Extra {
  key: string;
  name: string;
  fields: FieldInput[];
  /** Lets records be fetched by these field keys (for example a slug). */
  lookups?: { keyBy: string[] }[];
  /** CONTRACT §3: draft and published versions. Default true. */
  versioned?: boolean;
}

export interface OperationInput extends Extra {
  key: string;
  name?: string;
  description?: string;
  /** Relative path (joined to `operationBaseUrl`) or full URL. */
  endpoint: string;
}

export type HookEvent = 'RECORD_CREATED' | 'RECORD_UPDATED' | 'RECORD_DELETED';
export const HOOK_EVENTS: readonly HookEvent[] = ['RECORD_CREATED', 'RECORD_UPDATED', 'RECORD_DELETED'];

export interface HookInput extends Extra {
  key: string;
  name?: string;
  event: HookEvent;
  operationKey: string;
  filter?: Extra & { modelKey?: string };
}

export interface PlacementInput extends Extra {
  /** For example `main-editor`. */
  type: 'main-editor' | (string & {});
  url: string;
  modelKeys?: string[];
  tabName?: string;
  hideContentTab?: boolean;
}

export interface ScheduleInput extends Extra {
  /** Optional stable identity; defaults to the operation key (plus `#n` for repeats). */
  key?: string;
  operationKey: string;
  /** Five fields: minute hour day-of-month month day-of-week. */
  cron: string;
  /** IANA zone name, for example `Europe/Berlin`. Default `UTC`. */
  timezone?: string;
  enabled?: boolean;
}

export interface SegmentRule extends Extra {
  type: 'condition' | (string & {});
  left?: { type: 'field'; path: string } & Extra;
  operator?: 'greater_than' | (string & {});
  right?: { type: 'literal'; value: unknown } & Extra;
}

export interface SegmentInput extends Extra {
  key: string;
  name: string;
  description?: string;
  isActive?: boolean;
  rules?: SegmentRule | SegmentRule[];
}

export interface AuthProviderInput extends Extra {
  key: string;
  name: string;
  type: 'oauth2' | (string & {});
  config?: Extra;
  enabled?: boolean;
  isDefault?: boolean;
  priority?: number;
}

export interface RelyingPartyInput extends Extra {
  /** Config-declared parties are customer-lane. */
  kind?: 'customer';
  clientId: string;
  name: string;
  redirectUris: string[];
  allowedScopes?: string[];
  loginMethods?: Extra & { password?: boolean; otp?: boolean; disabledProviders?: string[] };
  customDomains?: string[];
  postLoginUrl?: string;
  /** Exact https origins. Omitted: the stored list is kept. `[]` clears it. */
  allowedOrigins?: string[];
}

export interface ApiKeyInput extends Extra {
  name: string;
  keyType: 'public' | 'secret';
  envVar: string;
  /** `["*"]` means full access. */
  scopes?: string[];
  allowedModels?: string[];
  allowedFileTypes?: string[];
  /** Which documents the key may send (docs/documents.md); absent: the project's `documentPolicy`. */
  documents?: 'any' | 'apq' | 'trusted-only';
}

export interface CustomerRoleInput extends Extra {
  key: string;
  name: string;
  permissions: string[];
  isDefault?: boolean;
}

export interface AppMapping extends Extra {
  toModel: string;
  naturalKey?: string;
  fields?: Record<string, string>;
}

export interface AppInput extends Extra {
  /** https URL of the manifest JSON. */
  source: string;
  settings?: Extra;
  mappings?: Extra & {
    sources?: Record<string, AppMapping>;
    sinks?: Record<string, AppMapping>;
    placementFields?: Record<string, { model: string; field: string }>;
  };
}

export interface ProjectSettings extends Extra {
  displayName?: string;
  logoUrl?: string;
  /** Hex colour, for example `#0055ff`. */
  primaryColor?: string;
  fromName?: string;
  replyTo?: string;
  supportEmail?: string;
  appBaseUrl?: string;
  customerWelcomeEmailEnabled?: boolean;
  customerSignupEnabled?: boolean;
  customerPasswordEnabled?: boolean;
  customerOtpEnabled?: boolean;
  /** Document policy of keys that set none (docs/documents.md); default `any`. */
  documentPolicy?: 'any' | 'apq' | 'trusted-only';
  /** Bytes of the APQ store (docs/documents.md); default 1 MiB, at most 16 MiB. */
  apqMaxBytes?: number;
  /** HTTP caching of public reads (docs/graphql.md, "HTTP caching"). */
  cache?: { maxAge?: number; staleWhileRevalidate?: number; purgeUrl?: string };
  /** Days audit log entries are kept (docs/audit.md); default 90. */
  auditRetentionDays?: number;
}

export const SETTINGS_DEFAULTS = {
  customerWelcomeEmailEnabled: true,
  customerSignupEnabled: true,
  customerPasswordEnabled: true,
  customerOtpEnabled: false,
} as const;

export interface ProjectPin extends Extra {
  id: string;
  tenantId: string;
  name?: string;
  /** Omitted: platform settings stay as they are. */
  settings?: ProjectSettings;
}

/** A W3C Design Tokens document: nested groups; tokens carry `$value` and `$type`. */
export interface DesignTokenGroup {
  [name: string]: unknown;
}

export interface ApplyConfigInput extends Extra {
  key: string;
  name: string;
  configType?: string;
  /** Delete and recreate instead of reconciling. */
  force?: boolean;
  operationBaseUrl?: string;
  project?: ProjectPin;
  models?: ModelInput[];
  operations?: OperationInput[];
  segments?: SegmentInput[];
  schedules?: ScheduleInput[];
  hooks?: HookInput[];
  authProviders?: AuthProviderInput[];
  relyingParties?: RelyingPartyInput[];
  placements?: PlacementInput[];
  apiKeys?: ApiKeyInput[];
  customerRoles?: CustomerRoleInput[];
  apps?: Record<string, AppInput>;
  designTokens?: DesignTokenGroup;
}

/** The collections `svc push` reports counts for, in output order. */
export const COLLECTIONS = [
  'project',
  'models',
  'operations',
  'hooks',
  'schedules',
  'segments',
  'authProviders',
  'relyingParties',
  'placements',
  'apiKeys',
  'customerRoles',
  'apps',
  'designTokens',
  'documents',
] as const;
export type Collection = (typeof COLLECTIONS)[number];
