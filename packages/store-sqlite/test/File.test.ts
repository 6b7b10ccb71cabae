/**
 * The database file before SQLite opens it: what a killed rx or a hostile process left beside a
 * log never reaches it, and never stays.
 */
import { describe, expect, it } from "@effect/vitest"
import { StateStore } from "@rx/kernel"
import { SqliteStore } from "@rx/store-sqlite"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { submitted } from "./fixtures.js"
import { tempDb } from "./helpers.js"

const withStore = <A, E>(filename: string, use: (store: StateStore.StateStore["Type"]) => Effect.Effect<A, E>) =>
  Effect.flatMap(StateStore.StateStore, use).pipe(Effect.provide(SqliteStore.layer({ filename })))

/** A rollback journal with a valid header, which SQLite would take as hot and roll back. */
const hotJournal = (filename: string) => {
  const journal = Buffer.alloc(1_024)
  Buffer.from([0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7]).copy(journal)
  fs.writeFileSync(`${filename}-journal`, journal)
}

describe("the log's file", () => {
  it.scoped("a rollback journal planted beside a WAL log is set aside before SQLite opens it; the log is intact", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      yield* withStore(filename, (store) => store.append("g1", 0, [submitted("g1")]))
      hotJournal(filename)
      const events = yield* withStore(filename, (store) => store.load("g1"))
      expect(events.map((e) => e._tag)).toEqual(["GoalSubmitted"])
      expect(fs.existsSync(`${filename}-journal`)).toBe(false)
      expect(fs.existsSync(`${filename}-journal.refused-by-rx`)).toBe(true)
    }))

  it.scoped("what a process killed while creating the log left is removed at the next open", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      const dir = path.dirname(filename)
      // A pid no process has (above the kernel's pid_max), and one that is alive (this one).
      const dead = [".rx.db.99999999.1.creating", ".rx.db.99999999.1.creating-journal"]
      const live = `.rx.db.${process.pid}.7.creating`
      for (const name of [...dead, live, ".other.db.99999999.1.creating"]) fs.writeFileSync(path.join(dir, name), "")
      yield* withStore(filename, (store) => store.append("g1", 0, [submitted("g1")]))
      const left = fs.readdirSync(dir)
      for (const name of dead) expect(left).not.toContain(name)
      expect(left).toContain(live)
      expect(left).toContain(".other.db.99999999.1.creating")
    }))
})
