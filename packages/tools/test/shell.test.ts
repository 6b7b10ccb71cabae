import { describe, expect, it } from "@effect/vitest"
import { ToolRegistry } from "@rx/kernel"
import { Effect, Layer } from "effect"
import { Builtins } from "../src/index.js"
import { failed, invoke, makeDirs, withTools } from "./helpers.js"
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

  it.live("mode bwrap without bubblewrap fails to build", () =>
    Effect.gen(function*() {
      const { cleanup, ws } = makeDirs()
      const result = yield* withTools({ workspace: ws, sandbox: "bwrap", bwrapPath: "/nonexistent/bwrap" }, invoke("shell", { command: "echo hi" })).pipe(
        Effect.either
      )
      expect(result._tag).toBe("Left")
      if (result._tag === "Left") expect(result.left._tag).toBe("@rx/tools/SandboxUnavailable")
      cleanup()
    }))
})
