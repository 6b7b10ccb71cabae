import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option, Ref, Schema } from "effect"
import { Behaviour, Control, Event, LanguageModel, Options, Replay, Runner, State, StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { echo, eventsOf, layers, ledgerTool, runGoal, tags } from "./fixtures.js"

const { callTool, callToolRaw, done } = LanguageModel

/** Arguments nested `depth` levels deep, as JSON text (never built as a value). */
const nested = (depth: number) => `{"text": "x", "deep": ${"[".repeat(depth)}${"]".repeat(depth)}}`

/** A tool that takes anything: only the kernel's own bounds stand between the model and it. */
const anything = Tool.make({
  name: "anything",
  description: "Takes any input.",
  input: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  output: Schema.Struct({ keys: Schema.Number }),
  idempotent: true,
  execute: (input) => Effect.succeed({ keys: Object.keys(input).length })
})

describe("Runner: answers that could crash it", () => {
  it.effect("arguments nested 100,000 levels deep are rejected with a reason, recorded, and the run goes on", () =>
    Effect.gen(function*() {
      const { events, result } = yield* runGoal("deep")
      expect(result.reason).toBe("done")
      const rejected = events.find((e): e is Event.Of<"ActionRejected"> => e._tag === "ActionRejected")
      expect(rejected).toMatchObject({ kind: "invalid_input" })
      expect(rejected?.reason).toContain("nests more than 64 levels")
      expect((yield* Replay.verify(events)).reason).toBe("done")
    }).pipe(Effect.provide(layers([callToolRaw("anything", nested(100_000)), done("ok")], [anything]))))

  it.effect("an answer over maxAnswerChars is cut before it is recorded, and rejected as too_large", () =>
    Effect.gen(function*() {
      const { events, result } = yield* runGoal("huge", { maxAnswerChars: 100_000 })
      expect(result.reason).toBe("done")
      const responded = events.find((e): e is Event.Of<"ModelResponded"> => e._tag === "ModelResponded")
      expect(responded?.response.oversize).toBeGreaterThan(5_000_000)
      // What the log keeps of it is small.
      expect(Event.encodeJson(events[1] as Event.Event).length).toBeLessThan(10_000)
      expect(events[2]).toMatchObject({ _tag: "ActionRejected", kind: "too_large" })
      expect((yield* Replay.verify(events)).reason).toBe("done")
    }).pipe(Effect.provide(layers([callTool("echo", { text: "x".repeat(5_000_000) }), done("ok")]))))

  it.effect("a call's large input is stored once, in ToolStarted, and replay restores the answer", () =>
    Effect.gen(function*() {
      const big = "y".repeat(50_000)
      const { events, result } = yield* runGoal("big input")
      expect(result.reason).toBe("done")
      const responded = events[1] as Event.Of<"ModelResponded">
      expect(responded.response.toolCalls[0]).toMatchObject({ arguments: "", argumentsInToolStarted: true })
      expect(events[2]).toMatchObject({ _tag: "ToolStarted", input: { text: big } })
      const stored = events.reduce((n, e) => n + Event.encodeJson(e).length, 0)
      expect(stored).toBeLessThan(2.5 * big.length)
      expect((yield* Replay.verify(events)).reason).toBe("done")
    }).pipe(Effect.provide(layers([callTool("echo", { text: "y".repeat(50_000) }), done("ok")]))))

  it.effect("a goal of behaviour 1 (rx 0.1) keeps its rules: no answer cap, no cycle rule", () =>
    Effect.gen(function*() {
      const result = yield* Runner.run({ goal: "old", goalId: "old", options: { maxAnswerChars: 10, maxIterations: 7 }, behaviour: 1 })
      const events = yield* eventsOf("old")
      expect(events[0]).toMatchObject({ _tag: "GoalSubmitted", behaviour: 1 })
      expect(events.some((e) => e._tag === "ActionRejected")).toBe(false)
      expect(result.reason).toBe("max_iterations")
      expect((yield* Replay.verify(events)).reason).toBe("max_iterations")
    }).pipe(Effect.provide(layers(Array.from({ length: 8 }, (_, i) => callTool("echo", { text: i % 2 === 0 ? "a" : "b" }))))))

  it.effect("a log from a newer rx is refused by resume and replay, never misread", () =>
    Effect.gen(function*() {
      const store = yield* StateStore.StateStore
      const future: Event.Event = {
        _tag: "GoalSubmitted", goalId: "f", seq: 0, iteration: 0, at: 1, goal: "g", options: Options.defaults, tools: [],
        behaviour: Behaviour.current + 1
      }
      yield* store.append("f", 0, [future])
      const resumed = yield* Effect.flip(Runner.resume("f"))
      expect(resumed._tag).toBe("@rx/kernel/UnsupportedBehaviour")
      expect(resumed.message).toContain("newer rx")
      const replayed = yield* Effect.flip(Replay.verify([future]))
      expect(replayed._tag).toBe("@rx/kernel/UnsupportedBehaviour")
      expect(yield* eventsOf("f")).toHaveLength(1)
    }).pipe(Effect.provide(layers([]))))
})

describe("Runner: loops that are not exact repeats", () => {
  it.effect("A/B ping-pong ends as no_progress", () =>
    Effect.gen(function*() {
      const { result } = yield* runGoal("ping-pong", { maxRepeats: 3 })
      expect(result.reason).toBe("no_progress")
      expect(result.detail).toContain("the same 2 calls")
      expect(result.iterations).toBe(6)
    }).pipe(Effect.provide(layers(Array.from({ length: 20 }, (_, i) => callTool("echo", { text: i % 2 === 0 ? "a" : "b" }))))))

  it.effect("a cycle of three ends as no_progress; varied calls do not", () =>
    Effect.gen(function*() {
      const { result } = yield* runGoal("cycle", { maxRepeats: 2 })
      expect(result.reason).toBe("no_progress")
      expect(result.detail).toContain("the same 3 calls")
      expect(result.iterations).toBe(7)
    }).pipe(Effect.provide(layers([
      callTool("echo", { text: "warm-up" }),
      ...Array.from({ length: 12 }, (_, i) => callTool("echo", { text: ["a", "b", "c"][i % 3] ?? "" }))
    ]))))

  it.effect("a token budget ends the run as token_budget", () =>
    Effect.gen(function*() {
      const { result } = yield* runGoal("spend", { maxTotalTokens: 250 })
      expect(result.reason).toBe("token_budget")
      expect(result.detail).toContain("limit 250")
      expect(result.iterations).toBe(3)
    }).pipe(Effect.provide(layers(Array.from({ length: 10 }, (_, i) => ({
      ...callTool("echo", { text: `noop${i}` }),
      usage: { inputTokens: 90, outputTokens: 10 }
    }))))))
})

describe("Runner.resume after a crash inside a call", () => {
  it.effect("a pending cancel is honoured before an idempotent call is run again", () =>
    Effect.gen(function*() {
      const runs = yield* Ref.make(0)
      const counted = Tool.make({
        name: "counted",
        description: "Counts its runs.",
        idempotent: true,
        input: Schema.Struct({}),
        output: Schema.Struct({}),
        execute: () => Effect.as(Ref.update(runs, (n) => n + 1), {})
      })
      const store = yield* StateStore.makeMemory
      const submitted: Event.Event = {
        _tag: "GoalSubmitted", goalId: "c", seq: 0, iteration: 0, at: 1, goal: "g", options: Options.defaults,
        tools: [counted.spec], behaviour: Behaviour.current
      }
      yield* store.append("c", 0, [
        submitted,
        { _tag: "ModelResponded", goalId: "c", seq: 1, iteration: 1, at: 2, response: callTool("counted", {}) },
        { _tag: "ToolStarted", goalId: "c", seq: 2, iteration: 1, at: 2, callId: "c:1", tool: "counted", input: {} },
        { _tag: "CancelRequested", goalId: "c", seq: 3, iteration: 1, at: 3, reason: "stop now" }
      ])
      const result = yield* Runner.resume("c").pipe(
        Effect.provide(Layer.mergeAll(Layer.succeed(StateStore.StateStore, store), ToolRegistry.layer([counted]), LanguageModel.layerScripted([])))
      )
      expect(result.reason).toBe("cancelled")
      expect(yield* Ref.get(runs)).toBe(0)
      const events = yield* store.load("c")
      expect(events[4]).toMatchObject({ _tag: "ToolFailed", error: { kind: "unknown" } })
      expect((yield* Replay.verify(events)).reason).toBe("cancelled")
    }))

  it.effect("a non-idempotent tool that can tell the call took effect is recorded as succeeded", () =>
    Effect.gen(function*() {
      const ledger = yield* Ref.make<ReadonlyArray<string>>([])
      const base = ledgerTool(ledger)
      const knowing = Tool.make({
        name: "append",
        description: base.spec.description,
        input: Schema.Struct({ line: Schema.String }),
        output: Schema.Struct({ lines: Schema.Number }),
        idempotent: false,
        execute: () => Effect.die("never run on resume"),
        // The ledger already holds the line: the call took effect.
        recover: ({ line }) => Effect.map(Ref.get(ledger), (lines) =>
          lines.some((l) => l.endsWith(`:${line}`)) ? Option.some({ lines: lines.length }) : Option.none())
      })
      yield* Ref.set(ledger, ["k:1:once"])
      const store = yield* StateStore.makeMemory
      yield* store.append("k", 0, [
        { _tag: "GoalSubmitted", goalId: "k", seq: 0, iteration: 0, at: 1, goal: "g", options: Options.defaults, tools: [knowing.spec], behaviour: 2 },
        { _tag: "ModelResponded", goalId: "k", seq: 1, iteration: 1, at: 2, response: callTool("append", { line: "once" }) },
        { _tag: "ToolStarted", goalId: "k", seq: 2, iteration: 1, at: 2, callId: "k:1", tool: "append", input: { line: "once" } }
      ])
      const result = yield* Runner.resume("k").pipe(
        Effect.provide(Layer.mergeAll(Layer.succeed(StateStore.StateStore, store), ToolRegistry.layer([knowing]), LanguageModel.layerScripted([done("ok")])))
      )
      expect(result.reason).toBe("done")
      const events = yield* store.load("k")
      expect(events[3]).toMatchObject({ _tag: "ToolSucceeded", callId: "k:1", output: { lines: 1 } })
      expect(yield* Ref.get(ledger)).toEqual(["k:1:once"])
      expect((yield* Replay.verify(events)).reason).toBe("done")
    }))
})

describe("Control.changeOptions", () => {
  it.effect("appends OptionsChanged from outside the runner; the reducer and replay follow it", () =>
    Effect.gen(function*() {
      const store = yield* StateStore.StateStore
      yield* store.append("o", 0, [
        { _tag: "GoalSubmitted", goalId: "o", seq: 0, iteration: 0, at: 1, goal: "g", options: Options.defaults, tools: [echo.spec], behaviour: 2 }
      ])
      const changed = yield* Control.changeOptions("o", (current) => ({ ...current, metadata: { sandbox: "none" } }))
      expect(changed).toBe("changed")
      expect(yield* Control.changeOptions("o", (current) => current)).toBe("unchanged")
      const events = yield* eventsOf("o")
      expect(tags(events)).toEqual(["GoalSubmitted", "OptionsChanged"])
      expect(State.fromEvents("o", events).options.metadata).toEqual({ sandbox: "none" })
      const bad = yield* Effect.flip(Control.changeOptions("o", (current) => ({ ...current, maxIterations: 0 })))
      expect(bad._tag).toBe("@rx/kernel/InvalidOptions")
      const result = yield* Runner.resume("o")
      expect(result.reason).toBe("done")
      expect((yield* Replay.verify(yield* eventsOf("o"))).reason).toBe("done")
    }).pipe(Effect.provide(layers([callTool("echo", { text: "hi" }), done("ok")]))))
})

describe("Termination.cycle", () => {
  it("finds periods 2 to 4 repeated `times` times, and not a single repeated call", async () => {
    const { Termination } = await import("@rx/kernel")
    expect(Termination.cycle(["a", "b", "a", "b", "a", "b"], 3)).toBe(2)
    expect(Termination.cycle(["a", "b", "a", "b", "a"], 3)).toBe(0)
    expect(Termination.cycle(["x", "a", "b", "c", "a", "b", "c"], 2)).toBe(3)
    expect(Termination.cycle(["a", "a", "a", "a", "a", "a", "a", "a"], 3)).toBe(0)
    expect(Termination.cycle(["a", "b", "c", "d", "a", "b", "c", "d"], 2)).toBe(4)
    expect(Termination.cycle(["a", "b", "c", "d", "e", "f", "g", "h"], 2)).toBe(0)
  })
})

