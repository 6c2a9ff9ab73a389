import { Worker } from "node:worker_threads";

/**
 * What each worker runs: the private key imported once, then batches of ciphertexts deciphered
 * with OpenSSL's synchronous RSA-OAEP-SHA256, each answered with its plaintext or null. CommonJS
 * text run with `eval`, so the same code runs under tsx (tests, `npm start`) and from dist/.
 */
const workerSource = `
const { parentPort, workerData } = require("node:worker_threads");
const { constants, createPrivateKey, privateDecrypt } = require("node:crypto");
const key = createPrivateKey({ key: Buffer.from(workerData.der), format: "der", type: "pkcs8" });
const oaep = { key, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha256" };
parentPort.on("message", (ciphertexts) => {
  parentPort.postMessage(ciphertexts.map((bytes) => {
    try {
      return privateDecrypt(oaep, bytes);
    } catch {
      return null;
    }
  }));
});
`;

interface Pending {
  bytes: Buffer;
  /** Workers that died holding it: one retry on a new worker, then it fails. */
  lost: number;
  resolve: (plaintext: Buffer | undefined) => void;
  reject: (error: Error) => void;
}

interface Slot {
  worker: Worker;
  batch: Pending[];
}

/**
 * RSA decryption on worker threads of its own, for the event loop's sake: a burst of ciphered card
 * numbers never stalls other requests, and never queues a scrypt check (login, PIN) behind it on
 * libuv's pool. Ciphertexts wait here in arrival order; an idle worker takes its share of the
 * queue, at most `batchMax`, as one message, so the cost of handing work to a thread is paid per
 * batch. Workers start at the first decryption (a process that never sees a ciphered number pays
 * nothing) and do not keep the process alive. When one dies, a new one takes its batch once more
 * (a second loss fails it) and the others go on.
 */
export class DecryptWorkers {
  readonly #der: Buffer;
  readonly #count: number;
  readonly #batchMax: number;
  readonly #queue: Pending[] = [];
  readonly #idle: Slot[] = [];
  readonly #all = new Set<Slot>();
  #closed = false;

  constructor(privateKeyDer: Buffer, count: number, batchMax: number) {
    this.#der = privateKeyDer;
    this.#count = count;
    this.#batchMax = batchMax;
  }

  /** The plaintext, or undefined when the value is not a ciphertext under this key. */
  decrypt(bytes: Buffer): Promise<Buffer | undefined> {
    if (this.#closed) return Promise.reject(new Error("the decryption workers are closed"));
    // Started here, and replaced here after one died: never in a loop, even with a key no worker
    // can load.
    while (this.#all.size < this.#count) this.#spawn();
    return new Promise((resolve, reject) => {
      this.#queue.push({ bytes, lost: 0, resolve, reject });
      this.#dispatch();
    });
  }

  /** Stops every worker; what is waiting or in a worker's hands fails. */
  async close(): Promise<void> {
    this.#closed = true;
    const slots = [...this.#all];
    this.#all.clear();
    this.#idle.length = 0;
    const closed = new Error("the decryption workers are closed");
    for (const pending of this.#queue.splice(0)) pending.reject(closed);
    for (const slot of slots) for (const pending of slot.batch.splice(0)) pending.reject(closed);
    await Promise.all(slots.map((slot) => slot.worker.terminate()));
  }

  #spawn(): void {
    const worker = new Worker(workerSource, {
      eval: true,
      workerData: { der: this.#der },
      // A worker holds the key and a few batches: a small heap keeps the process's memory down.
      resourceLimits: { maxOldGenerationSizeMb: 8, maxYoungGenerationSizeMb: 2 },
    });
    worker.unref();
    const slot: Slot = { worker, batch: [] };
    this.#all.add(slot);
    worker.on("message", (plaintexts: Array<Uint8Array | null>) => {
      // An answer that arrives after close() has nobody waiting for it.
      if (!this.#all.has(slot)) return;
      const batch = slot.batch;
      slot.batch = [];
      batch.forEach((pending, i) => {
        const plaintext = plaintexts[i];
        // A Buffer arrives as a Uint8Array over its own copied memory: wrapped, not copied again.
        pending.resolve(
          plaintext ? Buffer.from(plaintext.buffer, plaintext.byteOffset, plaintext.byteLength) : undefined,
        );
      });
      this.#idle.push(slot);
      this.#dispatch();
    });
    const lost = (error: Error) => {
      if (!this.#all.delete(slot)) return;
      const index = this.#idle.indexOf(slot);
      if (index >= 0) this.#idle.splice(index, 1);
      const retried: Pending[] = [];
      for (const pending of slot.batch.splice(0)) {
        pending.lost += 1;
        if (pending.lost < 2) retried.push(pending);
        else pending.reject(error);
      }
      this.#queue.unshift(...retried);
      // Waiting ciphertexts get a new worker; each one started takes some of them and each is
      // tried twice at most, so even a key no worker can load ends in failures, not a loop.
      if (!this.#closed && this.#queue.length > 0) {
        this.#spawn();
        this.#dispatch();
      }
    };
    worker.on("error", lost);
    worker.on("exit", (code) => lost(new Error(`a decryption worker exited with code ${code}`)));
    this.#idle.push(slot);
  }

  #dispatch(): void {
    while (this.#idle.length > 0 && this.#queue.length > 0) {
      const slot = this.#idle.pop() as Slot;
      // Shared out among the idle workers, so a short queue does not all go to one of them.
      const share = Math.min(this.#batchMax, Math.ceil(this.#queue.length / (this.#idle.length + 1)));
      slot.batch = this.#queue.splice(0, share);
      slot.worker.postMessage(slot.batch.map((pending) => pending.bytes));
    }
  }
}
