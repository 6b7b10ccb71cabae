#!/usr/bin/env node
/**
 * The `rx` binary's entry: as little as possible before the command runs. `rx --version` is
 * answered here; every other command loads `main` (and, through it, only what it needs: the
 * server, the cluster, MCP and the model adapters are loaded by the commands that use them).
 *
 * Bundled (scripts/bundle.mjs), `main` is a CommonJS chunk in `rx-chunks/`, loaded through
 * `internal/load.ts`, which keeps V8's code cache of the chunks in the user's cache folder
 * (`RX_CODE_CACHE=0` leaves it unused). Unbundled (`dist/src/bin.js`), `main.js`.
 */
import { fileURLToPath } from "node:url"
import { cacheFolder, makeLoader } from "./internal/load.js"

declare const __RX_VERSION__: string | undefined
/** The bundle's `main` chunk, relative to this file. */
declare const __RX_MAIN__: string | undefined
/** A hash of each chunk's content, by file name (the code cache's key). */
declare const __RX_CHUNKS__: Readonly<Record<string, string>> | undefined

const version = typeof __RX_VERSION__ === "string" ? __RX_VERSION__ : "development"
const [first, ...rest] = process.argv.slice(2)
if ((first === "--version" || first === "-V") && rest.length === 0) {
  process.stdout.write(`rx ${version}\n`)
} else if (typeof __RX_MAIN__ === "string") {
  const { load } = makeLoader({
    cache: process.env["RX_CODE_CACHE"] === "0" ? undefined : cacheFolder(process.env, version),
    hashes: typeof __RX_CHUNKS__ === "object" ? __RX_CHUNKS__ : {},
    importer: (specifier) => import(specifier)
  })
  load(fileURLToPath(new URL(__RX_MAIN__, import.meta.url)))
} else {
  await import("./main.js")
}
