import { DeliverPolicy, type JetStreamClient, type JsMsg } from 'nats';

/**
 * Reads a JetStream stream's messages on `filter` from `from` (ms since the epoch) in order, in
 * batches, through a consumer of its own that is removed afterwards. Used where a plain
 * subscription missed messages: an SSE client resuming with Last-Event-ID (NatsTransport.replay)
 * and a gateway's narrow listener after a link drop (NarrowListener).
 * `each` returns false to stop; more than `maxPending` messages to read stops before reading.
 * Resolves true when everything pending was read.
 */
export async function readBack(
  js: JetStreamClient,
  stream: string,
  filter: string,
  from: number,
  each: (m: JsMsg) => boolean | void,
  maxPending = Infinity,
): Promise<boolean> {
  const consumer = await js.consumers.get(stream, {
    filterSubjects: filter,
    deliver_policy: DeliverPolicy.StartTime,
    opt_start_time: new Date(from).toISOString(),
  });
  try {
    let pending = (await consumer.info(true)).num_pending;
    if (pending > maxPending) return false;
    while (pending > 0) {
      const batch = await consumer.fetch({ max_messages: Math.min(1_000, pending), expires: 2_000 });
      let got = 0;
      for await (const m of batch) {
        got++;
        pending = m.info.pending;
        if (each(m) === false) return false;
      }
      if (got === 0) break;
    }
    return true;
  } finally {
    await consumer.delete().catch(() => {});
  }
}
