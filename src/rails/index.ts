import type { Config } from "../config.ts";
import type { AirtimeProvider } from "./airtime/port.ts";
import { AirtimeSimulator } from "./airtime/simulator.ts";
import type { SpeiRail } from "./spei/port.ts";
import { SpeiSimulator } from "./spei/simulator.ts";

/** The outside world Emisor talks to. Simulators by default; real adapters plug in here. */
export interface Rails {
  spei: SpeiRail;
  airtime: AirtimeProvider;
  close(): Promise<void>;
}

export function createRails(config: Config): Rails {
  const spei = new SpeiSimulator({
    settleDelayMs: config.speiSimSettleMs,
    returnProbability: config.speiSimReturnProbability,
    unavailableProbability: config.speiSimUnavailableProbability,
    journalPath: config.speiSimJournal,
  });
  const airtime = new AirtimeSimulator({
    delayMs: config.airtimeSimDelayMs,
    failureProbability: config.airtimeSimFailureProbability,
  });
  return {
    spei,
    airtime,
    close: async () => {
      await Promise.all([spei.close(), airtime.close()]);
    },
  };
}
