/**
 * The floor of a command's start-up on Effect: a process that has Effect in its heap and nothing
 * else. Each entry below is bundled (esbuild, CommonJS) and built into a V8 startup snapshot
 * (`node --snapshot-blob <blob> --build-snapshot`), so starting it compiles and evaluates
 * nothing: V8 deserialises the heap the modules left, then runs `Effect.runSync(Effect.void)`.
 * No way of loading these modules (code cache, compile cache, one file) starts faster than that,
 * and an rx command loads more: its own modules, better-sqlite3's addon, the log.
 */
import { build } from "esbuild"
import { execFileSync } from "node:child_process"
import { join } from "node:path"

/** What each snapshot holds: the least an Effect program loads, and what an @effect/cli command with Schemas loads. */
export const entries = {
  /** `effect`'s `Effect` module and what it imports (the runtime). */
  effect: `import { Effect } from "effect"\nglobalThis.__floor = { Effect }`,
  /** The runtime, `Schema`, and @effect/cli's `Command` (what every `rx` command is built on). */
  effect_cli: `import { Effect, Schema } from "effect"\nimport { Command } from "@effect/cli"\nglobalThis.__floor = { Effect, Schema, Command }`
} as const

export type Name = keyof typeof entries

const main = `
const v8 = require("node:v8")
v8.startupSnapshot.setDeserializeMainFunction(() => {
  const { Effect } = globalThis.__floor
  Effect.runSync(Effect.void)
})
`

/** Build one entry's snapshot in `dir` (this Node's, for its flags): the blob, to run as `node --snapshot-blob <blob>`. */
const snapshot = async (dir: string, name: Name): Promise<string> => {
  const bundled = join(dir, `${name}.cjs`)
  await build({
    stdin: { contents: `${entries[name]}\n${main}`, resolveDir: import.meta.dirname, loader: "js" },
    bundle: true,
    platform: "node",
    format: "cjs",
    outfile: bundled,
    logLevel: "error"
  })
  const blob = join(dir, `${name}.blob`)
  // V8 says on stderr that it leaves Error.stackTraceLimit out of a snapshot (restored at start): not a failure.
  execFileSync(process.execPath, ["--snapshot-blob", blob, "--build-snapshot", bundled], { stdio: ["ignore", "ignore", "pipe"] })
  return blob
}

/** Every entry's snapshot, built in `dir`. */
export const buildAll = async (dir: string): Promise<Record<Name, string>> => ({
  effect: await snapshot(dir, "effect"),
  effect_cli: await snapshot(dir, "effect_cli")
})
