/**
 * The notifications of the store's own appends are passed over, others make the followers of
 * their goal read; another session's notification taken for an append's own is never lost, even
 * when that append fails.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect } from "effect"
import { type Event, Followers } from "@rx/kernel"
import { StoreConformance } from "@rx/kernel/testing"
import * as Echoes from "../src/internal/echoes.js"

const settle = Effect.repeatN(Effect.yieldNow(), 5)

/** Goal `g`'s log as committed in the database, read by its followers (each read counted). */
const setup = Effect.gen(function*() {
  const log = StoreConformance.sampleLog("g")
  let stored = 1
  const reads: Array<number> = []
  const followers = Followers.make()
  const echoes = Echoes.make(followers)
  const next = yield* followers.follow("g", 0, undefined, (from) =>
    Effect.sync(() => {
      reads.push(from)
      return { events: log.slice(from, stored), end: Math.max(from, stored) }
    }))
  const seen: Array<number> = []
  const pull = Effect.map(next, (events) => void seen.push(...Chunk.toReadonlyArray(events).map((e: Event.Event) => e.seq)))
  yield* pull
  yield* Effect.forkScoped(Effect.forever(pull))
  yield* Effect.yieldNow()
  /** Another session commits up to `to`; its notification is not said here. */
  const commitElsewhere = (to: number) => void (stored = to)
  /** This store's append of `[from, to)`, committed and handed to the followers. */
  const commitHere = (from: number, to: number) => {
    stored = to
    followers.appended("g", from, log.slice(from, to))
  }
  /** While an append of this store is in flight, another session commits seq 1 and its notification comes: taken for the append's own, it makes no read. */
  const takenForOwn = Effect.gen(function*() {
    echoes.sending("g")
    commitElsewhere(2)
    echoes.notified("g")
    yield* settle
    expect([seen, reads]).toEqual([[0], [0]])
  })
  /** Once seq 1 is seen: another session commits seq 2 and notifies, and the followers read it (nothing is expected any more). */
  const nextIsRead = Effect.gen(function*() {
    commitElsewhere(3)
    echoes.notified("g")
    yield* settle
    expect(seen).toEqual([0, 1, 2])
  })
  return { echoes, reads, seen, commitElsewhere, commitHere, takenForOwn, nextIsRead }
})

describe("Echoes", () => {
  it.scoped("the notification of an append made here is passed over; another session's makes the followers read", () =>
    Effect.gen(function*() {
      const { commitElsewhere, commitHere, echoes, reads, seen } = yield* setup
      expect([seen, reads]).toEqual([[0], [0]])
      echoes.sending("g")
      commitHere(1, 2)
      echoes.notified("g")
      yield* settle
      expect([seen, reads]).toEqual([[0, 1], [0]])
      commitElsewhere(3)
      echoes.notified("g")
      yield* settle
      expect([seen, reads]).toEqual([[0, 1, 2], [0, 2]])
      // Another goal's notification: no read.
      echoes.notified("other")
      yield* settle
      expect(reads).toEqual([0, 2])
    }))

  it.scoped("another session's notification taken for an append's own: that append's own makes the read", () =>
    Effect.gen(function*() {
      const { commitHere, echoes, seen, takenForOwn } = yield* setup
      yield* takenForOwn
      // The append (here at 2, behind the other session's) commits; its notification comes last.
      commitHere(2, 3)
      yield* settle
      echoes.notified("g")
      yield* settle
      expect(seen).toEqual([0, 1, 2])
    }))

  it.scoped("another session's notification taken for an append's own: when that append fails, the failure makes the read", () =>
    Effect.gen(function*() {
      const { echoes, nextIsRead, reads, seen, takenForOwn } = yield* setup
      // Another session appends seq 1 and notifies while this store's append of seq 1 is in flight...
      yield* takenForOwn
      // ...which then fails (it conflicts): its own notification never comes.
      echoes.failed("g")
      yield* settle
      expect([seen, reads]).toEqual([[0, 1], [0, 1]])
      // And the count is back: the next notification of another session is read.
      yield* nextIsRead
    }))

  it.scoped("a new LISTEN session forgets what it expected and every follower reads", () =>
    Effect.gen(function*() {
      const { commitElsewhere, echoes, nextIsRead, reads, seen } = yield* setup
      echoes.sending("g")
      commitElsewhere(2)
      echoes.notified(undefined)
      yield* settle
      expect([seen, reads]).toEqual([[0, 1], [0, 1]])
      yield* nextIsRead
    }))
})
