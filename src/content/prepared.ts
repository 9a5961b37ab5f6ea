import { literal } from './sql-literal.ts';

/**
 * Statements the WriteCommitter (content/tx.ts) sends as `EXECUTE` of a statement each
 * connection prepares once (`Statement.prepared`): their names on this process's connections and
 * the text of a call.
 */

/**
 * The name a `prepared` statement has on this process's connections: one per text, numbered in
 * the order the texts are first sent (a connection never outlives its process).
 */
const preparedNames = new Map<string, string>();
export function preparedName(text: string): string {
  let name = preparedNames.get(text);
  if (!name) {
    name = `svc_write_stmt_${preparedNames.size + 1}`;
    preparedNames.set(text, name);
  }
  return name;
}

/**
 * A `prepared` statement's call: its name and its parameters as literals, which PostgreSQL
 * coerces to the types the statement gave them. An empty array is `'{}'`: `array[]` has no type
 * of its own to coerce from.
 */
export function executeText(st: { text: string; params: unknown[] }): string {
  return `execute ${preparedName(st.text)}(${st.params.map((v) => (Array.isArray(v) && v.length === 0 ? `'{}'` : literal(v))).join(',')})`;
}

/** SQLSTATE of `EXECUTE` of a statement this connection has not prepared. */
export const UNDEFINED_PSTATEMENT = '26000';
