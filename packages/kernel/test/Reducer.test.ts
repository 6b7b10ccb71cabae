import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Effect, Either, FastCheck as fc, Schema } from "effect"
import { Event, Options, State } from "@rx/kernel"
import { record, script } from "./scripts.js"

const anyEvent = Arbitrary.make(Event.Event)
const encodeState = Schema.encodeSync(State.State)

describe("State.reduce", () => {
  it.prop("is total: any sequence of any events folds to an encodable State", [fc.array(anyEvent, { maxLength: 60 })], ([events]) => {
    const state = State.fromEvents("g", events)
    expect(state.seq).toBe(events.length === 0 ? 0 : (events[events.length - 1] as Event.Event).seq + 1)
    expect(() => encodeState(state)).not.toThrow()
  })

  it.effect.prop("folds every log the runner produces, one event at a time, to the runner's own State", [script], ([s]) =>
    Effect.gen(function*() {
      const { events, result } = yield* record(s)
      expect(State.fromEvents("prop-goal", events)).toEqual(result.state)
    }), { fastCheck: { numRuns: 60 } })

  const at = 5
  const base = { goalId: "g", at }
  const submitted = State.reduce(State.empty("g"), {
    ...base, _tag: "GoalSubmitted", seq: 0, iteration: 0, goal: "do it", options: Options.defaults, tools: [], behaviour: 2
  })

  it("GoalSubmitted sets the goal, options and tools", () => {
    expect(submitted.goal).toBe("do it")
    expect(submitted.options).toEqual(Options.defaults)
    expect(submitted.seq).toBe(1)
  })

  it("a call, its outcome and the iteration's end update the counters", () => {
    const response = { text: "t", toolCalls: [], finishReason: "tool_calls", usage: { inputTokens: 10, outputTokens: 2 } } as const
    let s = State.reduce(submitted, { ...base, _tag: "ModelResponded", seq: 1, iteration: 1, response })
    expect(s.turns).toHaveLength(1)
    expect(s.usage).toEqual({ inputTokens: 10, outputTokens: 2 })
    s = State.reduce(s, { ...base, _tag: "ToolStarted", seq: 2, iteration: 1, callId: "g:1", tool: "echo", input: { text: "x" } })
    expect(s.pending).toEqual({ callId: "g:1", tool: "echo", input: { text: "x" }, startedAt: at })
    expect(s.toolCalls).toBe(1)
    const failed = State.reduce(s, {
      ...base, _tag: "ToolFailed", seq: 3, iteration: 1, callId: "g:1", tool: "echo", error: { kind: "recoverable", message: "no" }, durationMs: 1
    })
    expect(failed.pending).toBeNull()
    expect(failed.consecutiveFailures).toBe(1)
    expect(failed.turns[0]?.calls[0]?.result).toEqual({ status: "error", content: "recoverable error: no" })
    s = State.reduce(s, { ...base, _tag: "ToolSucceeded", seq: 3, iteration: 1, callId: "g:1", tool: "echo", output: { text: "x" }, durationMs: 1 })
    expect(s.pending).toBeNull()
    expect(s.progressed).toBe(true)
    expect(s.repeat.count).toBe(1)
    s = State.reduce(s, {
      ...base, _tag: "IterationCompleted", seq: 4, iteration: 1,
      summary: { toolCalls: 1, consecutiveFailures: 0, consecutiveMalformed: 0, idleIterations: 0, repeats: 1, last: "ok", fingerprint: "" }
    })
    expect(s.completed).toBe(1)
    expect(s.idleIterations).toBe(0)
  })

  it("an answer that started no call counts as malformed once its iteration ends; a cancel request and Terminated are kept", () => {
    const response = { text: "hmm", toolCalls: [], finishReason: "stop", usage: { inputTokens: 0, outputTokens: 0 } } as const
    let s = State.reduce(submitted, { ...base, _tag: "ModelResponded", seq: 1, iteration: 1, response })
    s = State.reduce(s, { ...base, _tag: "ActionRejected", seq: 2, iteration: 1, kind: "no_action", reason: "r", raw: "" })
    expect(s.consecutiveMalformed).toBe(0)
    s = State.reduce(s, {
      ...base, _tag: "IterationCompleted", seq: 3, iteration: 1,
      summary: { toolCalls: 0, consecutiveFailures: 0, consecutiveMalformed: 1, idleIterations: 1, repeats: 0, last: "rejected", fingerprint: "" }
    })
    expect(s.consecutiveMalformed).toBe(1)
    s = State.reduce(s, { ...base, _tag: "CancelRequested", seq: 4, iteration: 1, reason: "stop" })
    expect(s.cancelRequested).toBe("stop")
    s = State.reduce(s, { ...base, _tag: "Terminated", seq: 5, iteration: 1, reason: "cancelled", detail: "stop" })
    expect(s.terminated).toEqual({ reason: "cancelled", detail: "stop" })
  })

  it("keeps at most maxTurns turns and counts the rest", () => {
    let s = submitted
    const response = { text: "", toolCalls: [], finishReason: "stop", usage: { inputTokens: 0, outputTokens: 0 } } as const
    for (let i = 1; i <= State.maxTurns + 5; i++) {
      s = State.reduce(s, { ...base, _tag: "ModelResponded", seq: i, iteration: i, response })
    }
    expect(s.turns).toHaveLength(State.maxTurns)
    expect(s.omitted).toBe(5)
  })
})

describe("Event decoding", () => {
  const decodeSchema = Schema.decodeUnknownEither(Event.Event)
  // Valid events, and variations that must be refused or normalised by the Schema.
  const candidates = fc.oneof(
    anyEvent.map((e): unknown => Schema.encodeSync(Event.Event)(e)),
    fc.tuple(anyEvent, fc.constantFrom("seq", "at", "goalId", "_tag", "iteration"), fc.constantFrom(-1, 1.5, "x", null, undefined, {})).map(
      ([e, key, value]): unknown => ({ ...Schema.encodeSync(Event.Event)(e), [key]: value })
    ),
    fc.tuple(anyEvent, fc.string()).map(([e, extra]): unknown => ({ ...Schema.encodeSync(Event.Event)(e), [`x${extra}`]: 1 })),
    fc.anything()
  )

  it.prop("the fast path agrees with the Schema on every value: same verdict, same result", [candidates], ([value]) => {
    const fast = Event.decode(value)
    const slow = decodeSchema(value)
    expect(fast._tag).toBe(slow._tag)
    if (Either.isRight(fast) && Either.isRight(slow)) expect(fast.right).toEqual(slow.right)
  }, { fastCheck: { numRuns: 2_000 } })

  it.prop("every valid event takes the fast path", [anyEvent], ([event]) => {
    expect(Event.is(Schema.encodeSync(Event.Event)(event))).toBe(true)
  })

  it("a stored event round-trips through its JSON", () => {
    const event = { _tag: "CancelRequested", goalId: "g", seq: 3, iteration: 1, at: 5, reason: "stop" } as const
    const decoded = Event.decodeJson(Event.encodeJson(event))
    expect(Either.isRight(decoded) && decoded.right).toEqual(event)
    expect(Either.isLeft(Event.decodeJson("{\"_tag\":\"CancelRequested\"}"))).toBe(true)
    expect(Either.isLeft(Event.decodeJson("not json"))).toBe(true)
  })
})
