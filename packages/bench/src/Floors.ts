/**
 * What the figures are measured against, in the same run: a raw better-sqlite3 commit (one
 * small row per transaction, as durable as the store's) and a plain Effect loop in memory
 * doing the same service calls and event pushes as an iteration, with no kernel logic.
 */
import Database from "better-sqlite3"
import { Context, Effect } from "effect"

/** Microseconds per `BEGIN IMMEDIATE; INSERT; COMMIT` on a WAL file. */
export const sqliteCommit = (filename: string, synchronous: "FULL" | "NORMAL", commits: number): number => {
  const db = new Database(filename)
  db.pragma("journal_mode = WAL")
  db.pragma(`synchronous = ${synchronous}`)
  db.exec("CREATE TABLE IF NOT EXISTS t (goal TEXT NOT NULL, seq INTEGER NOT NULL, payload TEXT NOT NULL, PRIMARY KEY (goal, seq)) WITHOUT ROWID")
  const insert = db.prepare("INSERT INTO t (goal, seq, payload) VALUES (?, ?, ?)")
  const payload = JSON.stringify({ _tag: "ToolSucceeded", output: { text: "message 1" }, padding: "x".repeat(200) })
  const begin = db.prepare("BEGIN IMMEDIATE")
  const commit = db.prepare("COMMIT")
  const started = performance.now()
  for (let i = 0; i < commits; i++) {
    begin.run()
    insert.run("floor", i, payload)
    commit.run()
  }
  const elapsed = performance.now() - started
  db.close()
  return (elapsed * 1000) / commits
}

class Service extends Context.Tag("bench/Service")<Service, { readonly call: (n: number) => Effect.Effect<number> }>() {}

/** Microseconds per iteration of an Effect loop: two service calls and five events pushed. */
export const effectLoop = (iterations: number): number => {
  const events: Array<{ readonly seq: number; readonly at: number }> = []
  const program = Effect.gen(function*() {
    const service = yield* Service
    for (let i = 0; i < iterations; i++) {
      const answer = yield* service.call(i)
      const output = yield* service.call(answer)
      for (let k = 0; k < 5; k++) events.push({ seq: events.length, at: output })
    }
  }).pipe(Effect.provideService(Service, { call: (n) => Effect.succeed(n + 1) }))
  const started = performance.now()
  Effect.runSync(program)
  return ((performance.now() - started) * 1000) / iterations
}
