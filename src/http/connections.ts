import type { Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";

export interface ConnectionTracker {
  /** Closes the connections with no request in flight, and the others once their response is out. */
  closeIdle(): void;
  requestsInFlight(): number;
  /** Open connections tracked (for tests: a closed one must not be held). */
  connections(): number;
}

/**
 * Connections without a request in flight are closed at shutdown, and the others as soon as their
 * response is out. Fastify's own idle closing misses a connection that was opened but has not
 * sent a request yet (a load balancer's pre-connection, a client that gave up while connecting),
 * and server.close() waits for it until the grace period kills the process with exit code 1.
 * A connection is forgotten when it closes, even while a request on it is still being handled
 * (a client that gave up waiting): holding it would keep its request and response in memory.
 */
export function trackConnections(server: Server): ConnectionTracker {
  const inFlight = new Map<Socket, number>();
  let closing = false;
  server.on("connection", (socket: Socket) => {
    inFlight.set(socket, 0);
    socket.once("close", () => inFlight.delete(socket));
  });
  const responses = new Set<ServerResponse>();
  server.on("request", (request, response) => {
    const socket = request.socket;
    const open = inFlight.get(socket);
    if (open !== undefined) inFlight.set(socket, open + 1);
    responses.add(response);
    response.once("close", () => {
      responses.delete(response);
      const count = inFlight.get(socket);
      if (count === undefined) return;
      const left = Math.max(0, count - 1);
      inFlight.set(socket, left);
      // end(), not destroy(): the response may still be in the socket's buffer.
      if (closing && left === 0) socket.end();
    });
  });
  return {
    requestsInFlight: () => responses.size,
    connections: () => inFlight.size,
    closeIdle: () => {
      closing = true;
      for (const [socket, count] of inFlight) if (count === 0) socket.destroy();
      // A response still to be written tells its client not to send another request here.
      for (const response of responses) if (!response.headersSent) response.setHeader("connection", "close");
    },
  };
}
