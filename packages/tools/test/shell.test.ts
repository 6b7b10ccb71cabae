import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { failed, invoke, makeDirs, withTools } from "./helpers.js"
import { shellSuite } from "./shellSuite.js"

describe("shell, sandbox none", () => {
  shellSuite("none")

  it.live("mode auto without bubblewrap refuses shell calls, saying how to fix it", () =>
    Effect.gen(function*() {
      const { cleanup, ws } = makeDirs()
      const saved = process.env["PATH"]
      process.env["PATH"] = "/nonexistent"
      const outcome = yield* withTools({ workspace: ws, sandbox: "auto" }, invoke("shell", { command: "echo hi" })).pipe(
        Effect.ensuring(Effect.sync(() => {
          process.env["PATH"] = saved
        }))
      )
      const failure = failed(outcome)
      expect(failure.kind).toBe("fatal")
      expect(failure.message).toContain("apt-get install bubblewrap")
      expect(failure.message).toContain("none")
      cleanup()
    }))

  it.live("mode bwrap without bubblewrap fails to build", () =>
    Effect.gen(function*() {
      const { cleanup, ws } = makeDirs()
      const saved = process.env["PATH"]
      process.env["PATH"] = "/nonexistent"
      const result = yield* withTools({ workspace: ws, sandbox: "bwrap" }, invoke("shell", { command: "echo hi" })).pipe(
        Effect.either,
        Effect.ensuring(Effect.sync(() => {
          process.env["PATH"] = saved
        }))
      )
      expect(result._tag).toBe("Left")
      if (result._tag === "Left") expect(result.left._tag).toBe("SandboxUnavailable")
      cleanup()
    }))
})
