import { claimRailJobs, completeRailJob, renewRailJob, retryRailJobLater } from "../../db/rail-outbox.ts";
import { limits } from "../../limits.ts";
import * as repo from "./repository.ts";
import { type AirtimeDeps, askProvider, providerRequest, settleTopup } from "./service.ts";

/**
 * Finishes top-ups whose request did not: the process died between the debit and the provider's
 * answer, or the provider did not answer in time. The request leases its job past its own
 * provider call, so the worker only sees abandoned ones. One pass; returns the jobs claimed.
 */
export async function processPendingTopups(
  deps: AirtimeDeps,
  batch: number = limits.railBatchSize,
): Promise<number> {
  const jobs = await claimRailJobs(deps.db, "AIRTIME", batch, limits.railLeaseSeconds);
  for (const job of jobs) {
    // The batch may have outlived its lease: renew it, or skip a job another worker took over.
    if (!(await renewRailJob(deps.db, job, limits.railLeaseSeconds))) continue;
    const topup = await repo.findTopup(deps.db, job.refId);
    const product = topup ? await repo.findProduct(deps.db, topup.product_id) : undefined;
    if (!topup || !product || topup.status !== "PENDING") {
      await completeRailJob(deps.db, "AIRTIME", job.refId);
      continue;
    }
    const outcome = await askProvider(deps, providerRequest(topup.id, topup.phone_number, product));
    if (outcome === "UNKNOWN") {
      await retryRailJobLater(deps.db, job, "provider unavailable", {
        baseSeconds: limits.railRetryBaseSeconds,
        maxSeconds: limits.railRetryMaxSeconds,
      });
      continue;
    }
    await settleTopup(deps.db, topup.id, outcome);
  }
  return jobs.length;
}
