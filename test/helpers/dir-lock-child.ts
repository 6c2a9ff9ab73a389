// A process for the directory lock's tests. For each line "<directory> <epoch ms> [<lease ms>
// <heartbeat ms>]" on its standard input it waits until that moment, takes the directory's lock
// (with that lease and heartbeat, else the defaults) and answers one line, "won" or "refused
// <message>"; it keeps what it won, beating, until its standard input closes.
import { createInterface } from "node:readline";
import { acquireDirLock } from "../../src/db/dir-lock.ts";

const now = () => performance.timeOrigin + performance.now();

createInterface({ input: process.stdin }).on("line", (line) => {
  const [dir = "", at = "0", leaseMs, heartbeatMs] = line.split(" ");
  // A busy wait, not a timer: the takers should reach the lock within microseconds of each other.
  while (now() < Number(at)) {
    // spin
  }
  const options =
    leaseMs && heartbeatMs ? { leaseMs: Number(leaseMs), heartbeatMs: Number(heartbeatMs) } : {};
  (async () => acquireDirLock(dir, options))().then(
    () => process.stdout.write("won\n"),
    (error: Error) => process.stdout.write(`refused ${error.message}\n`),
  );
});
// Ends once its standard input closes: the heartbeat's timer holds nothing open.
process.stdout.write("ready\n");
