#!/usr/bin/env node
// The `emisor` command: runs the TypeScript sources through tsx in a checkout, or the compiled
// build (npm run build) when the sources are absent.
import { existsSync } from "node:fs";

const source = new URL("../src/cli/main.ts", import.meta.url);
if (existsSync(source)) {
  const { register } = await import("tsx/esm/api");
  register();
  await import(source.href);
} else {
  await import(new URL("../dist/src/cli/main.js", import.meta.url).href);
}
