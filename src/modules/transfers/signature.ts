import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * Signature of the SPEI rail's callbacks (incoming transfers, order state changes): the header
 * `X-Spei-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`. The
 * timestamp is signed with the body, so a captured callback cannot be replayed outside the
 * tolerance window (and inside it, replays are harmless: abonos deduplicate by tracking key).
 */
export const speiSignatureHeader = "x-spei-signature";

export function signSpeiCallback(
  secret: string,
  rawBody: string | Buffer,
  timestampSeconds: number | string,
): string {
  const mac = createHmac("sha256", secret).update(`${timestampSeconds}.`).update(rawBody).digest("hex");
  return `t=${timestampSeconds},v1=${mac}`;
}

/** True when the header carries a v1 signature of this body by this secret, within the tolerance. */
export function verifySpeiSignature(
  secret: string,
  header: string | undefined,
  rawBody: Buffer,
  nowSeconds: number,
  toleranceSeconds: number,
): boolean {
  if (!header) return false;
  // The timestamp is verified as written (the rail signed its text, "0170..." included) and the
  // signature in either case of hex (.NET and Java write upper case).
  let timestamp: string | undefined;
  const signatures: string[] = [];
  for (const part of header.split(",")) {
    const [name, value] = part.trim().split("=", 2);
    if (name === "t" && value && /^[0-9]{1,12}$/.test(value)) timestamp = value;
    if (name === "v1" && value && /^[0-9a-fA-F]{64}$/.test(value)) signatures.push(value);
  }
  if (timestamp === undefined || signatures.length === 0) return false;
  if (Math.abs(nowSeconds - Number(timestamp)) > toleranceSeconds) return false;
  const expected = Buffer.from(signSpeiCallback(secret, rawBody, timestamp).split("v1=")[1] ?? "", "hex");
  // Several v1 values are allowed, so the rail can sign with an old and a new secret while rotating.
  return signatures.some((signature) => timingSafeEqual(Buffer.from(signature, "hex"), expected));
}
