import { createSocket, type Socket } from 'node:dgram';

/** A tiny UDP DNS server answering TXT queries from a map (NXDOMAIN otherwise). */
export async function startDnsServer(txt: Map<string, string>): Promise<{ address: string; close(): void }> {
  const sock: Socket = createSocket('udp4');
  sock.on('message', (msg, rinfo) => {
    let off = 12;
    const labels: string[] = [];
    while (msg[off]! !== 0) {
      const len = msg[off]!;
      labels.push(msg.subarray(off + 1, off + 1 + len).toString());
      off += len + 1;
    }
    const qEnd = off + 5;
    const name = labels.join('.').toLowerCase();
    const qtype = msg.readUInt16BE(off + 1);
    const value = qtype === 16 ? txt.get(name) : undefined;
    const header = Buffer.alloc(12);
    msg.copy(header, 0, 0, 2);
    header.writeUInt16BE(value === undefined ? 0x8183 : 0x8180, 2);
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(value === undefined ? 0 : 1, 6);
    const question = msg.subarray(12, qEnd);
    const parts = [header, question];
    if (value !== undefined) {
      const data = Buffer.concat([Buffer.from([value.length]), Buffer.from(value)]);
      const rr = Buffer.alloc(12);
      rr.writeUInt16BE(0xc00c, 0);
      rr.writeUInt16BE(16, 2);
      rr.writeUInt16BE(1, 4);
      rr.writeUInt32BE(60, 6);
      rr.writeUInt16BE(data.length, 10);
      parts.push(rr, data);
    }
    sock.send(Buffer.concat(parts), rinfo.port, rinfo.address);
  });
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
  return { address: `127.0.0.1:${sock.address().port}`, close: () => sock.close() };
}
