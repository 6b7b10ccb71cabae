import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, FastCheck as fc, Schema } from "effect"
import { Event, LanguageModel, Replay, State, Tool } from "@rx/kernel"
import { endsOnce, layers, runGoal } from "./fixtures.js"
import { record, script } from "./scripts.js"

const { callTool, done } = LanguageModel

describe("Recorded summaries", () => {
  it.effect.prop("every IterationCompleted summary is State.summary of the fold up to and including it", [script], ([s]) =>
    Effect.gen(function*() {
      const { events } = yield* record(s)
      let state = State.empty("prop-goal")
      for (const event of events) {
        state = State.reduce(state, event)
        if (event._tag === "IterationCompleted") expect(event.summary).toEqual(State.summary(state))
      }
    }), { fastCheck: { numRuns: 60 } })

  it.effect("idle iterations are counted as of the iteration they summarise (flaky, flaky, echo, done)", () =>
    Effect.gen(function*() {
      const { events } = yield* runGoal("idle", { maxRepeats: 10 })
      const idle = events.flatMap((e) => (e._tag === "IterationCompleted" ? [e.summary.idleIterations] : []))
      expect(idle).toEqual([1, 2, 0, 1])
    }).pipe(Effect.provide(layers([callTool("flaky", {}), callTool("flaky", {}), callTool("echo", { text: "x" }), done("ok")]))))
})

describe("Tool output that is not plain JSON", () => {
  const weird = (output: () => unknown) =>
    Tool.make({
      name: "weird",
      description: "Returns something JSON cannot hold.",
      input: Schema.Struct({}),
      output: Schema.Unknown,
      idempotent: true,
      execute: () => Effect.sync(output)
    })
  const cyclic = () => {
    const value: Record<string, unknown> = { a: 1 }
    value["self"] = value
    return value
  }
  const cases: ReadonlyArray<readonly [string, () => unknown]> = [
    ["a BigInt", () => ({ n: 10n })],
    ["a cycle", cyclic],
    ["undefined inside an array", () => ({ list: [1, undefined, 3] })],
    ["NaN", () => ({ n: Number.NaN })],
    ["nesting 100,000 deep", () => {
      let value: unknown = []
      for (let i = 0; i < 100_000; i++) value = [value]
      return value
    }]
  ]
  for (const [name, output] of cases) {
    it.effect(`${name} becomes a recorded failure the model sees; the goal goes on`, () =>
      Effect.gen(function*() {
        const { events, result } = yield* runGoal("weird")
        expect(result.reason).toBe("done")
        const failed = events.find((e): e is Event.Of<"ToolFailed"> => e._tag === "ToolFailed")
        expect(failed?.error).toMatchObject({ kind: "recoverable" })
        expect(failed?.error.message).toContain("not plain JSON")
        for (const event of events) expect(Either.isRight(Event.decodeJson(Event.encodeJson(event)))).toBe(true)
        expect(endsOnce(events)).toBe(true)
        expect((yield* Replay.verify(events)).reason).toBe("done")
      }).pipe(Effect.provide(layers([callTool("weird", {}), done("ok")], [weird(output)]))))
  }
})

describe("Replay compares decisions, not wording", () => {
  /** Reword every text the runner writes itself; decisions stay. */
  const reword = (event: Event.Event): Event.Event => {
    switch (event._tag) {
      case "Terminated": return { ...event, detail: `reworded: ${event.detail}` }
      case "ActionRejected": return { ...event, reason: `reworded: ${event.reason}`, raw: "" }
      case "IterationCompleted": return { ...event, summary: { ...event.summary, idleIterations: 99, repeats: 99 }, at: 0 }
      case "ToolFailed": return event.error.kind === "unknown" ? { ...event, error: { ...event.error, message: "reworded" } } : event
      default: return { ...event, at: event.at + 1 }
    }
  }

  it.effect.prop("a log whose wording, times and counters differ still verifies", [script], ([s]) =>
    Effect.gen(function*() {
      const { events, result } = yield* record(s)
      expect((yield* Replay.verify(events.map(reword))).reason).toBe(result.reason)
    }), { fastCheck: { numRuns: 60 } })

  it.effect.prop("another decision (a call's input, a termination reason) is a divergence at its seq", [script, fc.nat()], ([s, pick]) =>
    Effect.gen(function*() {
      const { events } = yield* record(s)
      const targets = events.filter((e) => e._tag === "ToolStarted" || e._tag === "Terminated")
      const target = targets[pick % targets.length]
      if (target === undefined) return
      const changed = events.map((e): Event.Event =>
        e !== target ? e : e._tag === "ToolStarted" ? { ...e, input: { other: true } } : e._tag === "Terminated"
          ? { ...e, reason: e.reason === "done" ? "cancelled" : "done" }
          : e
      )
      const error = yield* Effect.flip(Replay.verify(changed))
      expect(error._tag).toBe("@rx/kernel/NonDeterminism")
      if (error._tag === "@rx/kernel/NonDeterminism") expect(error.seq).toBe(target.seq)
    }), { fastCheck: { numRuns: 60 } })
})

describe("Event versions", () => {
  const v1Submitted = {
    _tag: "GoalSubmitted", goalId: "g", seq: 0, iteration: 0, at: 1, goal: "x",
    options: { maxIterations: 50, maxConsecutiveFailures: 3, maxMalformed: 3, maxRepeats: 3, noProgressWindow: 8, promptBudget: 32000, metadata: {} },
    tools: []
  }

  it("an rx 0.1 event (version 1) is upcast explicitly: behaviour 1, the validator's verdict split from the reason", () => {
    const submitted = Event.decode(v1Submitted, 1)
    expect(Either.getOrThrow(submitted)).toMatchObject({ _tag: "GoalSubmitted", behaviour: 1 })
    // The current version does not guess: a GoalSubmitted without its behaviour is refused.
    expect(Either.isLeft(Event.decode(v1Submitted))).toBe(true)
    const rejected = Event.decode({
      _tag: "ActionRejected", goalId: "g", seq: 3, iteration: 1, at: 2, kind: "invalid_input",
      reason: "invalid input for echo: { readonly text: string }\n└─ [\"text\"]\n   └─ is missing", raw: "{}"
    }, 1)
    expect(Either.getOrThrow(rejected)).toMatchObject({ validation: "{ readonly text: string }\n└─ [\"text\"]\n   └─ is missing" })
  })

  it("a version-2 event's settings, loose keys of its metadata, are upcast to options.settings; the caller's own keys stay", () => {
    const metadata = {
      workspace: "/w", sandbox: "none", model: "m", baseUrl: "http://127.0.0.1:1/v1", tools: ["read_file"], volume: "vol-1",
      mcp: [{ name: "fs", command: ["npx", "fs"] }],
      // Not a setting, or not of a setting's shape: left where it was.
      idempotency: { key: "k" }, team: "blue", threads: "many"
    }
    const submitted = Either.getOrThrow(Event.decode({ ...v1Submitted, behaviour: 2, options: { ...v1Submitted.options, metadata } }, 2))
    if (submitted._tag !== "GoalSubmitted") return expect.unreachable()
    expect(submitted.options.settings).toEqual({
      workspace: "/w", sandbox: "none", model: "m", baseUrl: "http://127.0.0.1:1/v1", tools: ["read_file"], volume: "vol-1",
      mcp: [{ name: "fs", command: ["npx", "fs"] }]
    })
    expect(submitted.options.metadata).toEqual({ idempotency: { key: "k" }, team: "blue", threads: "many" })
    const changed = Either.getOrThrow(Event.decode({ _tag: "OptionsChanged", goalId: "g", seq: 4, iteration: 1, at: 3, options: { ...v1Submitted.options, metadata: { model: "n" } } }, 2))
    expect(changed._tag === "OptionsChanged" && changed.options).toMatchObject({ settings: { model: "n" }, metadata: {} })
    // A version-3 event is read as written: metadata is the caller's.
    const current = Either.getOrThrow(Event.decode({ ...v1Submitted, behaviour: 3, options: { ...v1Submitted.options, metadata: { model: "mine" } } }))
    expect(current._tag === "GoalSubmitted" && current.options).toMatchObject({ metadata: { model: "mine" } })
    expect(current._tag === "GoalSubmitted" && current.options.settings).toBeUndefined()
  })

  it("an event of a future version is refused with a message that says to upgrade", () => {
    const decoded = Event.decode(v1Submitted, Event.version + 1)
    expect(Either.isLeft(decoded)).toBe(true)
    if (Either.isLeft(decoded)) expect(decoded.left).toContain("newer rx")
  })
})
