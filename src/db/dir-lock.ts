import { readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";

/**
 * A lock file naming the process that owns an embedded data directory. A second process gets
 * a clear error instead of corrupting the database; a lock left by a dead process is taken over.
 */
export function acquireDirLock(dir: string): () => void {
  const file = path.join(dir, "emisor.lock");
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(file, String(process.pid), { flag: "wx" });
      return () => rmSync(file, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      const owner = Number(readFileSync(file, "utf8"));
      if (owner !== process.pid && isAlive(owner)) {
        throw new Error(
          `the embedded database in ${dir} is in use by process ${owner}; stop it first, or use DATABASE_URL for several processes`,
        );
      }
      rmSync(file, { force: true });
    }
  }
  throw new Error(`could not lock ${dir}`);
}

function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
