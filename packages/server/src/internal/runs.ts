/**
 * The server's runs: at most `concurrency` goals run at once, the others wait in a FIFO queue of
 * at most `maxQueued`. A goal admitted while it runs runs once more when it stops (a decision
 * or a cancel that came as it was suspending is then picked up). `stop` refuses new goals,
 * empties the queue and interrupts the runs (the runner records `Suspended(shutdown)`).
 */
import { Effect, Fiber, FiberSet, type Scope } from "effect"
import type { Activity } from "../Api.js"
import { Unavailable } from "../ApiError.js"
import { acquireSync } from "./release.js"

/** A place in the queue held for a goal being submitted; given back unless used. */
export interface Slot {
  used: boolean
}

export interface Runs {
  /** Hold a place for a goal about to be recorded, so the submission is refused before anything is written. */
  readonly reserve: Effect.Effect<Slot, Unavailable, Scope.Scope>
  /**
   * Queue a goal (in its reserved `slot`, or in a free place; `force` ignores the bound, for the
   * goals resumed at start). A goal running now runs again when it stops.
   */
  readonly admit: (goalId: string, options?: { readonly slot?: Slot; readonly force?: boolean }) => Effect.Effect<Activity, Unavailable>
  readonly activity: (goalId: string) => Activity
  /** Whether goals are accepted (false once stopping). */
  readonly accepting: () => boolean
  readonly counts: () => { readonly running: number; readonly queued: number }
  /** Refuse new goals, drop the queue, interrupt the runs and wait for them to record that they stopped. */
  readonly stop: Effect.Effect<void>
}

export const shuttingDown = () => new Unavailable({ reason: "shutting_down", message: "the server is shutting down" })

export const make = (options: {
  readonly concurrency: number
  readonly maxQueued: number
  /** Run one goal until it ends or suspends; failures are its own to report. */
  readonly run: (goalId: string) => Effect.Effect<void>
}): Effect.Effect<Runs, never, Scope.Scope> =>
  Effect.gen(function*() {
    const fibers = yield* FiberSet.make<void, never>()
    const running = new Map<string, { again: boolean }>()
    // A Set keeps insertion order: the queue, with O(1) membership.
    const queue = new Set<string>()
    let reserved = 0
    let open = true

    const full = () =>
      new Unavailable({
        reason: "queue_full",
        message: `${options.maxQueued} goals are waiting to run already; try again when some have started`
      })

    // Started from request handlers and from the end of other runs (finalizers): made interruptible
    // explicitly, or a run would inherit an uninterruptible region and could never be stopped.
    const start = (goalId: string): Effect.Effect<void> =>
      FiberSet.run(
        fibers,
        Effect.interruptible(options.run(goalId)).pipe(Effect.ensuring(Effect.suspend(() => finished(goalId))))
      ).pipe(Effect.asVoid)

    /** Start queued goals while there is a free slot. */
    const pump: Effect.Effect<void> = Effect.suspend(() => {
      const starting: Array<string> = []
      for (const goalId of queue) {
        if (running.size >= options.concurrency) break
        queue.delete(goalId)
        running.set(goalId, { again: false })
        starting.push(goalId)
      }
      return Effect.forEach(starting, start, { discard: true })
    })

    const finished = (goalId: string): Effect.Effect<void> => {
      const again = running.get(goalId)?.again === true
      running.delete(goalId)
      if (!open) return Effect.void
      if (again) queue.add(goalId)
      return pump
    }

    const activity = (goalId: string): Activity => (running.has(goalId) ? "running" : queue.has(goalId) ? "queued" : "idle")

    const reserve = acquireSync(
      Effect.suspend(() => {
        if (!open) return Effect.fail(shuttingDown())
        if (queue.size + reserved >= options.maxQueued) return Effect.fail(full())
        reserved++
        return Effect.succeed<Slot>({ used: false })
      }),
      (slot) => {
        if (!slot.used) reserved--
      }
    )

    const admit: Runs["admit"] = (goalId, { force = false, slot } = {}) =>
      Effect.suspend(() => {
        if (!open) return Effect.fail(shuttingDown())
        const held = slot !== undefined && !slot.used
        if (held) {
          slot.used = true
          reserved--
        }
        const current = running.get(goalId)
        if (current !== undefined) {
          current.again = true
          return Effect.succeed<Activity>("running")
        }
        if (queue.has(goalId)) return Effect.succeed<Activity>("queued")
        if (!held && !force && queue.size + reserved >= options.maxQueued) return Effect.fail(full())
        queue.add(goalId)
        return Effect.zipRight(pump, Effect.sync(() => activity(goalId)))
      })

    const stop = Effect.suspend(() => {
      open = false
      queue.clear()
      // All at once: each records its own `Suspended(shutdown)`.
      return Fiber.interruptAll(Array.from(fibers))
    })

    return {
      reserve,
      admit,
      activity,
      accepting: () => open,
      counts: () => ({ running: running.size, queued: queue.size }),
      stop
    }
  })
