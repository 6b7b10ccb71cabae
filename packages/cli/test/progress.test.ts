/** The live progress line: what runs after each event, how the line reads, and how it is drawn on a clock. */
import { describe, expect, it } from "@effect/vitest"
import { Behaviour, type Event, Options, State } from "@rx/kernel"
import { Effect, Exit, Scope, TestClock } from "effect"
import * as Progress from "../src/Progress.js"
import * as Render from "../src/Render.js"

const base = { goalId: "g", at: 0 }
const submitted: Event.Event = { ...base, _tag: "GoalSubmitted", seq: 0, iteration: 0, goal: "x", options: Options.defaults, tools: [], behaviour: Behaviour.current }
const responded = (text: string, calls = 1): Event.Event => ({
  ...base,
  _tag: "ModelResponded",
  seq: 1,
  iteration: 1,
  response: {
    text,
    toolCalls: Array.from({ length: calls }, (_, i) => ({ id: `c${i}`, name: "shell", arguments: "{}" })),
    finishReason: "tool_calls",
    usage: { inputTokens: 1, outputTokens: 1 }
  }
})
const started = (input: unknown, tool = "shell"): Event.Event => ({ ...base, _tag: "ToolStarted", seq: 2, iteration: 1, callId: "g:1", tool, input, index: 0 })
const succeeded: Event.Event = { ...base, _tag: "ToolSucceeded", seq: 3, iteration: 1, callId: "g:1", tool: "shell", output: "ok", durationMs: 5 }
const failed: Event.Event = { ...base, _tag: "ToolFailed", seq: 3, iteration: 1, callId: "g:1", tool: "shell", error: { kind: "recoverable", message: "no" }, durationMs: 5 }
const completed: Event.Event = {
  ...base,
  _tag: "IterationCompleted",
  seq: 4,
  iteration: 1,
  summary: { toolCalls: 1, consecutiveFailures: 0, consecutiveMalformed: 0, idleIterations: 0, repeats: 0, last: "ok", fingerprint: "f" }
}
const modelFailed: Event.Event = { ...base, _tag: "ModelFailed", seq: 5, iteration: 2, message: "timeout" }
const rejected: Event.Event = { ...base, _tag: "ActionRejected", seq: 5, iteration: 2, kind: "bad_json", reason: "bad", raw: "{" }
const asked: Event.Event = { ...base, _tag: "ApprovalRequested", seq: 5, iteration: 2, callId: "g:2", tool: "shell", input: {}, index: 0 }
const decided: Event.Event = { ...base, _tag: "ApprovalDecided", seq: 6, iteration: 2, callId: "g:2", approved: true, reason: "", by: "me" }
const optionsChanged: Event.Event = { ...base, _tag: "OptionsChanged", seq: 6, iteration: 2, options: Options.defaults }
const cancel: Event.Event = { ...base, _tag: "CancelRequested", seq: 6, iteration: 2, reason: "stop" }
const suspended: Event.Event = { ...base, _tag: "Suspended", seq: 6, iteration: 2, reason: "model_unavailable", detail: "down" }
const terminated: Event.Event = { ...base, _tag: "Terminated", seq: 9, iteration: 3, reason: "done", detail: "ok" }

const hostile = { command: "echo \u001b]0;pwned\u0007 done\r\nmore\u009b2J" }
/** Nothing a terminal acts on: C0 and C1 controls, DEL. */
const controls = /[\u0000-\u001f\u007f-\u009f]/

/** A sink that records what is written, `columns` wide. */
const recorder = (columns = 80) => {
  const writes: Array<string> = []
  return { writes, sink: { write: (text: string) => void writes.push(text), columns: () => columns } }
}

describe("what runs", () => {
  const tool: Progress.Activity = { _tag: "Tool", tool: "shell", input: { command: "ls" } }
  const model: Progress.Activity = { _tag: "Model" }

  it("the model after the start, a finished iteration and a failed call (a retry)", () => {
    expect(Progress.activity(submitted, undefined)).toEqual(model)
    expect(Progress.activity(completed, undefined)).toEqual(model)
    const retry = Progress.activity(modelFailed, model)
    expect(retry).toEqual(model)
    expect(retry).not.toBe(model)
  })

  it("a tool between its ToolStarted and its outcome", () => {
    expect(Progress.activity(started({ command: "ls" }), undefined)).toEqual(tool)
    expect(Progress.activity(succeeded, tool)).toBeUndefined()
    expect(Progress.activity(failed, tool)).toBeUndefined()
  })

  it("nothing while the kernel decides, waits for a person, or once the goal is suspended or ended", () => {
    for (const event of [responded("thinking"), rejected, asked, decided, suspended, terminated]) {
      expect(Progress.activity(event, model), event._tag).toBeUndefined()
    }
  })

  it("what ran goes on through an options change or a cancel request", () => {
    expect(Progress.activity(optionsChanged, tool)).toBe(tool)
    expect(Progress.activity(cancel, model)).toBe(model)
    expect(Progress.activity(cancel, undefined)).toBeUndefined()
  })

  it("a resume starts with the model, a call cut short, or nothing", () => {
    const at = (events: ReadonlyArray<Event.Event>) => Progress.resumed(State.fromEvents("g", events))
    expect(at([submitted])).toEqual(model)
    expect(at([submitted, { ...modelFailed, seq: 1, iteration: 1 }, { ...suspended, seq: 2, iteration: 1 }])).toEqual(model)
    expect(at([submitted, responded("", 1), started({ command: "ls" })])).toEqual(tool)
    expect(at([submitted, { ...terminated, seq: 1 }])).toBeUndefined()
  })
})

describe("the line", () => {
  it("says what runs and for how long", () => {
    expect(Progress.line({ _tag: "Model" }, 3_400, 80, "qwen2.5")).toBe("… waiting for the model (qwen2.5) 3.4s")
    expect(Progress.line({ _tag: "Model" }, 3_400, 80)).toBe("… waiting for the model 3.4s")
    expect(Progress.line({ _tag: "Tool", tool: "shell", input: { command: "npm test" } }, 12_000, 80)).toBe('… running shell {"command":"npm test"} 12.0s')
    expect(Progress.line({ _tag: "Tool", tool: "list_files", input: { path: "a\n\tb" } }, 0, 80)).toBe('… running list_files {"path":"a\\n\\tb"} 0.0s')
  })

  it("time as 3.4s, 1m 05s or 1h 02m 05s, never ahead of the clock", () => {
    expect(Progress.elapsed(0)).toBe("0.0s")
    expect(Progress.elapsed(3_499)).toBe("3.4s")
    expect(Progress.elapsed(59_999)).toBe("59.9s")
    expect(Progress.elapsed(60_000)).toBe("1m 00s")
    expect(Progress.elapsed(65_900)).toBe("1m 05s")
    expect(Progress.elapsed(3_725_000)).toBe("1h 02m 05s")
    expect(Progress.elapsed(-5)).toBe("0.0s")
    expect(Progress.elapsed(Number.NaN)).toBe("0.0s")
  })

  it("escapes a hostile input and never fills the terminal's width", () => {
    const activity: Progress.Activity = { _tag: "Tool", tool: "shell\u001b[2J", input: hostile }
    const wide = Progress.line(activity, 3_400, 200)
    expect(wide).not.toMatch(controls)
    expect(wide).toContain("\\u001b]0;pwned\\u0007")
    expect(wide).toMatch(/^… running shell\\u001b\[2J .* 3\.4s$/)
    for (let columns = 1; columns <= 120; columns++) {
      const text = Progress.line(activity, 754_000, columns, "qwen\u001b[31m")
      expect(text.length, `${columns} columns`).toBeLessThan(columns === 1 ? 2 : columns)
      expect(text).not.toMatch(controls)
      const model = Progress.line({ _tag: "Model" }, 754_000, columns, "qwen\u001b[31m")
      expect(model.length).toBeLessThanOrEqual(Math.max(0, columns - 1))
      expect(model).not.toMatch(controls)
    }
    // Cut with `…`, the time kept.
    expect(Progress.line(activity, 3_400, 40)).toMatch(/^… running shell.{10,}… 3\.4s$/)
    expect(Progress.line(activity, 3_400, 40).length).toBe(39)
  })

  it("counts wide characters as two columns and keeps surrogate pairs whole", () => {
    const text = Progress.line({ _tag: "Tool", tool: "write_file", input: { content: "漢字🙂".repeat(40) } }, 0, 30)
    const columns = [...text].reduce((n, ch) => n + (/[\u3000-\u9fff]|\p{Extended_Pictographic}/u.test(ch) ? 2 : 1), 0)
    expect(columns).toBeLessThanOrEqual(29)
    expect(text).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])/)
  })

  it("a terminal that reports no width counts as 80 columns", () => {
    const long: Progress.Activity = { _tag: "Tool", tool: "shell", input: { command: "x".repeat(500) } }
    expect(Progress.line(long, 0, Number.NaN).length).toBe(79)
    expect(Progress.line(long, 0, 0).length).toBe(79)
  })
})

describe("the thought", () => {
  it("a step line for an answer with calls and text", () => {
    expect(Render.thought(responded("I will list\nthe files first.", 2))).toBe("   1  thought      I will list the files first.")
  })

  it("nothing for a final answer, an empty text or another event", () => {
    expect(Render.thought(responded("the answer is 42", 0))).toBeUndefined()
    expect(Render.thought(responded("  \n ", 1))).toBeUndefined()
    expect(Render.thought(started({}))).toBeUndefined()
  })

  it("one line, capped, escaped", () => {
    const line = Render.thought(responded(`\u001b]0;pwned\u0007 ${"word ".repeat(500)}`)) ?? ""
    expect(line).not.toMatch(controls)
    expect(line).not.toContain("\n")
    expect(line).toContain("\\u001b]0;pwned\\u0007")
    expect(line.endsWith("…")).toBe(true)
    // The prefix, and 200 characters of the thought, two controls shown as 6 characters each.
    expect(line.length).toBe("   1  thought      ".length + Render.thoughtChars + 2 * 5)
  })
})

describe("drawn on a clock", () => {
  it.scoped("shows the model, then the tool, with the time advancing on the clock", () =>
    Effect.gen(function*() {
      const { sink, writes } = recorder()
      const progress = yield* Progress.make(sink, "qwen2.5")
      expect(writes).toEqual([])
      yield* progress.observe(submitted)
      expect(writes.at(-1)).toBe(`${Progress.erase}… waiting for the model (qwen2.5) 0.0s`)
      yield* TestClock.adjust("3400 millis")
      expect(writes.at(-1)).toBe(`${Progress.erase}… waiting for the model (qwen2.5) 3.4s`)
      yield* progress.observe(responded("", 1))
      expect(writes.at(-1)).toBe(Progress.erase)
      yield* progress.observe(started({ command: "npm test" }))
      expect(writes.at(-1)).toBe(`${Progress.erase}… running shell {"command":"npm test"} 0.0s`)
      yield* TestClock.adjust("12 seconds")
      expect(writes.at(-1)).toBe(`${Progress.erase}… running shell {"command":"npm test"} 12.0s`)
      // An options change does not restart the call's timer.
      yield* progress.observe(optionsChanged)
      yield* TestClock.adjust("1 second")
      expect(writes.at(-1)).toBe(`${Progress.erase}… running shell {"command":"npm test"} 13.0s`)
      yield* progress.observe(succeeded)
      yield* progress.observe(completed)
      yield* TestClock.adjust("65 seconds")
      expect(writes.at(-1)).toBe(`${Progress.erase}… waiting for the model (qwen2.5) 1m 05s`)
      // A failed model call and its retry: timed anew.
      yield* progress.observe(modelFailed)
      expect(writes.at(-1)).toBe(`${Progress.erase}… waiting for the model (qwen2.5) 0.0s`)
    }))

  it.scoped("redraws about every 200 ms, and writes nothing while the text is the same", () =>
    Effect.gen(function*() {
      const { sink, writes } = recorder()
      const progress = yield* Progress.make(sink)
      yield* progress.observe(submitted)
      const before = writes.length
      yield* TestClock.adjust("1 second")
      expect(writes.length - before).toBe(5)
      const count = writes.length
      yield* progress.redraw
      expect(writes.length).toBe(count)
    }))

  it.scoped("a hostile input is escaped and the drawn line stays within the width", () =>
    Effect.gen(function*() {
      const { sink, writes } = recorder(30)
      const progress = yield* Progress.make(sink)
      yield* progress.observe(started(hostile))
      yield* TestClock.adjust("2 seconds")
      for (const write of writes) {
        expect(write.startsWith(Progress.erase)).toBe(true)
        const text = write.slice(Progress.erase.length)
        expect(text).not.toMatch(controls)
        expect(text.length).toBeLessThan(30)
      }
    }))

  it.scoped("clear erases the line, and only when one is shown; print puts output above it", () =>
    Effect.gen(function*() {
      const { sink, writes } = recorder()
      const progress = yield* Progress.make(sink)
      yield* progress.clear
      expect(writes).toEqual([])
      yield* progress.observe(submitted)
      yield* progress.clear
      expect(writes.at(-1)).toBe(Progress.erase)
      const count = writes.length
      yield* progress.clear
      expect(writes.length).toBe(count)
      yield* progress.redraw
      writes.length = 0
      yield* TestClock.adjust("500 millis")
      yield* progress.print("   1  shell        {} ok 5 ms\u001b]0;x\u0007")
      expect(writes.slice(-3)).toEqual([
        Progress.erase,
        "   1  shell        {} ok 5 ms\\u001b]0;x\\u0007\n",
        `${Progress.erase}… waiting for the model 0.5s`
      ])
    }))

  it.scoped("after Terminated (or a suspension, or a call awaiting approval) nothing is drawn", () =>
    Effect.gen(function*() {
      for (const end of [terminated, suspended, asked]) {
        const { sink, writes } = recorder()
        const progress = yield* Progress.make(sink)
        yield* progress.observe(submitted)
        yield* TestClock.adjust("1 second")
        yield* progress.observe(end)
        expect(writes.at(-1)).toBe(Progress.erase)
        const count = writes.length
        yield* TestClock.adjust("5 seconds")
        yield* progress.observe(cancel)
        yield* progress.redraw
        yield* progress.print("done")
        expect(writes.slice(count)).toEqual(["done\n"])
      }
    }))

  it.effect("closing the scope erases the line and stops the ticker", () =>
    Effect.gen(function*() {
      const { sink, writes } = recorder()
      const scope = yield* Scope.make()
      const progress = yield* Scope.extend(Progress.make(sink), scope)
      yield* progress.observe(started({ command: "sleep 9" }))
      yield* TestClock.adjust("1 second")
      yield* Scope.close(scope, Exit.void)
      expect(writes.at(-1)).toBe(Progress.erase)
      const count = writes.length
      yield* TestClock.adjust("5 seconds")
      yield* progress.redraw
      expect(writes.length).toBe(count)
    }))

  it.scoped("a resume says what runs first; a sink that fails is left alone", () =>
    Effect.gen(function*() {
      const { sink, writes } = recorder()
      const progress = yield* Progress.make(sink, "m")
      yield* progress.set(Progress.resumed(State.fromEvents("g", [submitted])))
      expect(writes.at(-1)).toBe(`${Progress.erase}… waiting for the model (m) 0.0s`)
      let calls = 0
      const broken = yield* Progress.make({
        write: () => {
          calls++
          // What a write to a terminal that is gone does (EIO, EPIPE).
          throw new Error("EIO")
        },
        columns: () => 80
      })
      yield* broken.observe(submitted)
      yield* TestClock.adjust("1 second")
      yield* broken.print("x")
      expect(calls).toBe(1)
    }))
})
