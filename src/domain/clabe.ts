/**
 * CLABE, the 18-digit interbank account number (domain-mx §2): 3-digit bank code, 3-digit plaza,
 * 11-digit account, 1 control digit. Control: weights 3,7,1 repeating over the first 17 digits,
 * each product mod 10, summed; control = (10 - sum mod 10) mod 10.
 */
const weights = [3, 7, 1];

export function clabeControlDigit(first17: string): number {
  if (!/^[0-9]{17}$/.test(first17)) throw new RangeError("a CLABE body is 17 digits");
  let sum = 0;
  for (let i = 0; i < 17; i++) sum += (Number(first17[i]) * (weights[i % 3] ?? 1)) % 10;
  return (10 - (sum % 10)) % 10;
}

export function isValidClabe(clabe: string): boolean {
  return /^[0-9]{18}$/.test(clabe) && clabeControlDigit(clabe.slice(0, 17)) === Number(clabe[17]);
}

/** The CLABE for bank prefix + plaza + an account number of up to 11 digits. */
export function buildClabe(bankPrefix: string, plaza: string, account: string | bigint): string {
  if (!/^[0-9]{3}$/.test(bankPrefix) || !/^[0-9]{3}$/.test(plaza))
    throw new RangeError("bank and plaza are 3 digits");
  const body = `${bankPrefix}${plaza}${String(account).padStart(11, "0")}`;
  if (body.length !== 17) throw new RangeError("the account part is at most 11 digits");
  return `${body}${clabeControlDigit(body)}`;
}

/** First three digits: the bank (the last three of its Banxico code). */
export function clabeBankPrefix(clabe: string): string {
  return clabe.slice(0, 3);
}
