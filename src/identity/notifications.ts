import type { Sql } from '../store/db.ts';
import { BadUserInput, NotFound } from '../errors.ts';
import { newId } from '../ids.ts';
import type { Identity } from './identity.ts';
import { sendMail } from './mailer.ts';

/**
 * Per-customer notifications and preferences (spec "Notification and preference",
 * `notifications:{customerId}` channel). A server sends one with `sendNotification`; it is
 * stored, announced on the bus after commit as `notification.created` (realtime delivers it as
 * `notification.{type}` on `notifications:{customerId}`), and mailed unless the customer turned
 * mail off or unsubscribed from the `notifications` list. A type the customer disabled is
 * neither stored nor sent.
 */
export interface NotificationView {
  id: string;
  type: string;
  title: string;
  body: string | null;
  data: unknown;
  read: boolean;
  readAt: string | null;
  createdAt: string;
}

export interface Preferences {
  /** Notification types the customer does not want at all. */
  disabledTypes: string[];
  /** Mail a copy of each notification (default true). */
  email: boolean;
}

interface Row {
  id: string;
  type: string;
  title: string;
  body: string | null;
  data: unknown;
  read_at: Date | null;
  created_at: Date;
}

const TYPE_RE = /^[a-z][a-z0-9_.-]{0,63}$/i;
const MAX_DATA = 16 * 1024;
const MAX_PAGE = 100;

const view = (r: Row): NotificationView => ({
  id: r.id,
  type: r.type,
  title: r.title,
  body: r.body,
  data: r.data,
  read: r.read_at !== null,
  readAt: r.read_at?.toISOString() ?? null,
  createdAt: r.created_at.toISOString(),
});

export async function listNotifications(
  sql: Sql,
  projectId: string,
  customerId: string,
  opts: { first?: number | null; unreadOnly?: boolean | null },
): Promise<NotificationView[]> {
  const first = opts.first ?? 20;
  if (!Number.isInteger(first) || first < 1 || first > MAX_PAGE)
    throw new BadUserInput(`first must be from 1 to ${MAX_PAGE}`, { field: 'first' });
  const rows = await sql<Row[]>`
    select id, type, title, body, data, read_at, created_at from notifications
    where project_id = ${projectId} and customer_id = ${customerId} and (${opts.unreadOnly !== true} or read_at is null)
    order by created_at desc, id desc limit ${first}`;
  return rows.map(view);
}

export async function markRead(
  sql: Sql,
  projectId: string,
  customerId: string,
  id: unknown,
): Promise<NotificationView> {
  if (typeof id !== 'string' || id.length > 100)
    throw new BadUserInput('id must be a notification id', { field: 'id' });
  const [row] = await sql<Row[]>`
    update notifications set read_at = coalesce(read_at, now())
    where id = ${id} and project_id = ${projectId} and customer_id = ${customerId}
    returning id, type, title, body, data, read_at, created_at`;
  // Another customer's notification is as absent as a missing one.
  if (!row) throw new NotFound(`No notification with id "${id}"`);
  return view(row);
}

export async function preferencesOf(sql: Sql, projectId: string, customerId: string): Promise<Preferences> {
  const [row] = await sql<{ preferences: Partial<Preferences> }[]>`
    select preferences from notification_preferences where project_id = ${projectId} and customer_id = ${customerId}`;
  const p = row?.preferences ?? {};
  return { disabledTypes: Array.isArray(p.disabledTypes) ? p.disabledTypes : [], email: p.email !== false };
}

export async function updatePreferences(
  sql: Sql,
  projectId: string,
  customerId: string,
  patch: { disabledTypes?: unknown; email?: unknown },
): Promise<Preferences> {
  const current = await preferencesOf(sql, projectId, customerId);
  if (patch.disabledTypes !== undefined && patch.disabledTypes !== null) {
    if (
      !Array.isArray(patch.disabledTypes) ||
      patch.disabledTypes.length > 100 ||
      !patch.disabledTypes.every((t) => typeof t === 'string' && TYPE_RE.test(t))
    ) {
      throw new BadUserInput('disabledTypes must be up to 100 notification types', { field: 'disabledTypes' });
    }
    current.disabledTypes = [...new Set(patch.disabledTypes as string[])];
  }
  if (patch.email !== undefined && patch.email !== null) current.email = patch.email === true;
  await sql`insert into notification_preferences (project_id, customer_id, preferences) values (${projectId}, ${customerId}, ${sql.json(current as never)})
            on conflict (project_id, customer_id) do update set preferences = excluded.preferences, updated_at = now()`;
  return current;
}

/** Stores, announces and mails one notification; null when the customer disabled its type. */
export async function sendNotification(
  id: Identity,
  projectId: string,
  input: { customerId: unknown; type: unknown; title: unknown; body?: unknown; data?: unknown },
  project: { settings: Record<string, unknown> },
): Promise<NotificationView | null> {
  if (typeof input.type !== 'string' || !TYPE_RE.test(input.type))
    throw new BadUserInput('type must be a word such as order.shipped', { field: 'type' });
  if (typeof input.title !== 'string' || input.title.trim() === '' || input.title.length > 500)
    throw new BadUserInput('title must be 1 to 500 characters', { field: 'title' });
  if (input.body !== undefined && input.body !== null && (typeof input.body !== 'string' || input.body.length > 10_000))
    throw new BadUserInput('body must be at most 10,000 characters', { field: 'body' });
  if (input.data !== undefined && input.data !== null && JSON.stringify(input.data).length > MAX_DATA)
    throw new BadUserInput(`data must be at most ${MAX_DATA} bytes of JSON`, { field: 'data' });
  if (typeof input.customerId !== 'string' || input.customerId.length > 100)
    throw new BadUserInput('customerId must be a customer id', { field: 'customerId' });
  const [customer] = await id.sql<
    { email: string }[]
  >`select email from customers where id = ${input.customerId} and project_id = ${projectId} and disabled_at is null`;
  if (!customer) throw new NotFound(`No customer with id "${input.customerId}"`);
  const prefs = await preferencesOf(id.sql, projectId, input.customerId);
  if (prefs.disabledTypes.includes(input.type)) return null;
  const [row] = await id.sql<Row[]>`
    insert into notifications (id, project_id, customer_id, type, title, body, data)
    values (${newId('ntf')}, ${projectId}, ${input.customerId}, ${input.type}, ${input.title}, ${(input.body as string | undefined) ?? null},
            ${input.data === undefined || input.data === null ? null : id.sql.json(input.data as never)})
    returning id, type, title, body, data, read_at, created_at`;
  const n = view(row!);
  await id.bus.publish({
    type: 'notification.created',
    projectId,
    customerId: input.customerId,
    kind: n.type,
    data: { id: n.id, type: n.type, title: n.title, body: n.body, data: n.data, createdAt: n.createdAt },
  });
  if (prefs.email) {
    await sendMail(id.mail, {
      projectId,
      to: customer.email,
      list: 'notifications',
      subject: n.title,
      text: n.body ?? n.title,
      fromName: typeof project.settings.fromName === 'string' ? project.settings.fromName : undefined,
    }).catch((err) => console.error('notification mail failed:', (err as Error).message));
  }
  return n;
}
