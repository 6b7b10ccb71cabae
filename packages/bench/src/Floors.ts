/**
 * What the figures are measured against, in the same run: a raw better-sqlite3 commit (one
 * small row per transaction, as durable as the store's), a plain Effect loop in memory doing
 * the same service calls and event pushes as an iteration, with no kernel logic, and that loop
 * making an iteration's two commits on rx's own tables with raw better-sqlite3.
 */
import type { Event } from "@rx/kernel"
import Database from "better-sqlite3"
import { Context, Effect } from "effect"
import { crc32 } from "node:zlib"

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

/**
 * Microseconds per iteration of an Effect loop making, with raw better-sqlite3 on a log the
 * store created (its tables), the two commits the store makes per iteration: each `BEGIN
 * IMMEDIATE`, the goal's row moved on where it is still at the expected seq, the events' rows
 * (the payloads of `events`, a real iteration's, as the store writes them), `COMMIT`. What the
 * store adds over it is its own cost: encoding, checks, Effect steps.
 */
export const sqliteStoreCommits = (
  filename: string,
  synchronous: "FULL" | "NORMAL",
  iterations: number,
  events: ReadonlyArray<Event.Event>
): number => {
  const db = new Database(filename)
  db.pragma(`synchronous = ${synchronous}`)
  const goalId = "floor"
  db.prepare("INSERT INTO goals (goal_id, goal, status, iterations, next_seq, last_iteration, reason, submitted_at, updated_at) VALUES (?, ?, 'open', 0, 1, 0, NULL, 0, 0)")
    .run(goalId, "benchmark")
  const begin = db.prepare("BEGIN IMMEDIATE")
  const commit = db.prepare("COMMIT")
  const advance = db.prepare(`UPDATE goals SET status = ?, iterations = ?, next_seq = ?, last_iteration = ?, reason = ?, updated_at = ?
WHERE goal_id = ? AND next_seq = ?`)
  const insert = db.prepare(
    "INSERT INTO events (goal_id, seq, tag, version, format, payload, checksum) VALUES (?, ?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?, ?)"
  )
  // The iteration's four events, stored as the store does (slim payloads: no _tag, goalId, seq;
  // the payload's CRC-32, computed here once: computing it is the store's cost, not SQLite's).
  const rows = events.map(({ _tag, goalId: _g, seq: _s, ...rest }) => {
    const payload = JSON.stringify(rest)
    return { tag: _tag, payload, checksum: crc32(payload) | 0 }
  })
  type Row = (typeof rows)[number]
  const pair = (seq: number, a: Row, b: Row, done: number) => {
    begin.run()
    advance.run("open", done, seq + 2, done, null, seq, goalId, seq)
    insert.run(goalId, seq, a.tag, 2, 2, a.payload, a.checksum, goalId, seq + 1, b.tag, 2, 2, b.payload, b.checksum)
    commit.run()
  }
  const [answer, started, succeeded, completed] = rows
  if (answer === undefined || started === undefined || succeeded === undefined || completed === undefined) {
    db.close()
    return Number.NaN
  }
  const program = Effect.gen(function*() {
    let seq = 1
    for (let i = 0; i < iterations; i++) {
      yield* Effect.sync(() => pair(seq, answer, started, i))
      yield* Effect.sync(() => pair(seq + 2, succeeded, completed, i + 1))
      seq += 4
    }
  })
  const started0 = performance.now()
  Effect.runSync(program)
  const elapsed = performance.now() - started0
  db.close()
  return (elapsed * 1000) / iterations
}
