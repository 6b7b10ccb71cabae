import { describe, expect, it } from "@effect/vitest"
import { ToolRegistry } from "@rx/kernel"
import { Effect, Either, Layer, Option } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { Builtins, Shell } from "../src/index.js"
import { callIdOf, failed, invoke, makeDirs, ok, withTools } from "./helpers.js"

/** Whether a process lives (a zombie counts as gone). */
const alive = (pid: number) => {
  try {
    return !/\) [ZX] /.test(fs.readFileSync(`/proc/${pid}/stat`, "latin1"))
  } catch {
    return false
  }
}
import { shellSuite } from "./shellSuite.js"

describe("shell, sandbox none", () => {
  shellSuite("none")

  it.live("mode auto without bubblewrap: a registry composed by hand with shell refuses its calls, saying how to fix it", () =>
    Effect.gen(function*() {
      const { cleanup, ws } = makeDirs()
      // Builtins.layer leaves shell out here; a registry listing it anyway gets the refusal.
      const registry = ToolRegistry.layer(Builtins.tools).pipe(
        Layer.provide(Builtins.layerServices({ workspace: ws, sandbox: "auto", bwrapPath: "/nonexistent/bwrap" }))
      )
      const outcome = yield* invoke("shell", { command: "echo hi" }).pipe(Effect.provide(registry))
      const failure = failed(outcome)
      expect(failure.kind).toBe("fatal")
      expect(failure.message).toContain("apt-get install bubblewrap")
      expect(failure.message).toContain("none")
      cleanup()
    }))

  it.live("a call's processes carry a marker derived from its id; after a crash, recover ends what of it still runs", () =>
    Effect.gen(function*() {
      const { cleanup, ws } = makeDirs()
      const registry = yield* Effect.provide(ToolRegistry.ToolRegistry, Builtins.layer({ workspace: ws, sandbox: "none" }))
      const [first, second] = [callIdOf("recover-1"), callIdOf("recover-2")]
      const run = Either.getOrThrow(registry.prepare({ callId: first, tool: "shell", input: { command: "echo $RX_SHELL_CALL" } }))
      expect(ok(yield* run.run)["stdout"]).toBe(`${Shell.markerOf(first)}\n`)
      // What a crashed rx leaves running: a call's tree, its group leader gone, its timeout with it.
      const late = path.join(ws, "late.txt")
      const leftover = spawn("/bin/sh", ["-c", `sleep 1.5; echo late > ${late}`], {
        env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", RX_SHELL_CALL: Shell.markerOf(second) },
        detached: true,
        stdio: "ignore"
      })
      leftover.unref()
      const recovered = Either.getOrThrow(registry.prepare({ callId: second, tool: "shell", input: { command: "anything" } }))
      expect(yield* recovered.recover).toEqual(Option.none())
      expect(leftover.pid === undefined ? false : alive(leftover.pid)).toBe(false)
      yield* Effect.sleep("2 seconds")
      expect(fs.existsSync(late)).toBe(false)
      cleanup()
    }))

  it.live("mode bwrap without bubblewrap fails to build", () =>
    Effect.gen(function*() {
      const { cleanup, ws } = makeDirs()
      const result = yield* withTools({ workspace: ws, sandbox: "bwrap", bwrapPath: "/nonexistent/bwrap" }, invoke("shell", { command: "echo hi" })).pipe(
        Effect.either
      )
      expect(Either.isLeft(result)).toBe(true)
      if (Either.isLeft(result)) expect(result.left._tag).toBe("@rx/tools/SandboxUnavailable")
      cleanup()
    }))
})
