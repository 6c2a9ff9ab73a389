import type { LookupAddress } from "node:dns";
import { lookup as dnsLookup } from "node:dns/promises";
import {
  type Agent as HttpAgent,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
} from "node:http";
import { type Agent as HttpsAgent, request as httpsRequest } from "node:https";
import type { LookupFunction } from "node:net";
import { isLocalHost } from "./url.ts";

/** Every address a host name resolves to (the system resolver, as `fetch` would use). */
export type Resolve = (hostname: string) => Promise<LookupAddress[]>;
export const resolveByDns: Resolve = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

/** A host name that resolves to an address that is not on the internet: the call is not made. */
export class LocalAddressRefused extends Error {
  readonly code = "ELOCALADDRESS";
  constructor(hostname: string) {
    super(`${hostname} resolves to a local or private address`);
  }
}

/**
 * The connection's own name lookup: the name is resolved once, refused if ANY of its addresses is
 * local or private (the rules of `checkWebhookUrl` for addresses written literally), and the
 * connection is made to the addresses that were checked. Checking a name and then letting the
 * connection resolve it again would let a DNS server answer a public address to the check and
 * 127.0.0.1 or 169.254.169.254 to the connection (DNS rebinding).
 */
function pinnedLookup(resolve: Resolve, allowLocal: boolean): LookupFunction {
  return (hostname, options, callback) => {
    const checked = (resolved: LookupAddress[]): LookupAddress[] => {
      if (!allowLocal && resolved.some((entry) => isLocalHost(entry.address)))
        throw new LocalAddressRefused(hostname);
      const addresses = options.family
        ? resolved.filter((entry) => entry.family === options.family)
        : resolved;
      if (addresses.length === 0)
        throw Object.assign(new Error(`${hostname} has no address`), { code: "ENOTFOUND" });
      return addresses;
    };
    // The callback runs outside the promise chain, as dns.lookup's does: were it to throw, the
    // error must not come back here and call it a second time.
    resolve(hostname)
      .then(checked)
      .then(
        (addresses) =>
          process.nextTick(() => {
            const [first] = addresses as [LookupAddress];
            if (options.all) callback(null, addresses);
            else callback(null, first.address, first.family);
          }),
        (error: NodeJS.ErrnoException) => process.nextTick(() => callback(error, "", 0)),
      );
  };
}

/**
 * POSTs `body` and answers the response's status; the response body is not read (the connection
 * is closed), redirects are not followed. `allowLocal` is for the sandbox's own hosts (localhost).
 */
export function post(
  url: string,
  options: {
    headers: Record<string, string>;
    body: string;
    signal: AbortSignal;
    resolve: Resolve;
    allowLocal: boolean;
  },
): Promise<number> {
  const target = new URL(url);
  const send = target.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const request = send(
      target,
      {
        method: "POST",
        headers: { ...options.headers, "content-length": String(Buffer.byteLength(options.body)) },
        signal: options.signal,
        lookup: pinnedLookup(options.resolve, options.allowLocal),
        agent: false,
      },
      (response) => {
        resolve(response.statusCode ?? 0);
        response.destroy();
      },
    );
    request.on("error", reject);
    request.end(options.body);
  });
}

/** An answer read by `exchange`: its status and headers, and its body when the status is 2xx. */
export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  /** The bytes as received for a 2xx; empty otherwise (not read: the connection is closed). */
  body: Buffer;
}

/** An answer whose body is larger than its reader takes: it is not read further. */
export class AnswerTooLarge extends Error {
  readonly code = "EANSWERTOOLARGE";
  constructor(readonly bytesMax: number) {
    super(`the answer is larger than ${bytesMax} bytes`);
  }
}

/** A kept-alive connection that failed before any answer: the server had closed it. */
class StaleConnection extends Error {}

export interface ExchangeOptions {
  headers: Record<string, string>;
  body: string;
  signal: AbortSignal;
  resolve: Resolve;
  allowLocal: boolean;
  answerBytesMax: number;
  /** Keeps connections open between calls (they are made to checked addresses all the same). */
  agent?: HttpAgent | HttpsAgent | undefined;
}

/**
 * POSTs `body` and reads the answer, at most `answerBytesMax` bytes of it (AnswerTooLarge
 * beyond), as `post` does otherwise: the name resolved once and checked, redirects not followed,
 * `signal` ending it at any point (name lookup, connect, or the answer's body). A connection
 * kept alive that the server closed while it sat idle fails before the request reaches the
 * server, so the request is sent once more, on another connection.
 */
export async function exchange(url: string, options: ExchangeOptions): Promise<Answer> {
  try {
    return await exchangeOnce(url, options);
  } catch (error) {
    if (!(error instanceof StaleConnection) || options.signal.aborted) throw error;
    return exchangeOnce(url, options);
  }
}

function exchangeOnce(url: string, options: ExchangeOptions): Promise<Answer> {
  const target = new URL(url);
  const send = target.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    let answered = false;
    const request = send(
      target,
      {
        method: "POST",
        headers: { ...options.headers, "content-length": String(Buffer.byteLength(options.body)) },
        signal: options.signal,
        lookup: pinnedLookup(options.resolve, options.allowLocal),
        agent: options.agent ?? false,
      },
      (response) => {
        answered = true;
        const status = response.statusCode ?? 0;
        if (status < 200 || status >= 300) {
          response.destroy();
          resolve({ status, headers: response.headers, body: Buffer.alloc(0) });
          return;
        }
        readCapped(response, options.answerBytesMax).then(
          (body) => resolve({ status, headers: response.headers, body }),
          reject,
        );
      },
    );
    request.on("error", (error: NodeJS.ErrnoException) => {
      const stale = !answered && request.reusedSocket && ["ECONNRESET", "EPIPE"].includes(error.code ?? "");
      reject(stale ? new StaleConnection(error.message) : error);
    });
    request.end(options.body);
  });
}

/** The response's body, refused (and the connection closed) once it passes `bytesMax`. */
function readCapped(response: IncomingMessage, bytesMax: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    if (Number(response.headers["content-length"]) > bytesMax) {
      response.destroy();
      reject(new AnswerTooLarge(bytesMax));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    response.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > bytesMax) {
        response.destroy();
        reject(new AnswerTooLarge(bytesMax));
      } else chunks.push(chunk);
    });
    response.on("end", () => resolve(Buffer.concat(chunks, size)));
    response.on("error", reject);
    // Closed before its end (the request was aborted, or the server went away): not an answer.
    response.on("close", () => {
      if (!response.complete)
        reject(Object.assign(new Error("the answer ended early"), { code: "ECONNRESET" }));
    });
  });
}
