/**
 * The followers of a store's goals in one process (`StateStore.follow`, `first`, `changes`), for a
 * store that reads its log from a database: each batch the store appends is handed, as it
 * commits, to the followers of its goal that want one of its events, so they need not read it.
 * The others are not woken (a run's cancel watcher sleeps through the run's own appends): the
 * batches a follower wants nothing of are kept as one range of seqs, handed over ahead of the next
 * batch it wants, so its place in the log moves over them without a read. A follower reads the log
 * only when it starts, across a gap (another connection appended between two of this process's
 * batches) and when the store says the log changed by other means.
 */
import { Chunk, Effect, Queue, type Scope } from "effect"
import type * as Event from "./Event.js"
import { acquirePlain } from "./internal/release.js"
import * as Watchers from "./internal/watchers.js"

/** What a follower reads from the log: the events from a seq (of its kinds, or more), and the seq after the log's last event. */
export interface Read {
  readonly events: ReadonlyArray<Event.Event>
  readonly end: number
}

export interface Followers {
  /** After a commit: `events`, from seq `from`, were appended to `goalId` in this process. */
  readonly appended: (goalId: string, from: number, events: ReadonlyArray<Event.Event>) => void
  /** The log changed by other means (another connection committed): the followers of `goalId`, or of every goal, read it again. */
  readonly changed: (goalId?: string) => void
  /**
   * Follow `goalId` from `fromSeq` while the scope lasts: each run of the Effect given gives the
   * next events of `tags` kinds (all without), at least one, waiting for them; `read` reads the log
   * from a seq where nothing was handed over.
   */
  readonly follow: <E>(
    goalId: string,
    fromSeq: number,
    tags: ReadonlyArray<string> | undefined,
    read: (fromSeq: number) => Effect.Effect<Read, E>
  ) => Effect.Effect<Effect.Effect<Chunk.Chunk<Event.Event>, E>, never, Scope.Scope>
}

/** What wakes a follower: seqs `[from, to)` appended here, with their events (none for a range it wanted nothing of), or `changed`. */
interface Wakeup {
  readonly from: number
  readonly to: number
  readonly events: ReadonlyArray<Event.Event>
}

interface Watcher {
  readonly wants: (event: Event.Event) => boolean
  readonly wakeups: Queue.Queue<Wakeup>
  /** The batches since the last one handed over that held nothing it wants, as one range. */
  skipped: { readonly from: number; readonly to: number } | undefined
}

/** The log may have changed anywhere: read it again. */
const changedAnyhow: Wakeup = { from: -1, to: -1, events: [] }

export const make = (): Followers => {
  const watchers = Watchers.make<Watcher>()

  const appended: Followers["appended"] = (goalId, from, events) => {
    if (events.length === 0) return
    const to = from + events.length
    for (const watcher of watchers.of(goalId)) {
      const skipped = watcher.skipped
      if (!events.some(watcher.wants)) {
        if (skipped === undefined || skipped.to === from) {
          watcher.skipped = { from: skipped?.from ?? from, to }
          continue
        }
        // Not next to the range (another connection appended between): the range goes first.
        Queue.unsafeOffer(watcher.wakeups, { ...skipped, events: [] })
        watcher.skipped = { from, to }
        continue
      }
      if (skipped !== undefined) Queue.unsafeOffer(watcher.wakeups, { ...skipped, events: [] })
      watcher.skipped = undefined
      Queue.unsafeOffer(watcher.wakeups, { from, to, events })
    }
  }

  const changed: Followers["changed"] = (goalId) => {
    for (const watcher of goalId === undefined ? watchers.all() : watchers.of(goalId)) Queue.unsafeOffer(watcher.wakeups, changedAnyhow)
  }

  /** A follower of `goalId`, for as long as the scope lasts. */
  const watch = (goalId: string, wants: (event: Event.Event) => boolean) =>
    Effect.flatMap(Queue.unbounded<Wakeup>(), (wakeups) => {
      const watcher: Watcher = { wants, wakeups, skipped: undefined }
      return Effect.as(
        acquirePlain(
          Effect.sync(() => watchers.add(goalId, watcher)),
          () => Effect.zipRight(Effect.sync(() => watchers.remove(goalId, watcher)), Queue.shutdown(wakeups))
        ),
        watcher
      )
    })

  const follow: Followers["follow"] = (goalId, fromSeq, tags, read) =>
    Effect.map(watch(goalId, (event) => tags === undefined || tags.includes(event._tag)), (watcher) => {
      let cursor = fromSeq
      // Whether the log must be read from `cursor`: at first, and after changes not handed over.
      let stale = true
      const next = Effect.gen(function*() {
        while (true) {
          if (stale) {
            // The read covers what was skipped so far (a later range joined to it is read again).
            watcher.skipped = undefined
            const batch = yield* read(cursor)
            stale = false
            if (batch.end > cursor) {
              cursor = batch.end
              const wanted = batch.events.filter(watcher.wants)
              if (wanted.length > 0) return Chunk.unsafeFromArray(wanted)
            }
          }
          // Wait for a batch of this goal holding a wanted event, or a change by other means.
          // Batches come in order (those with nothing wanted as ranges, ahead of the next one):
          // only a gap, or a change by other means, needs a read.
          const woken = [yield* Queue.take(watcher.wakeups), ...(yield* Queue.takeAll(watcher.wakeups))]
          const wanted: Array<Event.Event> = []
          for (const wakeup of woken) {
            if (wakeup === changedAnyhow) stale = true
            if (stale) break
            if (wakeup.to <= cursor) continue
            if (wakeup.from !== cursor) {
              stale = true
              break
            }
            for (const event of wakeup.events) if (watcher.wants(event)) wanted.push(event)
            cursor = wakeup.to
          }
          if (wanted.length > 0) return Chunk.unsafeFromArray(wanted)
        }
      })
      return next
    })

  return { appended, changed, follow }
}
