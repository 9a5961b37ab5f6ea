import { createSocket, type Socket } from 'node:dgram';

/**
 * A small authoritative DNS server on UDP (RFC 1035 wire format) for tests: answers TXT and
 * CNAME queries from the maps it is given (they may change while it runs), NXDOMAIN otherwise.
 * Point the service at it with SVC_DNS_SERVER.
 */
export interface DnsRecords {
  txt: Map<string, string>;
  cname: Map<string, string>;
}

const TXT = 16;
const CNAME = 5;

function encodeName(name: string): Buffer {
  const parts = name
    .replace(/\.$/, '')
    .split('.')
    .filter(Boolean)
    .map((l) => Buffer.concat([Buffer.from([Buffer.byteLength(l)]), Buffer.from(l)]));
  return Buffer.concat([...parts, Buffer.from([0])]);
}

export async function startDnsServer(records: DnsRecords): Promise<{ address: string; close(): void }> {
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
    let data: Buffer | undefined;
    if (qtype === TXT && records.txt.has(name)) {
      const v = records.txt.get(name)!;
      data = Buffer.concat([Buffer.from([Buffer.byteLength(v)]), Buffer.from(v)]);
    } else if (qtype === CNAME && records.cname.has(name)) {
      data = encodeName(records.cname.get(name)!);
    }
    const header = Buffer.alloc(12);
    msg.copy(header, 0, 0, 2);
    header.writeUInt16BE(data === undefined ? 0x8583 : 0x8580, 2); // response, authoritative, NXDOMAIN or no error
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(data === undefined ? 0 : 1, 6);
    const parts: Buffer[] = [header, msg.subarray(12, qEnd)];
    if (data !== undefined) {
      const rr = Buffer.alloc(12);
      rr.writeUInt16BE(0xc00c, 0); // the name of the question
      rr.writeUInt16BE(qtype, 2);
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
