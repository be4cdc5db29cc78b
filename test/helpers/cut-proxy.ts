import { type AddressInfo, connect, createServer, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a real service, for faults a client must survive: it relays HTTP/1.1
 * as it is, reads each request's Idempotency-Key and each answer's Idempotent-Replayed on the
 * way, and can reset the client's connection once the service has answered (the answer lost
 * after the write was done), or take Idempotent-Replayed off the answers (a service that
 * ignores keys), or close each connection after its answer.
 */
export interface CutProxy {
  url: string;
  /** Each request that passed: its request line and its Idempotency-Key (undefined if none). */
  requests: Array<{ line: string; key: string | undefined }>;
  /** Each answer the service gave: its status, its Idempotent-Replayed, and whether it was cut. */
  answers: Array<{ status: number; replayed: string | undefined; cut: boolean }>;
  /**
   * The next `count` answers (to requests for `path` only, when given) are not relayed: the
   * client's connection is reset instead.
   */
  cut(count: number, path?: string): void;
  close(): Promise<void>;
}

const HEADERS_END = '\r\n\r\n';

/** One HTTP message's head, and how many body bytes follow it (content-length). */
function parseHead(head: string) {
  const [line = '', ...fields] = head.split('\r\n');
  const header = (name: string) =>
    fields
      .find((field) => field.toLowerCase().startsWith(`${name}:`))
      ?.slice(name.length + 1)
      .trim();
  return { line, header, bodyLength: Number(header('content-length') ?? 0) };
}

/**
 * Splits a byte stream into HTTP messages (head plus a content-length body): `onHead` gets each
 * head and returns what to pass on instead (or null to stop relaying); bodies pass as they are.
 */
function messages(onHead: (head: string) => string | null, pass: (data: Buffer) => void) {
  let pending = Buffer.alloc(0);
  let bodyLeft = 0;
  let stopped = false;
  return (chunk: Buffer) => {
    if (stopped) return;
    pending = Buffer.concat([pending, chunk]);
    for (;;) {
      if (bodyLeft > 0) {
        const body = pending.subarray(0, bodyLeft);
        bodyLeft -= body.length;
        pending = pending.subarray(body.length);
        if (body.length > 0) pass(body);
        if (bodyLeft > 0) return;
      }
      const end = pending.indexOf(HEADERS_END);
      if (end === -1) return;
      const head = pending.subarray(0, end).toString('latin1');
      pending = pending.subarray(end + HEADERS_END.length);
      const relayed = onHead(head);
      if (relayed === null) {
        stopped = true;
        return;
      }
      pass(Buffer.from(`${relayed}${HEADERS_END}`, 'latin1'));
      bodyLeft = parseHead(head).bodyLength;
    }
  };
}

export async function cutProxy(
  target: string,
  options: {
    stripReplayed?: boolean;
    /**
     * Each answer says `Connection: close`, so each request has a connection of its own: a
     * write's lost answer is then never taken for a kept-alive connection gone stale (which
     * the client sends again, see src/api/transport.ts).
     */
    closeEach?: boolean;
    /**
     * At a cut, the proxy stops listening before it resets the client's connection, as a
     * service killed between its commit and its answer: every later connection is refused.
     */
    stopOnCut?: boolean;
  } = {},
): Promise<CutProxy> {
  const { hostname, port } = new URL(target);
  const requests: CutProxy['requests'] = [];
  const answers: CutProxy['answers'] = [];
  let cuts = 0;
  let cutPath: string | undefined;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(Number(port), hostname);
    /** This connection's requests not answered yet, in order (HTTP/1.1 answers in order). */
    const unanswered: string[] = [];
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
    }
    client.on(
      'data',
      messages(
        (head) => {
          const { line, header } = parseHead(head);
          requests.push({ line, key: header('idempotency-key') });
          unanswered.push(line);
          return head;
        },
        (data) => upstream.write(data),
      ),
    );
    upstream.on(
      'data',
      messages(
        (head) => {
          const { line, header } = parseHead(head);
          const path = unanswered.shift()?.split(' ')[1]?.split('?')[0];
          const cut = cuts > 0 && (cutPath === undefined || path === cutPath);
          answers.push({
            status: Number(line.split(' ')[1]),
            replayed: header('idempotent-replayed'),
            cut,
          });
          if (cut) {
            cuts -= 1;
            if (options.stopOnCut) server.close();
            client.resetAndDestroy();
            upstream.destroy();
            return null;
          }
          const dropped = [
            ...(options.stripReplayed ? ['idempotent-replayed:'] : []),
            ...(options.closeEach ? ['connection:', 'keep-alive:'] : []),
          ];
          const fields = head
            .split('\r\n')
            .filter((field) => !dropped.some((name) => field.toLowerCase().startsWith(name)));
          return [...fields, ...(options.closeEach ? ['Connection: close'] : [])].join('\r\n');
        },
        (data) => client.write(data),
      ),
    );
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    answers,
    cut(count, path) {
      cuts = count;
      cutPath = path;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
