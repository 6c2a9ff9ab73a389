/**
 * A careful API client, as an integrator should write one: every money-moving or creating request
 * carries an Idempotency-Key, and a timeout, a dropped connection, a 5xx or a 429 is retried with
 * the SAME key and body until an answer comes (2xx or a 4xx). To shake the service, it may also
 * drop its own connection mid-request on purpose (`abortProbability`): the server may or may not
 * have done the work, and only the retry with the same key tells.
 */
export interface Answer {
  status: number;
  replayed: boolean;
  body: { success: boolean; code: number; message: string; data: unknown };
}

export interface ClientStats {
  requests: number;
  retries: number;
  aborted: number;
  networkErrors: number;
  status5xx: number;
  reLogins: number;
}

export interface Session {
  token: string;
  login(): Promise<string>;
}

/** Headers made from the raw body at each attempt: a signature, which carries its own time. */
export type Signer = (raw: string) => Record<string, string>;

export class CarefulClient {
  readonly stats: ClientStats = {
    requests: 0,
    retries: 0,
    aborted: 0,
    networkErrors: 0,
    status5xx: 0,
    reLogins: 0,
  };
  /** The processes behind one service: each attempt goes to one at random, as a load balancer. */
  readonly #bases: string[];
  readonly #abortProbability: number;
  readonly #attemptTimeoutMs: number;

  constructor(base: string | string[], options: { abortProbability: number; attemptTimeoutMs: number }) {
    this.#bases = typeof base === "string" ? [base] : base;
    this.#abortProbability = options.abortProbability;
    this.#attemptTimeoutMs = options.attemptTimeoutMs;
  }

  /** One attempt; undefined when no answer arrived (network error, timeout, our own abort). */
  async attempt(
    method: string,
    path: string,
    token: string | undefined,
    body: unknown,
    key: string | undefined,
    mayAbort: boolean,
    sign?: Signer,
  ): Promise<Answer | undefined> {
    this.stats.requests += 1;
    const raw = body === undefined ? undefined : JSON.stringify(body);
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.#attemptTimeoutMs);
    // Our own drop: the request left, the answer is never read (the socket is reset).
    const dropAfterMs = mayAbort && Math.random() < this.#abortProbability ? Math.random() * 25 : undefined;
    const dropper =
      dropAfterMs === undefined
        ? undefined
        : setTimeout(() => {
            this.stats.aborted += 1;
            controller.abort();
          }, dropAfterMs);
    try {
      const base = this.#bases[Math.floor(Math.random() * this.#bases.length)] ?? this.#bases[0];
      const response = await fetch(`${base}${path}`, {
        method,
        headers: {
          ...(body === undefined ? {} : { "content-type": "application/json" }),
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          ...(key ? { "idempotency-key": key } : {}),
          ...(sign && raw !== undefined ? sign(raw) : {}),
        },
        ...(raw === undefined ? {} : { body: raw }),
        signal: controller.signal,
      });
      const text = await response.text();
      let parsed: Answer["body"];
      try {
        parsed = JSON.parse(text) as Answer["body"];
      } catch {
        parsed = { success: false, code: -1, message: text.slice(0, 200), data: null };
      }
      return {
        status: response.status,
        replayed: response.headers.get("idempotent-replayed") === "true",
        body: parsed,
      };
    } catch {
      if (dropAfterMs === undefined) this.stats.networkErrors += 1;
      return undefined;
    } finally {
      clearTimeout(timer);
      clearTimeout(dropper);
    }
  }

  /**
   * Sends until a final answer (2xx or 4xx other than 401/429) or until `giveUpAt` (epoch ms);
   * undefined when it gave up unanswered. A 401 logs in again (a token is not the request). A
   * signed call (the card network's) is signed afresh at each attempt, the body unchanged.
   */
  async send(
    method: string,
    path: string,
    session: Session | undefined,
    body: unknown,
    key: string | undefined,
    giveUpAt: number,
    sign?: Signer,
  ): Promise<Answer | undefined> {
    for (let attempt = 0; ; attempt++) {
      if (attempt > 0) {
        this.stats.retries += 1;
        await new Promise((resolve) =>
          setTimeout(resolve, 20 + Math.random() * Math.min(1000, 50 * attempt)),
        );
      }
      const answer = await this.attempt(method, path, session?.token, body, key, true, sign);
      if (answer && answer.status < 500 && answer.status !== 429) {
        if (answer.status !== 401 || !session) return answer;
        this.stats.reLogins += 1;
        session.token = await this.#relogin(session, giveUpAt);
      } else if (answer) {
        this.stats.status5xx += 1;
      }
      if (Date.now() > giveUpAt) return undefined;
    }
  }

  async #relogin(session: Session, giveUpAt: number): Promise<string> {
    for (;;) {
      try {
        return await session.login();
      } catch (error) {
        if (Date.now() > giveUpAt) throw error;
        this.stats.retries += 1;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  }
}
