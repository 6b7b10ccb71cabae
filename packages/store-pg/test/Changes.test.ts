/**
 * `changes` across processes through LISTEN/NOTIFY: a follower in another process is woken by each
 * append made here; a follower here sees a run in another process event by event; a LISTEN
 * connection lost without a word is replaced and the follower misses nothing.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, layer } from "@effect/vitest"
import { Chunk, Context, Effect, Fiber, Layer, Schema, Stream } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Event } from "@rx/kernel"
import { StoreConformance } from "@rx/kernel/testing"
import { PgStore } from "@rx/store-pg"
import { endsOnce } from "./fixtures.js"
import * as TestDatabase from "./database.js"
import * as Processes from "./processes.js"

const encode = Schema.encodeSync(Event.Event)

describe("changes through LISTEN/NOTIFY", () => {
  layer(TestDatabase.layer, { excludeTestServices: true, timeout: "30 seconds" })((it) => {
    it.scoped("a follower in another process is woken by each append made here", () =>
      Effect.gen(function*() {
        expect(Processes.isBuilt(), "run `pnpm build` first").toBe(true)
        const { url } = yield* TestDatabase.TestDatabase
        const store = yield* PgStore.make({ url })
        const goalId = "g-woken"
        const log = StoreConformance.sampleLog(goalId)
        const follower = yield* Processes.start([url, "follow", goalId])
        yield* store.append(goalId, 0, log.slice(0, 1))
        // Seen: the follower listens (it listens before it reads).
        yield* follower.waitFor("EVENT 0 GoalSubmitted")
        for (const event of log.slice(1)) {
          yield* Effect.sleep("100 millis")
          const appended = Date.now()
          yield* store.append(goalId, event.seq, [event])
          yield* follower.waitFor(`EVENT ${event.seq} ${event._tag}`, 5_000)
          // A wake-up, not a poll: well under a second.
          expect(Date.now() - appended).toBeLessThan(1_000)
        }
        const exit = yield* follower.exit
        expect([exit.code, exit.stderr], exit.stdout).toEqual([0, ""])
        expect(exit.stdout).toContain("FOLLOWED")
      }), 60_000)

    it.scoped("changes here follows a run in another process, event by event, to its end", () =>
      Effect.gen(function*() {
        expect(Processes.isBuilt(), "run `pnpm build` first").toBe(true)
        const { url } = yield* TestDatabase.TestDatabase
        const store = yield* PgStore.make({ url })
        const goalId = "g-follow"
        const dir = yield* Effect.acquireRelease(
          Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "rx-pg-"))),
          (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
        )
        const follow = yield* store.changes(goalId, 0).pipe(
          Stream.takeUntil((e) => e._tag === "Terminated"),
          Stream.runCollect,
          Effect.fork
        )
        const exit = yield* Processes.run([url, "run", goalId, path.join(dir, "ledger"), "none", "0", "20"])
        expect(exit.code, exit.stdout + exit.stderr).toBe(0)
        const followed = Chunk.toReadonlyArray(yield* Fiber.join(follow).pipe(Effect.timeout("20 seconds")))
        const stored = yield* store.load(goalId)
        expect(followed.map((e) => encode(e))).toEqual(stored.map((e) => encode(e)))
        expect(endsOnce(followed)).toBe(true)
      }), 60_000)

    it.scoped("a LISTEN connection lost without a word is replaced, and the follower misses nothing", () =>
      Effect.gen(function*() {
        const { url } = yield* TestDatabase.TestDatabase
        // The follower's store checks its LISTEN session often; the writer is another store.
        const follower = yield* PgStore.make({ url, listenCheckMs: 200, connectTimeoutMs: 1_500 })
        const writer = yield* PgStore.make({ url })
        const sql = Context.get(yield* Layer.build(PgStore.layerWithClient({ url })), SqlClient.SqlClient)
        const goalId = "g-lost"
        const log = StoreConformance.sampleLog(goalId)
        const seen: Array<number> = []
        const follow = yield* follower.changes(goalId, 0).pipe(
          Stream.tap((e) => Effect.sync(() => seen.push(e.seq))),
          Stream.takeUntil((e) => e._tag === "Terminated"),
          Stream.runCollect,
          Effect.fork
        )
        yield* writer.append(goalId, 0, log.slice(0, 2))
        yield* Effect.sleep("100 millis").pipe(Effect.repeat({ until: () => seen.length === 2 }), Effect.timeout("5 seconds"))
        // End every LISTEN session on the database, as a failover or a proxy's timeout would.
        const ended = yield* sql<{ readonly pid: number }>`SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE datname = current_database() AND query LIKE 'LISTEN %'`
        expect(ended.length).toBeGreaterThan(0)
        yield* writer.append(goalId, 2, log.slice(2))
        const followed = Chunk.toReadonlyArray(yield* Fiber.join(follow).pipe(Effect.timeout("15 seconds")))
        expect(followed.map((e) => e.seq)).toEqual(log.map((e) => e.seq))
        // A new LISTEN session took the place of the ended one.
        const listening = yield* sql<{ readonly pid: number }>`SELECT pid FROM pg_stat_activity
          WHERE datname = current_database() AND query LIKE 'LISTEN %'`
        expect(listening.length).toBeGreaterThan(0)
        for (const { pid } of listening) expect(ended.map((row) => row.pid)).not.toContain(pid)
      }), 60_000)
  })
})
