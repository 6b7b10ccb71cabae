/**
 * Appends racing at one seq: 8 writers, each a store with connections of its own, then 8 writer
 * processes. Exactly one append wins each seq, the losers get AppendConflict, and the log stays
 * contiguous with every winner's event where it claimed.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Either } from "effect"
import type { Event, StateStore } from "@rx/kernel"
import { PgStore } from "@rx/store-pg"
import { submitted } from "./fixtures.js"
import * as TestDatabase from "./database.js"
import * as Processes from "./processes.js"

const writers = 8

const cancel = (goalId: string, seq: number, writer: number): Event.Event => ({
  _tag: "CancelRequested",
  goalId,
  seq,
  iteration: 0,
  at: 1_000 + seq,
  reason: `writer ${writer}`
})

/** A store of its own (its own pool): writers share nothing but the database. */
const storeOn = (url: string) => PgStore.make({ url, maxConnections: 2 })

describe("appends racing at one seq", () => {
  layer(TestDatabase.layer, { excludeTestServices: true, timeout: "30 seconds" })((it) => {
    it.scoped("8 writers with connections of their own: one wins each seq, the others conflict", () =>
      Effect.gen(function*() {
        const { url } = yield* TestDatabase.TestDatabase
        const stores = yield* Effect.all(Array.from({ length: writers }, () => storeOn(url)))
        const goalId = "g-fibers"
        // The first event too: no summary row exists yet, the primary key settles it.
        const first = yield* Effect.all(stores.map((store) => Effect.either(store.append(goalId, 0, [submitted(goalId)]))), {
          concurrency: "unbounded"
        })
        expect(first.filter(Either.isRight)).toHaveLength(1)
        for (const lost of first.filter(Either.isLeft)) expect(lost.left).toMatchObject({ _tag: "@rx/kernel/AppendConflict", actualSeq: 1 })
        const rounds = 40
        const winners: Array<number> = []
        for (let seq = 1; seq <= rounds; seq++) {
          const results = yield* Effect.all(
            stores.map((store, writer) => Effect.either(store.append(goalId, seq, [cancel(goalId, seq, writer)]))),
            { concurrency: "unbounded" }
          )
          const won = results.flatMap((result, writer) => (Either.isRight(result) ? [writer] : []))
          expect(won, `seq ${seq}`).toHaveLength(1)
          winners.push(won[0] ?? -1)
          for (const result of results) {
            if (Either.isLeft(result)) expect(result.left).toMatchObject({ _tag: "@rx/kernel/AppendConflict", expectedSeq: seq, actualSeq: seq + 1 })
          }
        }
        const log = yield* (stores[0] as StateStore.StateStore["Type"]).load(goalId)
        expect(log.map((e) => e.seq)).toEqual(Array.from({ length: rounds + 1 }, (_, i) => i))
        expect(log.slice(1).map((e) => (e._tag === "CancelRequested" ? e.reason : ""))).toEqual(winners.map((w) => `writer ${w}`))
        const summary = yield* (stores[1] as StateStore.StateStore["Type"]).goal(goalId)
        expect(summary._tag === "Some" && summary.value.nextSeq).toBe(rounds + 1)
      }), 60_000)

    it.scoped("8 writer processes racing to the end of one log: each seq is won once, none lost", () =>
      Effect.gen(function*() {
        expect(Processes.isBuilt(), "run `pnpm build` first").toBe(true)
        const { url } = yield* TestDatabase.TestDatabase
        const goalId = "g-processes"
        const until = 240
        const store = yield* storeOn(url)
        yield* store.append(goalId, 0, [submitted(goalId)])
        const children = yield* Effect.all(
          Array.from({ length: writers }, (_, w) => Processes.start([url, "race", goalId, String(w), String(until)]))
        )
        // All open and waiting: start them together, so they race from the first append.
        yield* Effect.forEach(children, (child) => child.waitFor("READY"), { concurrency: "unbounded" })
        yield* Effect.forEach(children, (child) => child.send("go"))
        const exits = yield* Effect.forEach(children, (child) => child.exit, { concurrency: "unbounded" })
        for (const exit of exits) expect([exit.code, exit.stderr], exit.stdout).toEqual([0, ""])
        const claims = exits.map((exit) => [...exit.stdout.matchAll(/^WON (\d+)$/gm)].map((m) => Number(m[1])))
        const conflicts = exits.map((exit) => Number(/^DONE (\d+)$/m.exec(exit.stdout)?.[1] ?? "-1"))
        const log = yield* store.load(goalId)
        expect(log.map((e) => e.seq)).toEqual(Array.from({ length: until }, (_, i) => i))
        // Every seq after the first was claimed by exactly one writer, whose event is stored there.
        const claimed = claims.flat().sort((a, b) => a - b)
        expect(claimed).toEqual(Array.from({ length: until - 1 }, (_, i) => i + 1))
        claims.forEach((seqs, w) => {
          for (const seq of seqs) expect(log[seq]).toMatchObject({ _tag: "CancelRequested", reason: String(w) })
        })
        // They did race: appends were refused as conflicts, and more than one writer won.
        expect(conflicts.every((n) => n >= 0)).toBe(true)
        expect(conflicts.reduce((a, b) => a + b, 0)).toBeGreaterThan(0)
        expect(claims.filter((seqs) => seqs.length > 0).length).toBeGreaterThan(1)
      }), 120_000)
  })
})
