/**
 * Whatever a model sends in one answer, what one iteration records is bounded by the goal's
 * options (`maxAnswerChars`, `maxCallsPerAnswer`), never by the number of calls: the calls past
 * the cap are one rejection, and an oversized answer keeps a bounded number of calls.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc, Layer } from "effect"
import { Action, Event, LanguageModel, Options, Replay, Runner, StateStore, ToolRegistry } from "@rx/kernel"
import { echo, eventsOf } from "./fixtures.js"

const noUsage = { inputTokens: 0, outputTokens: 0 }

/** An answer of `n` calls of `echo`, as an OpenAI-compatible server sends them. */
const echoes = (n: number): LanguageModel.Response => ({
  text: "",
  toolCalls: Array.from({ length: n }, (_, i) => ({ id: `call_${i}`, name: "echo", arguments: JSON.stringify({ text: `call ${i}` }) })),
  finishReason: "tool_calls",
  usage: noUsage
})

/** Bytes of the events of `iteration`, as the log stores them (one JSON text each). */
const bytesOf = (events: ReadonlyArray<Event.Event>, iteration: number) =>
  events.filter((e) => e.iteration === iteration).reduce((n, e) => n + Buffer.byteLength(Event.encodeJson(e)), 0)

const run = (goalId: string, answer: LanguageModel.Response, options: Options.Input = {}, behaviour?: number) =>
  Effect.gen(function*() {
    const result = yield* Runner.run({ goal: "one large answer", goalId, options, ...(behaviour === undefined ? {} : { behaviour }) })
    return { result, events: yield* eventsOf(goalId) }
  }).pipe(
    Effect.provide(Layer.mergeAll(StateStore.layerMemory, ToolRegistry.layer([echo]), LanguageModel.layerScripted([answer, LanguageModel.done("ok")])))
  )

describe("An answer with thousands of calls", () => {
  it.effect("10,000 calls: the first maxCallsPerAnswer run, one rejection covers the rest, and the iteration's log stays under maxAnswerChars", () =>
    Effect.gen(function*() {
      const { events, result } = yield* run("big", echoes(10_000))
      expect(result.reason).toBe("done")
      const { maxAnswerChars, maxCallsPerAnswer } = Options.defaults
      expect(events.filter((e) => e._tag === "ToolStarted")).toHaveLength(maxCallsPerAnswer)
      const rejected = events.filter((e) => e._tag === "ActionRejected")
      expect(rejected).toHaveLength(1)
      expect(rejected[0]).toMatchObject({ kind: "too_many_calls", dropped: 10_000 - maxCallsPerAnswer, raw: "" })
      // The answer itself (about 650 kB of JSON) is recorded once; the rest is a few kB.
      const bytes = bytesOf(events, 1)
      expect(bytes).toBeLessThan(maxAnswerChars + 16_000)
      const answer = events.find((e) => e._tag === "ModelResponded")
      expect(bytes - Buffer.byteLength(Event.encodeJson(answer ?? events[0] as Event.Event))).toBeLessThan(8_000)
      expect((yield* Replay.verify(events)).reason).toBe("done")
    }), 60_000)

  it.effect("behaviour 2 recorded one rejection per call past the cap (its logs keep that rule)", () =>
    Effect.gen(function*() {
      const { events } = yield* run("big-v2", echoes(1_000), {}, 2)
      expect(events.filter((e) => e._tag === "ActionRejected")).toHaveLength(1_000 - Options.defaults.maxCallsPerAnswer)
      expect((yield* Replay.verify(events)).reason).toBe("done")
    }), 60_000)

  it.effect("an oversized answer of 10,000 calls with long ids is rejected whole, and recorded with a few calls only", () =>
    Effect.gen(function*() {
      const answer = echoes(10_000)
      const longIds = { ...answer, toolCalls: answer.toolCalls.map((call, i) => ({ ...call, id: `${"x".repeat(1_000)}${i}` })) }
      const { events } = yield* run("ids", longIds, { maxAnswerChars: 100_000 })
      expect(events.find((e) => e._tag === "ActionRejected")).toMatchObject({ kind: "too_large" })
      expect(events.filter((e) => e._tag === "ToolStarted")).toHaveLength(0)
      const recorded = events.find((e) => e._tag === "ModelResponded")
      expect(recorded?._tag === "ModelResponded" ? recorded.response.toolCalls.length : -1).toBe(Action.oversizeCallsKept)
      expect(bytesOf(events, 1)).toBeLessThan(40_000)
      expect((yield* Replay.verify(events)).reason).toBe("done")
    }), 60_000)

  // Any answer at all: the bytes one iteration records are bounded by a constant times
  // maxAnswerChars (JSON escapes a character in at most 6 bytes, and the answer, the started
  // calls' inputs and echo's outputs each hold at most the answer's characters), plus a constant.
  const text = fc.string({ unit: "binary", maxLength: 40 })
  const call = fc.record({
    id: text,
    name: fc.oneof(fc.constant("echo"), fc.constant("done"), text),
    arguments: fc.oneof(text.map((t) => JSON.stringify({ text: t })), text, fc.string({ unit: "binary", minLength: 1_000, maxLength: 3_000 }))
  })
  const answer = fc.record({
    text: fc.oneof(fc.constant(""), text),
    toolCalls: fc.oneof(fc.array(call, { maxLength: 20 }), fc.array(call, { minLength: 500, maxLength: 3_000 })),
    finishReason: fc.constantFrom("tool_calls" as const, "stop" as const, "length" as const, "content_filter" as const)
  })
  it.effect.prop(
    "whatever one answer holds, its iteration records at most 18 x maxAnswerChars + 64 kB",
    [answer, fc.integer({ min: 2_000, max: 50_000 }), fc.integer({ min: 1, max: 8 })],
    ([response, maxAnswerChars, maxCallsPerAnswer]) =>
      Effect.gen(function*() {
        const { events } = yield* run("any", { ...response, usage: noUsage }, { maxAnswerChars, maxCallsPerAnswer })
        expect(bytesOf(events, 1)).toBeLessThanOrEqual(18 * maxAnswerChars + 64_000)
        expect(events.filter((e) => e._tag === "ActionRejected" && e.kind === "too_many_calls").length).toBeLessThanOrEqual(1)
      }),
    { fastCheck: { numRuns: 40 } }
  )
})
