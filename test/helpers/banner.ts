import type { ChildProcess } from "node:child_process";

/**
 * What a started Emisor process printed up to the end of its banner (the curl line to log in).
 * Rejects with everything it printed, stderr included, if it exits first or prints no banner
 * within 60 s.
 */
export function bannerOf(child: ChildProcess): Promise<string> {
  let text = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    text += chunk.toString();
  });
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no banner within 60 s:\n${text}`)), 60_000);
    child.stdout?.on("data", (chunk: Buffer) => {
      text += chunk.toString();
      if (/Log in:\n.*curl.*\n/.test(text)) {
        clearTimeout(timer);
        resolve(text);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`exited with ${code}:\n${text}`));
    });
  });
}
