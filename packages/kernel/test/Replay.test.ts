import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc } from "effect"
import { Event, Replay } from "@rx/kernel"
import { record, resumeCut, script } from "./scripts.js"

type Mutation = "output" | "drop" | "swap"

/** Mutate a log; returns the log and the seq at which replay must diverge, if the mutation applies. */
const mutate = (events: ReadonlyArray<Event.Event>, kind: Mutation, pick: number) => {
  if (kind === "output") {
    const targets = events.filter((e) => e._tag === "ToolSucceeded")
    const target = targets[pick % Math.max(1, targets.length)]
    if (target === undefined) return undefined
    const mutated = events.map((e) => (e === target ? { ...target, output: { tampered: true } } : e))
    // The outcome itself is replayed from the log; the summary that ends its iteration no longer matches.
    const summary = events.find((e) => e._tag === "IterationCompleted" && e.seq > target.seq)
    return summary === undefined ? undefined : { events: mutated, seq: summary.seq }
  }
  const s = 1 + (pick % (events.length - 1))
  // Dropping the last event leaves a valid open log (see the next property), not a divergence.
  if (kind === "drop") return s === events.length - 1 ? undefined : { events: events.filter((_, i) => i !== s), seq: s }
  if (s + 1 >= events.length) return undefined
  const swapped = [...events]
  swapped[s] = events[s + 1] as Event.Event
  swapped[s + 1] = events[s] as Event.Event
  return { events: swapped, seq: s }
}

describe("Replay.verify", () => {
  it.effect.prop("every recorded log verifies, with the recorded result", [script], ([s]) =>
    Effect.gen(function*() {
      const { events, result } = yield* record(s)
      const replayed = yield* Replay.verify(events)
      expect(replayed.reason).toBe(result.reason)
      expect(replayed.state).toEqual(result.state)
    }), { fastCheck: { numRuns: 80 } })

  it.effect.prop("a log resumed after a cut still verifies as one run", [script, fc.nat()], ([s, pick]) =>
    Effect.gen(function*() {
      const full = yield* record(s)
      const cuts = full.boundaries.filter((b) => b < full.events.length)
      const cut = cuts[pick % Math.max(1, cuts.length)]
      if (cut === undefined) return
      const resumed = yield* resumeCut(s, full.events, cut)
      expect((yield* Replay.verify(resumed.events)).reason).toBe(resumed.result.reason)
    }), { fastCheck: { numRuns: 60 } })

  it.effect.prop(
    "a changed output, a dropped event or a reordered pair fails with NonDeterminism at the right seq",
    [script, fc.constantFrom<Mutation>("output", "drop", "swap"), fc.nat()],
    ([s, kind, pick]) =>
      Effect.gen(function*() {
        const { events } = yield* record(s)
        const mutation = mutate(events, kind, pick)
        if (mutation === undefined) return
        const error = yield* Effect.flip(Replay.verify(mutation.events))
        expect(error._tag).toBe("@rx/kernel/NonDeterminism")
        if (error._tag === "@rx/kernel/NonDeterminism") {
          expect(error.seq).toBe(mutation.seq)
          expect(error.message).toContain(`diverged at seq ${mutation.seq}`)
        }
      }),
    { fastCheck: { numRuns: 150 } }
  )

  it.effect.prop("an open goal's log, cut at any commit, verifies as far as it goes and says it is open", [script, fc.nat()], ([s, pick]) =>
    Effect.gen(function*() {
      const full = yield* record(s)
      const cuts = full.boundaries.filter((b) => b < full.events.length)
      const cut = cuts[pick % Math.max(1, cuts.length)]
      if (cut === undefined) return
      const verified = yield* Replay.check(full.events.slice(0, cut))
      expect(verified).toEqual({ _tag: "Open", goalId: full.result.goalId, events: cut })
      const error = yield* Effect.flip(Replay.verify(full.events.slice(0, cut)))
      expect(error._tag).toBe("@rx/kernel/ReplayError")
      expect(error.message).toContain("still open")
    }), { fastCheck: { numRuns: 40 } })

  it.effect("a log that does not start with GoalSubmitted cannot be replayed", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Replay.verify([]))
      expect(error._tag).toBe("@rx/kernel/ReplayError")
    }))
})

describe("the replay clock", () => {
  it.live("its sleep returns at once (it waits for nothing, and never reads itself again)", () =>
    Effect.gen(function*() {
      const clock = Replay.recordedClock([])
      const slept = yield* Effect.promise(() =>
        Promise.race([
          Effect.runPromise(Effect.sleep("1 hour").pipe(Effect.withClock(clock), Effect.as("returned"))),
          new Promise<string>((resolve) => setTimeout(() => resolve("still sleeping"), 60_000))
        ])
      )
      expect(slept).toBe("returned")
    }))
})
