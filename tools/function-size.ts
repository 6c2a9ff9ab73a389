/**
 * Fails when a function in src/ is longer than `maxLines` lines (its first line to its last):
 * one operation, one place. Run by `.ci/run`; `node --import tsx tools/function-size.ts`.
 * A function that must stay longer is named in `exceptions`, with its reason.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import ts from "typescript";

const maxLines = 70;

/** `file:name` of functions allowed past the limit, and why. */
const exceptions: Record<string, string> = {};

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return filesUnder(full);
    return full.endsWith(".ts") ? [full] : [];
  });
}

function nameOf(node: ts.Node, source: ts.SourceFile): string {
  if ((ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node)) && node.name)
    return node.name.getText(source);
  const parent = node.parent;
  if (parent && ts.isVariableDeclaration(parent)) return parent.name.getText(source);
  if (parent && ts.isPropertyAssignment(parent)) return parent.name.getText(source);
  if (ts.isConstructorDeclaration(node)) return "constructor";
  const { line } = source.getLineAndCharacterOfPosition(node.getStart(source));
  return `(anonymous at line ${line + 1})`;
}

export function longFunctions(root: string): Array<{ where: string; lines: number }> {
  const found: Array<{ where: string; lines: number }> = [];
  for (const file of filesUnder(root)) {
    const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
    const visit = (node: ts.Node) => {
      if (ts.isFunctionLike(node) && "body" in node && node.body) {
        const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
        const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
        const lines = end - start + 1;
        if (lines > maxLines)
          found.push({ where: `${path.relative(".", file)}:${nameOf(node, source)}`, lines });
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const long = longFunctions("src").filter(({ where }) => !(where in exceptions));
  for (const { where, lines } of long)
    process.stderr.write(`${where}: ${lines} lines (at most ${maxLines})\n`);
  const stale = Object.keys(exceptions).filter(
    (where) => !longFunctions("src").some((f) => f.where === where),
  );
  for (const where of stale) process.stderr.write(`${where}: listed as an exception but no longer long\n`);
  if (long.length > 0 || stale.length > 0) process.exit(1);
  process.stdout.write(`no function in src/ is over ${maxLines} lines\n`);
}
