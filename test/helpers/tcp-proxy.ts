import net from "node:net";

/**
 * A TCP proxy in front of PostgreSQL that a test can break like a network or a host does:
 * `cut()` resets every connection and refuses new ones (a stopped server), `freeze()` keeps the
 * sockets open but forwards nothing (a frozen host, a partition), `freezeRepliesAfterCommit()`
 * forwards what the client sends but no answer from the first COMMIT on (a server that applied a
 * COMMIT and froze before answering it), `restore()` heals all three.
 */
export interface TcpProxy {
  readonly port: number;
  cut(): Promise<void>;
  freeze(): void;
  freezeRepliesAfterCommit(): void;
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>();
  let frozen = false;
  let repliesFrozen = false;
  let replyTrigger: Buffer | undefined;
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
  };
  const onConnection = (client: net.Socket) => {
    track(client);
    const upstream = net.connect(targetPort, targetHost);
    track(upstream);
    // Frozen: bytes are swallowed, not buffered, so nothing arrives late after a restore.
    client.on("data", (chunk: Buffer) => {
      if (!frozen) upstream.write(chunk);
      if (replyTrigger !== undefined && chunk.includes(replyTrigger)) repliesFrozen = true;
    });
    upstream.on("data", (chunk) => {
      if (!frozen && !repliesFrozen) client.write(chunk);
    });
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  };
  let server = net.createServer(onConnection);
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => {
        const address = server.address();
        resolve(typeof address === "object" && address ? address.port : port);
      });
    });
  const port = await listen(0);
  const stopListening = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return {
    port,
    cut: async () => {
      const closed = stopListening();
      for (const socket of sockets) socket.resetAndDestroy();
      await closed;
    },
    freeze: () => {
      frozen = true;
    },
    freezeRepliesAfterCommit: () => {
      // The simple-query message node-postgres sends for a COMMIT: 'Q', its length, the text, NUL.
      replyTrigger = Buffer.from("Q\u0000\u0000\u0000\u000bcommit\u0000", "latin1");
    },
    restore: async () => {
      // Connections that lost bytes while frozen are left as they are: the service must notice
      // (its statement deadline drops them) without help.
      frozen = false;
      repliesFrozen = false;
      replyTrigger = undefined;
      if (!server.listening) {
        server = net.createServer(onConnection);
        await listen(port);
      }
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      if (server.listening) await stopListening();
    },
  };
}
