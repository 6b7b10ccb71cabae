import { describe, expect, it } from "@effect/vitest"
import { Audit, type Event } from "@rx/kernel"
import { Effect } from "effect"
import { record, script } from "./scripts.js"

/** The events each reason's audit may cite. */
const cites: Record<Event.Reason, ReadonlyArray<Event.Event["_tag"]>> = {
  done: ["ModelResponded"],
  max_iterations: ["IterationCompleted"],
  fatal_error: ["ModelFailed", "ToolFailed"],
  repeated_failure: ["ToolFailed"],
  malformed_output: ["ActionRejected"],
  no_progress: ["ToolSucceeded", "ToolFailed", "ActionRejected"],
  cancelled: ["CancelRequested"],
  token_budget: ["ModelResponded"]
}

describe("Audit.of", () => {
  it.effect.prop(
    "of any run: the Terminated's reason, seq and detail, and only events of the kind that reason cites, before it, in order",
    [script],
    ([s]) =>
      Effect.gen(function*() {
        const { events } = yield* record(s)
        const end = events.findLast((e): e is Event.Of<"Terminated"> => e._tag === "Terminated")
        const audit = Audit.of(events)
        if (end === undefined) return expect(audit).toBeUndefined()
        expect(audit).toMatchObject({ reason: end.reason, seq: end.seq, at: end.at, detail: end.detail })
        const seqs = audit?.evidence.map((e) => e.seq) ?? []
        expect(seqs).toEqual([...seqs].sort((a, b) => a - b))
        for (const e of audit?.evidence ?? []) {
          expect(cites[end.reason]).toContain(e._tag)
          expect(e.seq).toBeLessThan(end.seq)
        }
        // Open (the log cut before its end): no audit.
        expect(Audit.of(events.slice(0, end.seq))).toBeUndefined()
      }),
    { fastCheck: { numRuns: 60 } }
  )

  it.effect.prop(
    "the limit is the one in force at the end: a later OptionsChanged wins over GoalSubmitted",
    [script],
    ([s]) =>
      Effect.gen(function*() {
        const { events } = yield* record(s)
        const end = events.at(-1)
        const first = events[0]
        expect(end?._tag).toBe("Terminated")
        expect(first?._tag).toBe("GoalSubmitted")
        if (end?._tag !== "Terminated" || first?._tag !== "GoalSubmitted") return
        // Whatever ended it, read as the iteration limit: the limit named is the one in force.
        const atLimit = { ...end, reason: "max_iterations" as const }
        expect(Audit.of([...events.slice(0, -1), atLimit])?.limit).toBe(`maxIterations = ${first.options.maxIterations}`)
        const raised: Event.Event = { _tag: "OptionsChanged", goalId: first.goalId, seq: end.seq, iteration: end.iteration, at: end.at, options: { ...first.options, maxIterations: 999 } }
        expect(Audit.of([...events.slice(0, -1), raised, { ...atLimit, seq: end.seq + 1 }])?.limit).toBe("maxIterations = 999")
      }),
    { fastCheck: { numRuns: 60 } }
  )
})
