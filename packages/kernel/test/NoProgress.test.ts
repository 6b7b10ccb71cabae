/**
 * No progress, seen in results (behaviour 3): calls whose arguments vary but whose results do
 * not (`echo noop1`, `echo noop2`, ...; a read with a growing limit past the file's end) end as
 * `no_progress` after `maxRepeats` results in a row observed the same. Only tools that say what
 * a result observes count, so a result that differs, or a tool whose effect its result does not
 * show, never ends a run by this rule.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc, Layer, Schema } from "effect"
import { LanguageModel, Replay, Runner, StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { eventsOf } from "./fixtures.js"

const { callTool, done } = LanguageModel

/** A read-only probe: it returns what the script says, and says its result observes exactly that. */
const probe = (outputs: ReadonlyArray<string>) =>
  Tool.make({
    name: "probe",
    description: "Look at something.",
    input: Schema.Struct({ n: Schema.Number }),
    output: Schema.Struct({ seen: Schema.String }),
    idempotent: true,
    execute: ({ n }) => Effect.succeed({ seen: outputs[n] ?? "" }),
    observation: (_input, output) => output.seen
  })

/** A tool with an effect its result does not show: it never says what it observes. */
const act = Tool.make({
  name: "act",
  description: "Do something.",
  input: Schema.Struct({ n: Schema.Number }),
  output: Schema.Struct({ ok: Schema.Boolean }),
  idempotent: false,
  execute: () => Effect.succeed({ ok: true })
})

const runCalls = (tool: string, outputs: ReadonlyArray<string>, count: number, maxRepeats: number, behaviour?: number) =>
  Effect.gen(function*() {
    const steps = [...Array.from({ length: count }, (_, n) => callTool(tool, { n })), done("finished")]
    const result = yield* Runner.run({
      goal: "look around",
      goalId: "np",
      options: { maxRepeats, maxIterations: count + 1, noProgressWindow: 100 },
      ...(behaviour === undefined ? {} : { behaviour })
    }).pipe(Effect.provide(Layer.mergeAll(ToolRegistry.layer([probe(outputs), act]), LanguageModel.layerScripted(steps))))
    return { result, events: yield* eventsOf("np") }
  }).pipe(Effect.provide(StateStore.layerMemory))

describe("no progress seen in results", () => {
  it.effect("calls with other arguments and the same result end as no_progress at the maxRepeats-th; replay agrees", () =>
    Effect.gen(function*() {
      const { events, result } = yield* runCalls("probe", ["same", "same", "same", "same", "same"], 5, 3)
      expect(result).toMatchObject({ reason: "no_progress", iterations: 3 })
      expect(result.status === "terminated" ? result.detail : "").toContain("3 calls in a row gave the same result, whatever their arguments")
      expect(events.filter((e) => e._tag === "ToolSucceeded").map((e) => e._tag === "ToolSucceeded" && typeof e.observed === "string")).toEqual([true, true, true])
      expect((yield* Replay.verify(events)).reason).toBe("no_progress")
    }))

  it.effect("behaviour 2 logs keep their rules: the same loop runs to its end", () =>
    Effect.gen(function*() {
      const { events, result } = yield* runCalls("probe", ["same", "same", "same", "same", "same"], 5, 3, 2)
      expect(result.reason).toBe("done")
      expect(events.filter((e) => e._tag === "ToolSucceeded" && e.observed !== undefined)).toEqual([])
      expect((yield* Replay.verify(events)).reason).toBe("done")
    }))

  it.effect("a tool that does not say what it observes never counts, whatever it returns", () =>
    Effect.gen(function*() {
      const { result } = yield* runCalls("act", [], 8, 2)
      expect(result.reason).toBe("done")
    }))

  // The invariant: a result that differs from the one before it is progress. Whatever the
  // outputs, as long as no two results in a row observe the same, the run is never ended by this
  // rule (the calls all differ, so the older rules cannot end it either).
  const differing = fc.array(fc.constantFrom("a", "b", "c"), { minLength: 1, maxLength: 20 }).map((xs) => xs.filter((x, i) => i === 0 || x !== xs[i - 1]))
  it.effect.prop("results that each differ from the one before never end the run", [differing, fc.integer({ min: 2, max: 4 })], ([outputs, maxRepeats]) =>
    Effect.gen(function*() {
      const { result } = yield* runCalls("probe", outputs, outputs.length, maxRepeats)
      expect(result.reason).toBe("done")
    }), { fastCheck: { numRuns: 60 } })

  // And the other way: the run ends at the first point where maxRepeats results in a row observed the same, and not before.
  const outputs = fc.array(fc.constantFrom("a", "b"), { minLength: 1, maxLength: 20 })
  it.effect.prop("the run ends exactly where maxRepeats results in a row first observe the same", [outputs, fc.integer({ min: 2, max: 4 })], ([seen, maxRepeats]) =>
    Effect.gen(function*() {
      const { result } = yield* runCalls("probe", seen, seen.length, maxRepeats)
      let run = 0
      const end = seen.findIndex((x, i) => (run = i > 0 && x === seen[i - 1] ? run + 1 : 1) >= maxRepeats)
      if (end === -1) expect(result.reason).toBe("done")
      else expect(result).toMatchObject({ reason: "no_progress", iterations: end + 1 })
    }), { fastCheck: { numRuns: 80 } })

  it.effect("a failure in between starts the count again", () =>
    Effect.gen(function*() {
      const flaky = Tool.make({
        name: "broken",
        description: "Fails.",
        input: Schema.Struct({}),
        output: Schema.Struct({}),
        idempotent: true,
        execute: () => Effect.fail(Tool.ToolError.recoverable("no"))
      })
      const steps = [callTool("probe", { n: 0 }), callTool("probe", { n: 1 }), callTool("broken", {}), callTool("probe", { n: 2 }), done("ok")]
      const result = yield* Runner.run({ goal: "g", goalId: "f", options: { maxRepeats: 3 } }).pipe(
        Effect.provide(Layer.mergeAll(ToolRegistry.layer([probe(["x", "x", "x"]), flaky]), LanguageModel.layerScripted(steps)))
      )
      expect(result.reason).toBe("done")
    }).pipe(Effect.provide(StateStore.layerMemory)))
})
