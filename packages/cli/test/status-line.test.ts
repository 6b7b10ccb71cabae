/** The live status line: what runs after each event, how the line reads, and how it is drawn on a clock. */
import { describe, expect, it } from "@effect/vitest"
import { Behaviour, type Event, Options } from "@rx/kernel"
import { Effect, Scope, TestClock, Exit } from "effect"
import * as StatusLine from "../src/StatusLine.js"

const base = { goalId: "g", at: 0 }
const submitted: Event.Event = { ...base, _tag: "GoalSubmitted", seq: 0, iteration: 0, goal: "x", options: Options.defaults, tools: [], behaviour: Behaviour.current }
const started = (input: unknown): Event.Event => ({ ...base, _tag: "ToolStarted", seq: 2, iteration: 1, callId: "g:1", tool: "shell", input, index: 0 })
const terminated: Event.Event = { ...base, _tag: "Terminated", seq: 9, iteration: 3, reason: "done", detail: "ok" }

/** A sink that records what is written, `columns` wide. */
const recorder = (columns = 80) => {
  const writes: Array<string> = []
  return { writes, sink: { write: (text: string) => void writes.push(text), columns: () => columns } }
}

describe("what runs", () => {
  it("the model after the start, a tool between its start and outcome, nothing once ended or waiting", () => {
    const idle: StatusLine.Activity = { _tag: "Idle" }
    expect(StatusLine.activity(submitted, idle)).toEqual({ _tag: "Model" })
    expect(StatusLine.activity(started({ command: "ls" }), idle)).toEqual({ _tag: "Tool", tool: "shell", input: { command: "ls" } })
    expect(StatusLine.activity(terminated, { _tag: "Model" })).toEqual(idle)
  })

  it("a line within the terminal's width, escapes shown, time as 3.4s or 2m 05s", () => {
    const evil = { command: "echo \u001b]0;pwned\u0007 done" }
    const line = StatusLine.line({ _tag: "Tool", tool: "shell", input: evil }, 3_400, 40, "") ?? ""
    expect(line.length).toBeLessThan(40)
    expect(line).not.toMatch(/[\u0000-\u001f]/)
    expect(line).toMatch(/^… running shell .* 3\.4s$/)
    expect(StatusLine.line({ _tag: "Model" }, 125_000, 80, "")).toBe("… waiting for the model 2m 05s")
    expect(StatusLine.line({ _tag: "Idle" }, 5, 80, "")).toBeUndefined()
  })
})

describe("drawn on a clock", () => {
  it.effect("redrawn as time passes, erased when the goal ends and when the scope closes", () =>
    Effect.gen(function*() {
      const { sink, writes } = recorder()
      const scope = yield* Scope.make()
      const status = yield* Scope.extend(StatusLine.make(sink), scope)
      yield* status.observe(submitted)
      yield* TestClock.adjust("1 second")
      expect(writes.at(-1)).toBe("\r\u001b[2K… waiting for the model 1.0s")
      yield* status.observe(started({ command: "npm test" }))
      yield* TestClock.adjust("2500 millis")
      expect(writes.at(-1)).toMatch(/running shell \{"command":"npm test"\} 2\.4s$/)
      yield* status.clear
      expect(writes.at(-1)).toBe("\r\u001b[2K")
      yield* status.observe(terminated)
      const count = writes.length
      yield* TestClock.adjust("5 seconds")
      expect(writes.length).toBe(count)
      yield* status.observe(submitted)
      yield* Scope.close(scope, Exit.void)
      expect(writes.at(-1)).toBe("\r\u001b[2K")
    }))
})
