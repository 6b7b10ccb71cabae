#!/usr/bin/env node
/**
 * The `rx` binary's entry: as little as possible before the command runs. `rx --version` is
 * answered here; every other command loads `main` (and, through it, only what it needs: the
 * server, the cluster, MCP and the model adapters are loaded by the commands that use them).
 *
 * Bundled (scripts/bundle.mjs), `main` is a CommonJS chunk in `rx-chunks/`, loaded with `require`
 * after turning on Node's compile cache (`module.enableCompileCache`, Node 22.1 and later): the
 * code V8 compiled for the chunks is kept in the user's cache folder (`$XDG_CACHE_HOME/rx`, else
 * `~/.cache/rx`), so that later commands skip compiling `effect` and `@effect/cli` again. Node
 * checks each entry against its chunk's content and its own version; a cache it cannot use or
 * write only means a slower start. `RX_CODE_CACHE=0` leaves it off (as does Node's
 * `NODE_DISABLE_COMPILE_CACHE=1`; `NODE_COMPILE_CACHE` names another folder). Unbundled
 * (`dist/src/bin.js`), `main.js`.
 */
import * as Module from "node:module"
import { homedir } from "node:os"
import { isAbsolute, join } from "node:path"
import { fileURLToPath } from "node:url"

declare const __RX_VERSION__: string | undefined
/** The bundle's `main` chunk, relative to this file. */
declare const __RX_MAIN__: string | undefined

/** The compile cache's folder, or undefined when there is no home to put it in. */
const cacheFolder = (env: NodeJS.ProcessEnv): string | undefined => {
  const xdg = env["XDG_CACHE_HOME"]
  if (xdg !== undefined && isAbsolute(xdg)) return join(xdg, "rx")
  try {
    const home = homedir()
    return isAbsolute(home) ? join(home, ".cache", "rx") : undefined
  } catch {
    return undefined
  }
}

const version = typeof __RX_VERSION__ === "string" ? __RX_VERSION__ : "development"
const [first, ...rest] = process.argv.slice(2)
if ((first === "--version" || first === "-V") && rest.length === 0) {
  process.stdout.write(`rx ${version}\n`)
} else if (typeof __RX_MAIN__ === "string") {
  const main = fileURLToPath(new URL(__RX_MAIN__, import.meta.url))
  // Node 22.0 has no compile cache: it compiles every time.
  const enableCompileCache: unknown = Reflect.get(Module, "enableCompileCache")
  const folder = process.env["RX_CODE_CACHE"] === "0" ? undefined : cacheFolder(process.env)
  if (typeof enableCompileCache === "function" && folder !== undefined) enableCompileCache.call(Module, folder)
  Module.createRequire(import.meta.url)(main)
} else {
  await import("./main.js")
}
