import { Tool, ToolRegistry } from "@rx/kernel"
import { Effect, Layer } from "effect"
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Builtins, type Config } from "../src/index.js"

/** A fresh temporary folder holding `ws` (the workspace) and `outside` (a sibling). */
export const makeDirs = () => {
  const base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "rx-tools-")))
  const ws = path.join(base, "ws")
  const outside = path.join(base, "outside")
  fs.mkdirSync(ws)
  fs.mkdirSync(outside)
  return { base, ws, outside, cleanup: () => fs.rmSync(base, { recursive: true, force: true }) }
}

/** The registry of the built-ins over `workspace`. */
export const registry = (config: Config.Input) => Builtins.layer(config)

let counter = 0
/**
 * Call ids unique on the machine, as the kernel's are (they hold the goal's random id): a shell
 * call's processes, cgroup and note are named after its id, so two test files running at once
 * with the same ids would end each other's commands.
 */
const prefix = `test-${randomBytes(6).toString("hex")}`

/** A call id of this test process's own: `name` after its prefix. */
export const callIdOf = (name: string | number) => `${prefix}:${name}`

/** Invoke a tool through the registry. */
export const invoke = (tool: string, input: unknown) =>
  Effect.flatMap(ToolRegistry.ToolRegistry, (registry) =>
    ToolRegistry.invoke(registry, { callId: callIdOf(counter++), tool, input }))

/** The output of a successful call; fails the test otherwise. */
export const ok = (outcome: Tool.Outcome): Record<string, unknown> => {
  if (outcome._tag !== "Success") {
    throw new Error(`expected success, got ${JSON.stringify(outcome._tag === "Failure" ? outcome.error : outcome)}`)
  }
  return outcome.output as Record<string, unknown>
}

/** The failure of a call; fails the test on success. */
export const failed = (outcome: Tool.Outcome): Tool.Failure => {
  if (outcome._tag !== "Failure") {
    throw new Error(`expected failure, got ${JSON.stringify(outcome._tag === "Success" ? outcome.output : outcome).slice(0, 500)}`)
  }
  return outcome.error
}

/** Run an Effect needing the registry of a workspace. */
export const withTools = <A, E>(
  config: Config.Input,
  effect: Effect.Effect<A, E, ToolRegistry.ToolRegistry>
): Effect.Effect<A, E | Builtins.SetupError | ToolRegistry.InvalidToolset> =>
  Effect.provide(effect, registry(config) as Layer.Layer<ToolRegistry.ToolRegistry, Builtins.SetupError | ToolRegistry.InvalidToolset>)


export const sha256 = (text: string | Uint8Array) => createHash("sha256").update(text).digest("hex")
