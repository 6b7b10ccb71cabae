/**
 * Wake-ups for `changes`, through Postgres LISTEN/NOTIFY: each append's transaction notifies
 * channel `rx_events` with its goal id, delivered to every listening session when it commits. A
 * store has one LISTEN session for all its followers, started by the first; it checks that session
 * by notifying itself every `checkMs` and replaces it when the notification does not come back
 * (a connection lost without a word), after which every follower reads its goal again. Each
 * notification is said to `onGoal` (the goal's id, or `undefined`: any goal may have moved).
 */
import type * as PgClient from "@effect/sql-pg/PgClient"
import { Cause, Deferred, Effect, Exit, Fiber, Schedule, type Scope, Stream } from "effect"
import * as os from "node:os"
import { StateStore } from "@rx/kernel"
import { redact } from "../Config.js"
import { detailOf } from "./errors.js"
import { rows } from "./sql.js"

/** The channel appends notify. */
export const channel = "rx_events"

/** A payload names a goal with this prefix; `anyGoal` says some goal moved (an id too long for a payload). */
export const goalPrefix = "g:"
export const anyGoal = "*"
const pingPrefix = "p:"

/** The most bytes of a goal id sent in a payload (Postgres allows 8,000 bytes). */
export const maxPayloadBytes = 7_900

/** The payload that announces an append to `goalId`. */
export const payloadOf = (goalId: string): string =>
  Buffer.byteLength(goalId, "utf8") + goalPrefix.length <= maxPayloadBytes ? `${goalPrefix}${goalId}` : anyGoal

export interface Listener {
  /** Once LISTEN is known to work (started by the first call): no commit after this is missed. */
  readonly ready: Effect.Effect<void, StateStore.StoreError>
}

export const make = (
  client: PgClient.PgClient,
  options: { readonly checkMs: number; readonly timeoutMs: number; readonly database: string },
  /** A goal moved (another session's commit, or this one's), or (`undefined`) any goal may have. */
  onGoal: (goalId: string | undefined) => void
): Effect.Effect<Listener, never, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const pings = new Map<string, Deferred.Deferred<void>>()
    const self = `${pingPrefix}${os.hostname()}:${process.pid}:${Math.round(performance.timeOrigin)}:${Math.random().toString(36).slice(2)}`
    let pinged = 0
    let ready = yield* Deferred.make<void>()
    let started = false
    let lastProblem = "LISTEN has not started yet"

    const onPayload = (payload: string): Effect.Effect<void> => {
      if (payload.startsWith(goalPrefix)) return Effect.sync(() => onGoal(payload.slice(goalPrefix.length)))
      if (payload === anyGoal) return Effect.sync(() => onGoal(undefined))
      const echoed = pings.get(payload)
      return echoed === undefined ? Effect.void : Effect.asVoid(Deferred.succeed(echoed, undefined))
    }

    /**
     * Notify ourselves, again every `everyMs` (a LISTEN still starting misses the first), until one
     * comes back through LISTEN; whether one did within the timeout.
     */
    const ping = (everyMs: number) =>
      Effect.gen(function*() {
        const echoed = yield* Deferred.make<void>()
        const sent: Array<string> = []
        const send = Effect.suspend(() => {
          const payload = `${self}:${++pinged}`
          pings.set(payload, echoed)
          sent.push(payload)
          // Not `client.notify`: it sends `NOTIFY channel, $1`, which Postgres refuses (NOTIFY takes no parameters).
          return rows(client, "SELECT pg_notify($1, $2)", [channel, payload])
        })
        const exit = yield* Effect.raceFirst(
          Deferred.await(echoed),
          Effect.zipRight(Effect.repeat(send, Schedule.spaced(everyMs)), Effect.never)
        ).pipe(
          Effect.timeoutFail({ duration: options.timeoutMs, onTimeout: () => `no notification came back within ${options.timeoutMs} ms` }),
          Effect.ensuring(Effect.sync(() => sent.forEach((payload) => pings.delete(payload)))),
          Effect.exit
        )
        if (Exit.isSuccess(exit)) return true
        lastProblem = Cause.isFailType(exit.cause)
          ? typeof exit.cause.error === "string" ? exit.cause.error : `NOTIFY failed: ${detailOf(exit.cause.error)}`
          : Cause.pretty(exit.cause)
        return false
      })

    /** One LISTEN session, from its start until it is found not to work; says why. */
    const session = Effect.gen(function*() {
      const listening = yield* Effect.fork(Stream.runForEach(client.listen(channel), onPayload))
      const died = Effect.map(Effect.exit(Fiber.join(listening)), (exit) =>
        Exit.isSuccess(exit) ? "the LISTEN connection closed" : `LISTEN failed: ${Cause.squash(exit.cause)}`)
      const watch = Effect.gen(function*() {
        if (!(yield* ping(100))) return lastProblem
        yield* Deferred.succeed(ready, undefined)
        // Anything committed while no session listened is read again.
        onGoal(undefined)
        while (true) {
          yield* Effect.sleep(options.checkMs)
          if (!(yield* ping(1_000))) return lastProblem
        }
      })
      const why = yield* Effect.raceFirst(died, watch)
      // Its finalizers may wait on a dead connection: do not wait for them.
      yield* Fiber.interruptFork(listening)
      return why
    })

    const loop = Effect.forever(Effect.gen(function*() {
      const why = yield* session
      lastProblem = why
      if (yield* Deferred.isDone(ready)) ready = yield* Deferred.make<void>()
      yield* Effect.logWarning(
        `rx's LISTEN session on ${options.database} does not work (${redact(why)}); followers of goals wait until a new one does`
      )
      yield* Effect.sleep(Math.min(1_000, options.checkMs))
    }))

    const start = Effect.suspend(() => {
      if (started) return Effect.void
      started = true
      return Effect.asVoid(Effect.forkIn(loop, scope))
    })

    const isReady: Listener["ready"] = Effect.gen(function*() {
      yield* start
      yield* Effect.suspend(() => Deferred.await(ready)).pipe(
        Effect.timeoutFail({
          duration: options.timeoutMs,
          onTimeout: () =>
            new StateStore.StoreError({
              message: `following goals needs LISTEN on ${options.database}, which does not work (${redact(lastProblem)}); check the connection to Postgres, then try again`
            })
        })
      )
    })

    return { ready: isReady }
  })
