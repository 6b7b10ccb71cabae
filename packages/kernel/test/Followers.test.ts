/**
 * The followers of a database store's goals in one process: each gets the events it wants in
 * order, and reads the log only when it starts, across a gap and after a change by other means;
 * batches of other goals, or with nothing it wants, neither wake it nor make it read.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Fiber } from "effect"
import { type Event, Followers } from "@rx/kernel"
import { StoreConformance } from "@rx/kernel/testing"

/** A two-iteration log of `goalId`: seqs 0-4 as in the sample log, 5-8 the second iteration, 9 Terminated. */
const twoIterations = (goalId: string): ReadonlyArray<Event.Event> => {
  const sample = StoreConformance.sampleLog(goalId)
  const second = sample.slice(1, 5).map((e) => ({ ...e, seq: e.seq + 4, iteration: 2 }))
  return [...sample.slice(0, 5), ...second, ...sample.slice(5).map((e) => ({ ...e, seq: 9, iteration: 2 }))]
}

/** A log in memory that the followers read, counting the reads. */
const database = (log: ReadonlyArray<Event.Event>) => {
  let stored = 0
  const reads: Array<number> = []
  return {
    reads,
    /** Commit the log's events up to `to` (not handed to the followers: another connection's). */
    commit: (to: number) => void (stored = to),
    read: (tags: ReadonlyArray<string> | undefined) => (from: number) =>
      Effect.sync(() => {
        reads.push(from)
        return { events: log.slice(from, stored).filter((e) => tags === undefined || tags.includes(e._tag)), end: Math.max(from, stored) }
      })
  }
}

describe("Followers", () => {
  it.scoped("a follower of some kinds gets them in order, reading only at its start, across a gap and after a change by other means", () =>
    Effect.gen(function*() {
      const log = twoIterations("g")
      expect(log.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
      const db = database(log)
      const followers = Followers.make()
      /** This process's append of seqs `[from, to)`: committed, then handed over. */
      const append = (from: number, to: number) => {
        db.commit(to)
        followers.appended("g", from, log.slice(from, to))
      }
      append(0, 1)
      const tags = ["ToolSucceeded", "Terminated"]
      const next = yield* followers.follow("g", 1, tags, db.read(tags))
      const seen: Array<Event.Event> = []
      const pull = Effect.map(next, (events) => void seen.push(...Chunk.toReadonlyArray(events)))
      const pulling = yield* Effect.fork(Effect.repeat(pull, { until: () => seen.at(-1)?._tag === "Terminated" }))
      yield* Effect.yieldNow()
      expect(db.reads).toEqual([1])

      // Nothing wanted in 1 and 2, nor in another goal's append: no read, nothing given.
      append(1, 2)
      append(2, 3)
      followers.appended("other", 0, StoreConformance.sampleLog("other").slice(0, 1))
      yield* Effect.yieldNow()
      expect(db.reads).toEqual([1])
      // 3 is wanted: handed over after the range 1-3, no read.
      append(3, 4)
      yield* Effect.yieldNow()
      expect(seen.map((e) => e.seq)).toEqual([3])
      expect(db.reads).toEqual([1])

      // 4 here, 5 through another connection, 6 here again: the range 4-5 goes first, then a gap at 5 is read.
      append(4, 5)
      db.commit(6)
      append(6, 7)
      append(7, 8)
      yield* Effect.yieldNow()
      expect(seen.map((e) => e.seq)).toEqual([3, 7])
      expect(db.reads).toEqual([1, 5])

      // A change by other means (another connection committed 8 and 9): read from where it stands.
      db.commit(10)
      followers.changed("g")
      yield* Fiber.join(pulling)
      expect(seen.map((e) => [e.seq, e._tag])).toEqual([[3, "ToolSucceeded"], [7, "ToolSucceeded"], [9, "Terminated"]])
      expect(db.reads).toEqual([1, 5, 8])
    }))

  it.scoped("a follower of every kind gets each batch as handed over, and a change of another goal does not make it read", () =>
    Effect.gen(function*() {
      const log = twoIterations("g")
      const db = database(log)
      const followers = Followers.make()
      const next = yield* followers.follow("g", 0, undefined, db.read(undefined))
      const seen: Array<number> = []
      const pulling = yield* Effect.fork(Effect.repeat(Effect.map(next, (events) => void seen.push(...Chunk.toReadonlyArray(events).map((e) => e.seq))), {
        until: () => seen.at(-1) === 9
      }))
      yield* Effect.yieldNow()
      for (const [from, to] of [[0, 2], [2, 5], [5, 10]] as const) {
        db.commit(to)
        followers.appended("g", from, log.slice(from, to))
        followers.changed("other")
        yield* Effect.yieldNow()
      }
      yield* Fiber.join(pulling)
      expect(seen).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
      // Only its first read: every batch came handed over.
      expect(db.reads).toEqual([0])
    }))
})
