/**
 * Leases across processes: a goal leased in another process is refused here, naming the holder;
 * it is free once the holder releases it, at once when the holder is SIGKILLed (its database
 * session ends), and after the lease's time to live when the holder stalls (SIGSTOP), which then
 * finds its lease gone.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Either, Option, Schedule } from "effect"
import { PgStore } from "@rx/store-pg"
import * as TestDatabase from "./database.js"
import * as Processes from "./processes.js"

const ttl = 1_500
const renew = 300

describe("leases across processes", () => {
  layer(TestDatabase.layer, { excludeTestServices: true, timeout: "30 seconds" })((it) => {
    const setup = (goalId: string, ttlMs = ttl) =>
      Effect.gen(function*() {
        expect(Processes.isBuilt(), "run `pnpm build` first").toBe(true)
        const { url } = yield* TestDatabase.TestDatabase
        const store = yield* PgStore.make({ url, leaseTtlMs: ttlMs, leaseRenewMs: renew })
        const child = yield* Processes.start([url, "lease", goalId, String(ttlMs), String(renew)])
        yield* child.waitFor("HELD")
        return { url, store, child }
      })

    it.scoped("held in another process: refused here, naming it; free once it lets go", () =>
      Effect.gen(function*() {
        const goalId = "g-held"
        const { child, store, url } = yield* setup(goalId)
        const refused = yield* Effect.either(Effect.scoped(store.lease(goalId)))
        expect(Either.isLeft(refused) && refused.left).toMatchObject({ _tag: "@rx/kernel/LeaseHeld" })
        if (Either.isLeft(refused)) expect(refused.left.message).toContain(`pid ${child.pid} on host`)
        expect(Option.getOrUndefined(yield* store.runner(goalId))).toContain(`pid ${child.pid}`)
        // Held across renewals: still refused after several of them.
        yield* Effect.sleep(ttl + 2 * renew)
        expect(Either.isLeft(yield* Effect.either(Effect.scoped(store.lease(goalId))))).toBe(true)
        // A third process is refused too.
        const third = yield* Processes.run([url, "lease", goalId, String(ttl), String(renew)])
        expect(third.code, third.stdout + third.stderr).toBe(3)
        expect(third.stdout).toContain(`BUSY pid ${child.pid}`)
        yield* child.send("release")
        expect((yield* child.exit).stdout).toContain("RELEASED")
        expect(yield* store.runner(goalId)).toEqual(Option.none())
        yield* Effect.scoped(store.lease(goalId))
      }), 60_000)

    it.scoped("a holder killed with SIGKILL: its session ends, the lease is free at once (not after its time to live)", () =>
      Effect.gen(function*() {
        const goalId = "g-killed"
        // A time to live of a minute: only the end of the holder's session can free it in time.
        const { child, store } = yield* setup(goalId, 60_000)
        yield* child.kill("SIGKILL")
        yield* child.exit
        // Postgres ends the session as soon as it sees the socket close.
        yield* Effect.scoped(store.lease(goalId)).pipe(Effect.retry(Schedule.spaced(50)), Effect.timeout("5 seconds"))
      }), 60_000)

    it.scoped("a holder that stalls past the time to live loses the lease; when it wakes it finds it taken", () =>
      Effect.gen(function*() {
        const goalId = "g-stalled"
        const { child, store } = yield* setup(goalId)
        yield* child.kill("SIGSTOP")
        yield* Effect.addFinalizer(() => child.kill("SIGCONT"))
        const stopped = Date.now()
        // Refused while the lease has not expired; taken once it has.
        expect(Either.isLeft(yield* Effect.either(Effect.scoped(store.lease(goalId))))).toBe(true)
        yield* store.lease(goalId).pipe(Effect.retry(Schedule.spaced(100)), Effect.timeout(ttl + 2_000))
        expect(Date.now() - stopped).toBeGreaterThanOrEqual(ttl - renew - 100)
        expect(Option.getOrUndefined(yield* store.runner(goalId))).toContain(`pid ${process.pid}`)
        yield* child.kill("SIGCONT")
        yield* child.waitFor("is no longer this runner's", 10_000)
      }), 60_000)
  })
})
