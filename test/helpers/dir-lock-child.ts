// A process for the directory lock's race test. For each line "<directory> <epoch ms>" on its
// standard input it waits until that moment, takes the directory's lock and answers one line,
// "won" or "refused <message>"; it keeps what it won until its standard input closes.
import { createInterface } from "node:readline";
import { acquireDirLock } from "../../src/db/dir-lock.ts";

const now = () => performance.timeOrigin + performance.now();

createInterface({ input: process.stdin }).on("line", (line) => {
  const [dir = "", at = "0"] = line.split(" ");
  // A busy wait, not a timer: the takers should reach the lock within microseconds of each other.
  while (now() < Number(at)) {
    // spin
  }
  try {
    acquireDirLock(dir);
    process.stdout.write("won\n");
  } catch (error) {
    process.stdout.write(`refused ${(error as Error).message}\n`);
  }
});
process.stdout.write("ready\n");
