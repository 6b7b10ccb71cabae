/**
 * The live lines of a run: a model failure's message is said once, and the suspension after it
 * does not repeat it. What a run said is its own: two runs in one process (an application that
 * mounts rx's commands) do not change each other's lines.
 */
import { describe, expect, it } from "@effect/vitest"
import type { Event } from "@rx/kernel"
import { Console, Effect } from "effect"
import { printer } from "../src/internal/goal.js"

/** The current Console, keeping each line logged instead of printing it. */
const capture = Effect.map(Effect.console, (current) => {
  const lines: Array<string> = []
  const log = (...args: ReadonlyArray<unknown>) => Effect.sync(() => void lines.push(args.map(String).join(" ")))
  const console: Console.Console = { ...current, log }
  return { lines, console }
})

const failed = (goalId: string): Event.Event => ({ _tag: "ModelFailed", goalId, at: 0, seq: 1, iteration: 1, message: "model server unreachable at 127.0.0.1:9" })
const suspended = (goalId: string): Event.Event => ({
  _tag: "Suspended",
  goalId,
  at: 0,
  seq: 2,
  iteration: 1,
  reason: "model_unavailable",
  detail: "model server unreachable at 127.0.0.1:9"
})
const cancel = (goalId: string): Event.Event => ({ _tag: "CancelRequested", goalId, at: 0, seq: 1, iteration: 1, reason: "stop" })

describe("a run's lines", () => {
  it.effect("a model failure is said once: its suspension does not repeat the message", () =>
    Effect.gen(function*() {
      const { console, lines } = yield* capture
      const print = printer(false, undefined, undefined, "a")
      yield* Effect.withConsole(Effect.zipRight(print(failed("a")), print(suspended("a"))), console)
      expect(lines).toHaveLength(2)
      expect(lines[0]).toContain("failed: model server unreachable at 127.0.0.1:9")
      expect(lines[1]).toBe("      suspended (model_unavailable)")
    }))

  it.effect("what one run said does not change another run's lines", () =>
    Effect.gen(function*() {
      const { console, lines } = yield* capture
      const a = printer(false, undefined, undefined, "a")
      const b = printer(false, undefined, undefined, "b")
      // Goal a's model fails; goal b, run at the same time in this process, prints a step; then a suspends.
      yield* Effect.withConsole(Effect.all([a(failed("a")), b(cancel("b")), a(suspended("a"))], { discard: true }), console)
      expect(lines.at(-1)).toBe("      suspended (model_unavailable)")
    }))
})
