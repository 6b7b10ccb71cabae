#!/usr/bin/env node
/**
 * The `rx` binary's entry: as little as possible before the command runs. `rx --version` is
 * answered here; every other command loads `main` (and, through it, only what it needs: the
 * server, the cluster, MCP and the model adapters are loaded by the commands that use them).
 * Node's compile cache is turned on where Node has one (22.1 and later).
 */
import * as Module from "node:module"

declare const __RX_VERSION__: string | undefined

const enableCompileCache: unknown = Reflect.get(Module, "enableCompileCache")
if (typeof enableCompileCache === "function") enableCompileCache.call(Module)

const [first, ...rest] = process.argv.slice(2)
if ((first === "--version" || first === "-V") && rest.length === 0) {
  process.stdout.write(`rx ${typeof __RX_VERSION__ === "string" ? __RX_VERSION__ : "development"}\n`)
} else {
  await import("./main.js")
}
