/**
 * A health check of an rx database, read-only: SQLite's `integrity_check`, then every goal's
 * log (seqs contiguous from 0, exactly one `Terminated` and last, every event's checksum matches
 * and it decodes, a behaviour version this rx knows), the `goals` summaries against the logs, and
 * leases whose holder is gone. A damaged database is a finding in the report, never a failure of
 * the check; nothing is repaired.
 */
import { Cause, Clock, Effect, Either, Exit, Schema } from "effect"
import { Behaviour } from "@rx/kernel"
import * as Config from "./Config.js"
import { checksumProblem, decodeRow, eventColumns } from "./internal/codec.js"
import * as Database from "./internal/database.js"
import { toStoreError } from "./internal/errors.js"
import { prepare } from "./internal/file.js"
import { decodeHolder, describeHolder, isAlive } from "./internal/lease.js"
import { field } from "./internal/sql.js"
import * as Migrations from "./Migrations.js"

/** What a finding is about. */
export const Check = Schema.Literal("open", "integrity", "seq", "terminated", "checksum", "decode", "behaviour", "summary", "lease")
export type Check = typeof Check.Type

/** One thing found: a `problem` makes the database unhealthy; a `warning` does not. */
export const Finding = Schema.Struct({
  check: Check,
  severity: Schema.Literal("problem", "warning"),
  goalId: Schema.optional(Schema.String),
  seq: Schema.optional(Schema.Number),
  message: Schema.String
})
export type Finding = typeof Finding.Type

/** The report: healthy when no finding is a problem. */
export const Report = Schema.Struct({
  filename: Schema.String,
  healthy: Schema.Boolean,
  /** Whether the file could be opened as an rx log and its logs were read. */
  opened: Schema.Boolean,
  goals: Schema.Number,
  events: Schema.Number,
  findings: Schema.Array(Finding)
})
export type Report = typeof Report.Type

/** Findings of one kind kept per goal (then one line counting the rest), so a wrecked log stays readable. */
const perGoal = 10

/** Rows read per query while scanning a goal. */
const page = 1_000

/** Check the database at `filename` (opened read-only; never created, migrated or changed). */
export const check = (filename: string, options: { readonly leaseTimeoutMs?: number } = {}): Effect.Effect<Report> =>
  Effect.gen(function*() {
    const findings: Array<Finding> = []
    const problem = (check: Check, message: string, at: { readonly goalId?: string; readonly seq?: number } = {}) =>
      findings.push({ check, severity: "problem", ...at, message })
    const report = (opened: boolean, goals = 0, events = 0): Report => ({
      filename,
      healthy: findings.every((f) => f.severity !== "problem"),
      opened,
      goals,
      events,
      findings
    })
    const config = yield* Config.decode({ filename, readonly: true, create: false }).pipe(Effect.either)
    if (Either.isLeft(config)) {
      problem("open", config.left.message)
      return report(false)
    }
    const where = { ...config.right, what: `checking ${filename}` }
    const prepared = yield* Effect.either(prepare(config.right))
    if (Either.isLeft(prepared)) {
      problem("open", prepared.left.message)
      return report(false)
    }
    const outcome = yield* Effect.scoped(Effect.gen(function*() {
      const db = yield* Database.open({ filename, readonly: true, fileMustExist: true, busyTimeoutMs: config.right.busyTimeoutMs })
      const schema = yield* Effect.either(Migrations.run(db.sql, { ...config.right, readonly: true, create: false }))
      const now = yield* Clock.currentTimeMillis
      const leaseTimeoutMs = options.leaseTimeoutMs ?? config.right.leaseTimeoutMs
      // One read transaction: a runner appending meanwhile does not make the checks disagree.
      return yield* db.readConsistent((tx) => {
        const integrity = attempt(() => tx.all("PRAGMA integrity_check(20)"))
        if (Either.isLeft(integrity)) problem("integrity", toStoreError(where, integrity.left).message)
        else {
          const lines = integrity.right.map((row) => String(field(row, "integrity_check")))
          if (!(lines.length === 1 && lines[0] === "ok")) {
            for (const line of lines) problem("integrity", `SQLite's integrity_check: ${line}`)
          }
        }
        if (Either.isLeft(schema)) {
          problem("open", schema.left.message)
          return Either.right(report(false))
        }
        return Either.right(scan(tx, filename, schema.right, now, leaseTimeoutMs, findings, report))
      })
    })).pipe(Effect.exit)
    if (Exit.isSuccess(outcome)) return outcome.value
    const failure = Cause.squash(outcome.cause)
    problem("open", toStoreError(where, failure).message)
    return report(false)
  })

const attempt = <A>(f: () => A): Either.Either<A, unknown> => Either.try({ try: f, catch: (error) => error })

/** Every goal's log, the summaries and the leases (a database of schema version `schema`). */
const scan = (
  tx: Database.Tx,
  filename: string,
  schema: number,
  now: number,
  leaseTimeoutMs: number,
  findings: Array<Finding>,
  report: (opened: boolean, goals: number, events: number) => Report
): Report => {
  const where = { filename, busyTimeoutMs: 0, what: `reading ${filename}` }
  const add = (finding: Finding) => findings.push(finding)
  const rows = attempt(() => tx.all("SELECT goal_id FROM events GROUP BY goal_id UNION SELECT goal_id FROM goals ORDER BY 1"))
  if (Either.isLeft(rows)) {
    add({ check: "seq", severity: "problem", message: `the goals cannot be listed: ${toStoreError(where, rows.left).message}` })
    return report(true, 0, 0)
  }
  const goalIds = rows.right.map((row) => String(field(row, "goal_id")))
  let events = 0
  for (const goalId of goalIds) {
    const scanned = attempt(() => scanGoal(tx, schema, goalId, add))
    if (Either.isLeft(scanned)) {
      add({ check: "seq", severity: "problem", goalId, message: `goal ${goalId}: its log cannot be read: ${toStoreError(where, scanned.left).message}` })
      continue
    }
    events += scanned.right
  }
  const leases = attempt(() => tx.all("SELECT goal_id, host, pid, token, acquired_at, heartbeat_at FROM leases"))
  if (Either.isRight(leases)) {
    for (const row of leases.right) {
      const goalId = String(field(row, "goal_id"))
      const holder = decodeHolder(goalId, row)
      if (Either.isLeft(holder)) {
        add({ check: "lease", severity: "problem", goalId, message: holder.left.message })
      } else if (!isAlive(holder.right, now, leaseTimeoutMs)) {
        add({
          check: "lease",
          severity: "warning",
          goalId,
          message: `goal ${goalId}: stale lease, its holder is gone (${describeHolder(holder.right)}); the next rx resume takes it over`
        })
      }
    }
  }
  return report(true, goalIds.length, events)
}

/** One goal: seqs, `Terminated`, decoding, and its summary row. Returns the number of events. */
const scanGoal = (tx: Database.Tx, schema: number, goalId: string, add: (finding: Finding) => void): number => {
  const counts = new Map<Check, number>()
  const found = (check: Check, message: string, seq?: number) => {
    const n = (counts.get(check) ?? 0) + 1
    counts.set(check, n)
    if (n <= perGoal) add({ check, severity: "problem", goalId, ...(seq === undefined ? {} : { seq }), message: `goal ${goalId}: ${message}` })
  }
  const select = `SELECT ${eventColumns(schema)} FROM events WHERE goal_id = ? AND seq > ? ORDER BY seq LIMIT ?`
  let expected = 0
  let last = -1
  let total = 0
  const terminated: Array<number> = []
  while (true) {
    const rows = tx.values(select, [goalId, last, page])
    for (const row of rows) {
      const seq = Number(row[0])
      if (seq !== expected) {
        found("seq", expected === seq - 1 ? `no event at seq ${expected} (the log jumps to ${seq})` : `no events at seqs ${expected} to ${seq - 1} (the log jumps to ${seq})`, expected)
      }
      // A payload changed since rx wrote it is reported as such, not as whatever its decoding then says.
      const changed = checksumProblem(row)
      const decoded = changed === undefined ? decodeRow(goalId, seq, row) : Either.left(changed)
      if (changed !== undefined) found("checksum", `seq ${seq}: ${changed}`, seq)
      else if (Either.isLeft(decoded)) found("decode", `seq ${seq}: ${decoded.left}`, seq)
      else if (seq === 0 && decoded.right._tag !== "GoalSubmitted") found("seq", `the log starts with ${decoded.right._tag}, not GoalSubmitted`, 0)
      else if (decoded.right._tag === "GoalSubmitted" && !Behaviour.isSupported(decoded.right.behaviour)) {
        found(
          "behaviour",
          `seq ${seq}: GoalSubmitted says behaviour version ${decoded.right.behaviour}, which this rx does not know (it runs 1 to ${Behaviour.current}): a newer rx wrote the goal, and this one can neither resume nor replay it; upgrade rx`,
          seq
        )
      }
      if (row[1] === "Terminated" || (Either.isRight(decoded) && decoded.right._tag === "Terminated")) terminated.push(seq)
      expected = seq + 1
      last = seq
      total++
    }
    if (rows.length < page) break
  }
  if (terminated.length > 1) found("terminated", `${terminated.length} Terminated events (seqs ${terminated.join(", ")}); a log ends with exactly one`, terminated[1])
  else if (terminated.length === 1 && terminated[0] !== last) found("terminated", `Terminated at seq ${terminated[0]} is not the last event (the log goes on to seq ${last})`, terminated[0])
  const summary = tx.get("SELECT status, next_seq FROM goals WHERE goal_id = ?", [goalId])
  if (total === 0) found("summary", "listed in goals but has no events")
  else if (summary === undefined) found("summary", `has ${total} events but no row in goals (rx list does not show it)`)
  else {
    const status = terminated.length > 0 ? "terminated" : "open"
    if (field(summary, "next_seq") !== last + 1 || field(summary, "status") !== status) {
      found("summary", `the goals row says ${String(field(summary, "status"))} with next seq ${String(field(summary, "next_seq"))}, the log is ${status} and ends at seq ${last}`)
    }
  }
  for (const [check, n] of counts) {
    if (n > perGoal) add({ check, severity: "problem", goalId, message: `goal ${goalId}: ${n - perGoal} more ${check} problems` })
  }
  return total
}
