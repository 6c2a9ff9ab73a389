import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

/** The values a reader copies from the banner; a document's first block may set them. */
export type BannerValues = Record<string, string>;

export interface ShellBlock {
  /** 1-based position among the document's shell blocks. */
  index: number;
  /** Line of the opening fence in the document. */
  line: number;
  text: string;
}

/** Every ```sh and ```bash block of a Markdown document, in order. Other fences are output. */
export function shellBlocks(markdown: string): ShellBlock[] {
  const blocks: ShellBlock[] = [];
  for (const match of markdown.matchAll(/^```(?:sh|bash)\n([\s\S]*?)^```$/gm)) {
    const line = markdown.slice(0, match.index).split("\n").length;
    blocks.push({ index: blocks.length + 1, line, text: match[1] ?? "" });
  }
  return blocks;
}

export interface DocumentRun {
  ok: boolean;
  /** What the failing block is and what it printed; empty when every block passed. */
  report: string;
}

/**
 * Runs a document's shell blocks in order, in one bash session (`set -euo pipefail`), so the
 * variables one block sets are there for the next, in a directory of its own (keys a guide writes,
 * such as me.pem, land there). In the first block, a line that assigns one of `values` (the
 * reader's copy of the banner: `API_KEY=...`) gets the real value instead; everything else runs
 * as written. A command that fails stops the run, and the report names its block and output.
 */
export async function runDocument(
  file: string,
  values: BannerValues,
  timeoutMs = 90_000,
): Promise<DocumentRun> {
  const blocks = shellBlocks(readFileSync(file, "utf8"));
  if (blocks.length === 0) return { ok: false, report: `${file} has no shell block` };
  const script = ["set -euo pipefail", "exec 2>&1"];
  for (const block of blocks) {
    let text = block.text;
    if (block.index === 1) {
      for (const [name, value] of Object.entries(values)) {
        text = text.replace(new RegExp(`^${name}=.*$`, "m"), `${name}='${value}'`);
      }
    }
    script.push(`printf '\\n@@@ block ${block.index}\\n'`, text);
  }
  script.push("printf '\\n@@@ done\\n'");
  const dir = mkdtempSync(path.join(tmpdir(), "emisor-doc-"));
  const scriptFile = path.join(dir, "document.sh");
  writeFileSync(scriptFile, `${script.join("\n")}\n`);
  const { code, output } = await new Promise<{ code: number | null; output: string }>((resolve) => {
    const child = spawn("bash", [scriptFile], { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    const timer = setTimeout(() => {
      output += `\n(killed after ${timeoutMs / 1000} s)`;
      child.kill("SIGKILL");
    }, timeoutMs);
    child.once("close", (exitCode) => {
      clearTimeout(timer);
      resolve({ code: exitCode, output });
    });
  });
  if (code === 0 && output.endsWith("@@@ done\n")) return { ok: true, report: "" };
  const markers = [...output.matchAll(/^@@@ block (\d+)$/gm)];
  const last = markers.at(-1);
  const block = blocks[Number(last?.[1] ?? 1) - 1];
  const printed = last ? output.slice((last.index ?? 0) + last[0].length + 1) : output;
  return {
    ok: false,
    report: [
      `${path.basename(file)}: shell block ${block?.index} (line ${block?.line}) failed with exit code ${code}`,
      "--- block ---",
      block?.text.trimEnd() ?? "",
      "--- output ---",
      printed.trimEnd(),
    ].join("\n"),
  };
}
